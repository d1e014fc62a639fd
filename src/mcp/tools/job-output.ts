/**
 * `job_output`: a job's stdout/stderr from a byte offset. While the job runs (and while its
 * artifact uploads): what the agent has relayed so far (live tail, the first 16 MiB of each
 * stream); once its artifact is stored: the full stream from R2. Any connection of the team can
 * read, at any time.
 */
import type { McpServer } from '@modelcontextprotocol/server';
import { JOB_OUTPUT_DEFAULT_BYTES, JobOutputInput, JobOutputOutput } from '../../contracts/job-tools.ts';
import { jobStatus } from '../../dispatch/client.ts';
import { waitJobOutput } from '../../dispatch/interactive-client.ts';
import { untilMatcher } from '../../contracts/output-wait.ts';
import { readJobOutput } from '../../dispatch/job-output.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { READ_ONLY, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, toolError, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { auditJobCall, jobNotFound } from './job-common.ts';

/** The wait (wait_ms), the job from the team's DO, its output (the DO, or R2 past the live window), the audit row. */
export const JOB_OUTPUT_COST: ToolCost = { subrequests: 4, decidesPolicy: false };

export function registerJobOutput(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'job_output',
    {
      title: "Read a job's output",
      description:
        'Reads stdout or stderr of a job from a byte offset (max_bytes at a time; continue from next_offset until eof). ' +
        'Works while the job runs (live tail) and after it ended (stored artifact). ' +
        'wait_ms waits for output past offset (until: for a text such as a prompt) so a client can converse with an interactive job in few calls.',
      annotations: READ_ONLY,
      inputSchema: toolInput(JobOutputInput),
      outputSchema: toolOutput(JobOutputOutput),
    },
    async (input) => {
      const denied = missingScope(ctx, 'job_output', ['artifacts:read']);
      if (denied) return denied;
      const started = Date.now();
      const { team } = ctx.principal;
      const stream = input.stream ?? 'stdout';
      const offset = input.offset ?? 0;
      const max = input.max_bytes ?? JOB_OUTPUT_DEFAULT_BYTES;
      if (input.until !== undefined && input.wait_ms === undefined)
        return toolError('Error: until needs wait_ms (how long to wait for it)', undefined, 'invalid_argument');
      const bad = input.until !== undefined ? untilMatcher(input.until) : null;
      if (bad && !bad.ok) return toolError(`Error: ${bad.message}`, undefined, 'invalid_argument');
      // The wait (and a read by a session's own subject, which keeps it in use) happens in the team's object.
      const waited =
        input.wait_ms !== undefined
          ? await waitJobOutput(ctx.env, team, { jobId: input.job_id, stream, offset, waitMs: input.wait_ms, until: input.until }, ctx.principal.subject)
          : undefined;
      const v = await jobStatus(ctx.env, team, input.job_id);
      if (!v) {
        await auditJobCall(ctx, 'job_output', { jobId: input.job_id, ok: false, reason: 'not_found', started });
        return jobNotFound(input.job_id);
      }
      const page = await readJobOutput(ctx.env, team, v, stream, offset, max);
      if ('expired' in page) return toolError(`Error: the artifact of job "${input.job_id}" has expired`, undefined, 'not_found');
      const { data, source, total, nextOffset: next, eof } = page;
      await auditJobCall(ctx, 'job_output', { jobId: input.job_id, command: { stream, offset, max_bytes: max }, ok: true, started, bytes: data.byteLength });
      return toolResult({
        job_id: input.job_id,
        stream,
        state: v.state,
        data: new TextDecoder().decode(data),
        offset,
        next_offset: next,
        eof,
        source,
        total_bytes: total,
        ...(waited ? { waited: waited.waited } : {}),
        ...(waited?.inputs ? { inputs: waited.inputs } : {}),
      });
    },
  );
}
