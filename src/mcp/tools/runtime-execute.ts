/**
 * `runtime_execute` (the governed-runtime contract, docs/architecture.md): one of 16 runtimes, args mode or code mode, output shaped
 * by `outputMode` (minimal by default: a few numbers and the artifact handle).
 */
import { interactiveSpec } from '../../contracts/interactive.ts';
import { z } from 'zod';
import type { CallToolResult, InputRequiredResult, McpServer } from '@modelcontextprotocol/server';
import type { GatehouseErrorShape } from '../../contracts/errors.ts';
import { OutputMode, RuntimeExecuteInput, RuntimeExecuteOutput } from '../../contracts/tools.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { RUNTIMES, type RuntimeName } from '../../contracts/runtimes.ts';
import { listAgents } from '../../dispatch/client.ts';
import { artifactRows, readTail } from '../../dispatch/artifact-client.ts';
import { shapeRuntimeResult } from '../output-shape.ts';
import { deniedRun, missingScope, policyDenied, toolError, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { jobNotices, runGoverned, type EndedJob } from '../../governed/governed-run.ts';
import { noNetworkNote } from '../../policy/network.ts';
import { TASK_SUPPORT_META_KEY, taskOffer } from '../tasks/negotiation.ts';
import { becomeTask } from '../tasks/create.ts';
import { RUNS_JOBS, toolOutput, type ToolCost } from '../register.ts';
import { JOB_VIEWER_TOOL_META } from '../apps/job-viewer.ts';

/** Bytes of the real end of the output read back for a summary when the inline copy was cut. */
const TAIL_BYTES = 16 * 1024;

/** As execute's (EXECUTE_COST): the policy read, an approval, the DO call, a task's reads, a `failed` audit row. */
export const RUNTIME_EXECUTE_COST: ToolCost = { subrequests: 7, decidesPolicy: true };

export function registerRuntimeExecute(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'runtime_execute',
    {
      title: 'Run code or a program in a runtime',
      description:
        'Runs a runtime (node, typescript, python, shell, ruby, php, perl, r, elixir, go, java, kotlin, rust, c, cpp, csharp) under the team policy. ' +
        'Args mode: "args" for the runtime\'s executable. Code mode: "code" is written to a temp file, compiled if needed, and run. ' +
        'outputMode minimal (default) returns status and counts plus an artifactHandle to search with query_output; summary adds head+tail; intent returns only lines matching queryTerms.',
      annotations: RUNS_JOBS,
      inputSchema: toolInput(RuntimeExecuteInput),
      outputSchema: toolOutput(RuntimeExecuteOutput),
      _meta: { ...JOB_VIEWER_TOOL_META, [TASK_SUPPORT_META_KEY]: 'optional' },
    },
    async (input, extra): Promise<CallToolResult | InputRequiredResult> => {
      const denied = missingScope(ctx, 'runtime_execute', ['execute']);
      if (denied) return denied;
      if (input.args !== undefined && input.code !== undefined) {
        return toolError('Error: pass either "args" (args mode) or "code" (code mode), not both', undefined, 'invalid_argument');
      }
      const outputMode = input.outputMode ?? 'minimal';
      if (outputMode === 'intent' && !input.queryTerms?.length) {
        return toolError('Error: outputMode "intent" returns only lines matching queryTerms; pass at least one query term', undefined, 'invalid_argument');
      }
      const runtime: RuntimeName = input.runtime;
      const executable = input.executable ?? (await defaultExecutable(ctx, runtime));
      const code = input.code;
      const codeMode = code !== undefined;
      // Runtime `shell` code is a shell string: the policy decides the whole string, like execute without args.
      const policyMode = codeMode ? (runtime === 'shell' ? 'shell' : 'code') : 'argv';
      const out = await runGoverned(ctx, extra, {
        tool: 'runtime_execute',
        policy: {
          mode: policyMode,
          command: policyMode === 'shell' ? code! : executable,
          args: input.args ?? [],
          runtime,
          code,
          cwd: input.relativeCwd,
          env: input.env,
          timeoutMs: input.timeoutMs,
        },
        job: { mode: codeMode ? 'code' : 'argv', command: executable, args: input.args ?? [], runtime, code, stdin: input.stdin },
        background: input.background === true || interactiveSpec(input) !== undefined,
        interactive: interactiveSpec(input),
        selector: { agent: input.agent, labels: input.labels },
        ...(input.workspace ? { workspace: { id: input.workspace, ...(input.workspace_source ? { source: input.workspace_source } : {}) } } : {}),
        approvalId: input.approvalId,
        task: taskOffer(ctx, extra, input),
      });
      if (out.kind === 'input_required') return out.result;
      if (out.kind === 'approval') {
        const structured = { ...deniedRun(`${out.refusal.code}: ${out.refusal.message}`), ...(out.refusal.approval ? { approval: out.refusal.approval } : {}) };
        return toolError(`Error: ${out.refusal.message}`, structured, out.refusal.code);
      }
      if (out.kind === 'denied') return policyDenied(out.decision.stage, out.decision.reason, true);
      if (out.kind === 'error') return runtimeFailed(out.error, out.jobId);
      const shaping: RuntimeShaping = {
        outputMode,
        queryTerms: input.queryTerms,
        contextLines: input.contextLines,
        maxResponseLines: input.maxResponseLines,
        notes: out.decision.notes,
      };
      if (out.kind === 'accepted' || out.kind === 'pending') {
        // Still running after the task offer's wait: this call's answer becomes a task (tasks/get has the result).
        if (out.kind === 'pending') await becomeTask(ctx, extra, { tool: 'runtime_execute', jobId: out.jobId, state: out.state, shaping });
        const structured = {
          status: out.state,
          exitCode: null,
          signal: null,
          durationMs: 0,
          outputLines: 0,
          outputBytes: 0,
          artifactHandle: out.handle,
          jobId: out.jobId,
          agentId: out.agentId,
          sandbox: null,
        };
        return toolResult(
          structured,
          `${JSON.stringify(structured)}\nfollow it with job_status {"job_id":"${out.jobId}","wait_ms":60000} and job_output {"job_id":"${out.jobId}"}`,
        );
      }
      const failed = out.exit.state !== 'exited' || out.exit.exitCode !== 0;
      const notes = [...out.decision.notes, ...noNetworkNote(out.decision.effective?.network, failed)];
      return runtimeEnded(ctx, { ...out, notes }, { ...shaping, notes });
    },
  );
}

