/**
 * `execute` (the shell-exec contract, docs/architecture.md): `args` given → the executable runs directly; omitted → `sh -c
 * command` (a policy switch, decided on the whole string). Result keeps the contract's shape
 * plus Gatehouse's truthful terminal state, the job id and the artifact handle.
 */
import { interactiveSpec } from '../../contracts/interactive.ts';
import type { CallToolResult, InputRequiredResult, McpServer } from '@modelcontextprotocol/server';
import type { GatehouseErrorShape } from '../../contracts/errors.ts';
import { ExecuteInput, ExecuteOutput } from '../../contracts/tools.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { missingScope, policyDenied, toolError, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { executeResult, jobNotices, runGoverned, type EndedJob } from '../../governed/governed-run.ts';
import { TASK_SUPPORT_META_KEY, taskOffer } from '../tasks/negotiation.ts';
import { becomeTask } from '../tasks/create.ts';
import { RUNS_JOBS, toolOutput, type ToolCost } from '../register.ts';
import { JOB_VIEWER_TOOL_META } from '../apps/job-viewer.ts';
import { noNetworkNote } from '../../policy/network.ts';

/**
 * The policy read (D1), an `ask` rule's approval lookup and row (2), the submit-and-follow call to
 * the team's DO, a task's status and outcome reads (2), the `failed` audit row if the DO call fails (D1).
 */
export const EXECUTE_COST: ToolCost = { subrequests: 7, decidesPolicy: true };

export function registerExecute(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'execute',
    {
      title: 'Run a command under the team policy',
      description:
        'Runs a command in a sandbox on one of the team\'s executor agents. With "args" the executable runs directly (no shell); ' +
        'without it the whole string runs with sh -c, if the team policy allows shell strings. Returns stdout, stderr, exit code ' +
        '(inline output capped, full output kept as an artifact: search it with query_output). If the policy asks for approval, ' +
        'a client with elicitation is asked to approve; otherwise the error approval_required names an approval id to retry with once an admin approved it.',
      annotations: RUNS_JOBS,
      inputSchema: toolInput(ExecuteInput),
      outputSchema: toolOutput(ExecuteOutput),
      _meta: { ...JOB_VIEWER_TOOL_META, [TASK_SUPPORT_META_KEY]: 'optional' },
    },
    async (input, extra): Promise<CallToolResult | InputRequiredResult> => {
      const denied = missingScope(ctx, 'execute', ['execute']);
      if (denied) return denied;
      if (input.command.trim() === '') return toolError('Error: command: empty', undefined, 'invalid_argument');
      const shell = input.args === undefined;
      const out = await runGoverned(ctx, extra, {
        tool: 'execute',
        policy: {
          mode: shell ? 'shell' : 'argv',
          command: input.command,
          args: input.args ?? [],
          cwd: input.cwd,
          env: input.env,
          timeoutMs: input.timeout_ms,
        },
        job: { mode: shell ? 'shell' : 'argv', command: input.command, args: input.args ?? [], stdin: input.stdin },
        background: input.background === true || interactiveSpec(input) !== undefined,
        interactive: interactiveSpec(input),
        selector: { agent: input.agent, labels: input.labels },
        ...(input.workspace ? { workspace: { id: input.workspace, ...(input.workspace_source ? { source: input.workspace_source } : {}) } } : {}),
        approvalId: input.approval_id,
        task: taskOffer(ctx, extra, input),
      });
      if (out.kind === 'input_required') return out.result;
      if (out.kind === 'approval')
        return toolError(`Error: ${out.refusal.message}`, out.refusal.approval ? { approval: out.refusal.approval } : undefined, out.refusal.code);
      if (out.kind === 'denied') return policyDenied(out.decision.stage, out.decision.reason);
      if (out.kind === 'error') return executeFailed(out.error, out.jobId);
      if (out.kind === 'accepted' || out.kind === 'pending') {
        // Still running after the task offer's wait: this call's answer becomes a task (tasks/get has the result).
        if (out.kind === 'pending')
          await becomeTask(ctx, extra, { tool: 'execute', jobId: out.jobId, state: out.state, shaping: { notes: out.decision.notes } });
        // Background: nothing has run yet; the fields of a result stay empty until job_status says it ended.
        const structured = {
          stdout: '',
          stderr: '',
          exit_code: null,
          timed_out: false,
          stdout_truncated: false,
          stderr_truncated: false,
          elapsed_ms: 0,
          state: out.state,
          signal: null,
          job_id: out.jobId,
          artifact_handle: out.handle,
          agent_id: out.agentId,
          sandbox: null,
          background: true,
        };
        return toolResult(
          structured,
          interactiveSpec(input)
            ? `interactive job ${out.jobId} ${out.state}; write to its stdin with job_input {"job_id":"${out.jobId}","data":"…\\n"} and read with job_output {"job_id":"${out.jobId}","wait_ms":5000}`
            : `job ${out.jobId} ${out.state}; follow it with job_status {"job_id":"${out.jobId}","wait_ms":60000} and job_output {"job_id":"${out.jobId}"}`,
        );
      }
      const failed = out.exit.state !== 'exited' || out.exit.exitCode !== 0;
      return executeEnded({ ...out, notes: [...out.decision.notes, ...noNetworkNote(out.decision.effective?.network, failed)] });
    },
  );
}

/** `execute`'s answer for a job that ended (a foreground call's, and a task's final result). */
export function executeEnded(out: EndedJob): CallToolResult {
  const { exit } = out;
  if (exit.state === 'failed_to_start' && exit.error && exit.error.code.startsWith('workspace_')) {
    return toolError(`Error: ${exit.error.message}`, { job_id: out.jobId, error: exit.error }, exit.error.code as 'workspace_quota' | 'workspace_error');
  }
  if (exit.state === 'failed_to_start') {
    return toolError(`Error: execute: spawn failed${exit.error ? ` (${exit.error.message})` : ''}`, undefined, 'spawn_failed');
  }
  const notices = jobNotices(out);
  const structured = { ...executeResult(out), notices };
  const notes = notices.length ? `\n(notices: ${notices.join('; ')})` : '';
  // A workspace that filled up (or could not be made) is the job's failure, whatever its exit status.
  if (structured.error?.code.startsWith('workspace_'))
    return toolError(`Error: ${structured.error.message}`, structured, structured.error.code as 'workspace_quota' | 'workspace_error');
  if (exit.state === 'lost') return toolError(`Error: the job was lost: ${exit.error?.message ?? 'its executor agent vanished'}`, structured, 'lost');
  return toolResult(structured, JSON.stringify(structured) + notes);
}

/** `execute`'s answer for a job that could not run (refused, lost contact). */
export function executeFailed(error: GatehouseErrorShape, jobId: string): CallToolResult {
  return toolError(`Error: ${error.message}`, jobId ? { job_id: jobId } : undefined, error.code);
}
