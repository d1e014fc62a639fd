/**
 * `job_input`: writes to the stdin of a running interactive job (started with interactive or tty) and, with eof,
 * closes it. Only the subject that started the job may write; any other caller, and a job of another team, gets
 * "not found". Every write is an audit row with its size and sha256; the text itself only where the policy keeps
 * it (interactive.auditInputText).
 */
import type { McpServer } from '@modelcontextprotocol/server';
import { JobInputInput, JobInputOutput } from '../../contracts/interactive.ts';
import { writeJobStdin } from '../../dispatch/interactive-client.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { RUNS_JOBS, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, toolError, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { auditJobCall } from './job-common.ts';

/** The DO call (which waits for the agent's ack) and the audit row, counted as 3 like every job tool. */
export const JOB_INPUT_COST: ToolCost = { subrequests: 3, decidesPolicy: false };

export function registerJobInput(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'job_input',
    {
      title: "Write to a job's stdin",
      description:
        'Writes text to the stdin of a running interactive job you started (execute / runtime_execute with interactive: true or tty: true); ' +
        'eof: true closes stdin after it. Then read the answer with job_output (wait_ms, until: e.g. the prompt ">>> "). ' +
        "Needs interactive.enabled in the team policy; each write's size is capped (interactive.maxInputBytes) and audited.",
      annotations: RUNS_JOBS,
      inputSchema: toolInput(JobInputInput),
      outputSchema: toolOutput(JobInputOutput),
    },
    async (input) => {
      const denied = missingScope(ctx, 'job_input', ['execute']);
      if (denied) return denied;
      const started = Date.now();
      const data = new TextEncoder().encode(input.data);
      const eof = input.eof === true;
      const sha256 = await digest(data);
      const r = await writeJobStdin(ctx.env, ctx.principal.team, input.job_id, ctx.principal.subject, data, eof);
      const text = r.ok && r.keepText ? { text: input.data } : {};
      await auditJobCall(ctx, 'job_input', {
        jobId: input.job_id,
        command: { job_id: input.job_id, bytes: data.byteLength, sha256, eof, ...(r.ok ? { seq: r.seq } : {}), ...text },
        ok: r.ok,
        reason: r.ok ? `wrote ${data.byteLength} bytes${eof ? ', then closed stdin' : ''}` : `${r.code}: ${r.message}`,
        started,
        bytes: data.byteLength,
      });
      if (!r.ok) return toolError(r.message, undefined, r.code);
      return toolResult(
        { job_id: input.job_id, bytes: data.byteLength, seq: r.seq, eof: r.eof, sha256 },
        `wrote ${data.byteLength} bytes to job ${input.job_id}${r.eof ? ' and closed its stdin' : ''}; read the answer with job_output {"job_id":"${input.job_id}","wait_ms":5000}`,
      );
    },
  );
}

async function digest(data: Uint8Array): Promise<string> {
  const h = new Uint8Array(await crypto.subtle.digest('SHA-256', data));
  return [...h].map((b) => b.toString(16).padStart(2, '0')).join('');
}