/** How a runtime_execute call shapes its result (kept with a task, to shape its result later). */
export const RuntimeShaping = z.object({
  outputMode: OutputMode,
  queryTerms: z.array(z.string()).optional(),
  contextLines: z.number().int().optional(),
  maxResponseLines: z.number().int().optional(),
  notes: z.array(z.string()),
});
export type RuntimeShaping = z.infer<typeof RuntimeShaping>;

/** `runtime_execute`'s answer for a job that ended (a foreground call's, and a task's final result). */
export async function runtimeEnded(ctx: ToolContext, out: EndedJob, shaping: RuntimeShaping): Promise<CallToolResult> {
  const { exit } = out;
  const hasArtifact = exit.streams.stdout.bytes + exit.streams.stderr.bytes > 0 && exit.artifactsUploaded;
  let tails: { stdout?: string; stderr?: string } | undefined;
  if (shaping.outputMode === 'summary' && hasArtifact && (exit.stdoutTruncated || exit.stderrTruncated)) {
    const rows = await artifactRows(ctx.env, ctx.principal.team, out.handle);
    tails = {};
    for (const row of rows) tails[row.stream] = await readTail(ctx.env, ctx.principal.team, row, TAIL_BYTES);
  }
  const shaped = shapeRuntimeResult(exit, {
    artifactHandle: hasArtifact ? out.handle : null,
    outputMode: shaping.outputMode,
    queryTerms: shaping.queryTerms,
    contextLines: shaping.contextLines,
    maxResponseLines: shaping.maxResponseLines,
    tails,
  });
  const notes = [...shaping.notes, ...(exit.error ? [`${exit.error.code}: ${exit.error.message}`] : [])];
  const structured = {
    ...shaped,
    ...(notes.length ? { notes: [...(shaped.notes ?? []), ...notes] } : {}),
    notices: jobNotices({ exit, notes: shaping.notes }),
    jobId: out.jobId,
    agentId: out.agentId,
    sandbox: out.sandbox,
  };
  if (exit.state === 'failed_to_start' || exit.state === 'lost') {
    return toolError(`Error: ${exit.error?.message ?? exit.state}`, structured, exit.state === 'lost' ? 'lost' : 'spawn_failed');
  }
  return toolResult(structured);
}

/** `runtime_execute`'s answer for a job that could not run (refused, lost contact). */
export function runtimeFailed(error: GatehouseErrorShape, jobId: string): CallToolResult {
  return toolError(`Error: ${error.message}`, jobId ? { jobId } : undefined, error.code);
}

/** The runtime's first executable that a connected agent actually has, else its preferred one. */
async function defaultExecutable(ctx: ToolContext, runtime: RuntimeName): Promise<string> {
  const agents = await listAgents(ctx.env, ctx.principal.team);
  const present = new Set(agents.flatMap((a) => a.runtimes.filter((r) => r.name === runtime).map((r) => r.executable)));
  return RUNTIMES[runtime].executables.find((e) => present.has(e)) ?? RUNTIMES[runtime].executables[0];
}
