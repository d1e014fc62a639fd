/**
 * `run_script`: one JS/TS program in its own isolate instead of many tool calls; its
 * subprocesses go through the governed path. Thin: src/script/ does the work, this file maps
 * the outcome onto the tool result (shaped by `outputMode` like runtime_execute).
 */
import type { McpServer } from '@modelcontextprotocol/server';
import { RunScriptInput, RunScriptOutput } from '../../contracts/tools.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import type { JobExit } from '../../contracts/agent-protocol.ts';
import { shapeRuntimeResult } from '../output-shape.ts';
import { RUNS_JOBS, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, policyDenied, toolError, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { runScript, type ScriptRun } from '../../script/run.ts';
import { noteCall } from '../../edge/call-log.ts';
import { TASK_SUPPORT_META_KEY } from '../tasks/negotiation.ts';

/**
 * None up front: the request's ledger admits each script and its subprocesses as they come, from what
 * the batch's other calls left (src/script/request-budget.ts, RequestLedger.chargeBatch).
 */
export const RUN_SCRIPT_COST: ToolCost = { subrequests: 0, decidesPolicy: false };

export function registerRunScript(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'run_script',
    {
      title: 'Run a script that may start governed subprocesses',
      description:
        'Runs a JavaScript/TypeScript program (inline code, or a named script of the team library with vars) in an isolate with no network. Globals: console, sleep(ms), vars, ' +
        'gatehouse.exec(command, args?, {cwd, env, stdin, timeoutMs}), Deno.Command(cmd, {args, cwd, env}).output(), ' +
        'child_process.exec(shellString, {cwd, env, encoding}), queryOutput(handle, terms, opts). Every subprocess is decided by the ' +
        'team policy and audited like execute. The top-level return value (or export default) comes back as JSON in "result"; ' +
        'console output is kept as an artifact (outputMode summary/intent shows it). Off unless the team policy enables script mode.',
      annotations: RUNS_JOBS,
      inputSchema: toolInput(RunScriptInput),
      outputSchema: toolOutput(RunScriptOutput),
      // Never a task: the script runs inside this request at the edge, not as one durable job.
      _meta: { [TASK_SUPPORT_META_KEY]: 'forbidden' },
    },
    async (input, extra) => {
      const denied = missingScope(ctx, 'run_script', ['execute']);
      if (denied) return denied;
      const outputMode = input.outputMode ?? 'minimal';
      if (outputMode === 'intent' && !input.queryTerms?.length) {
        return toolError(
          'Error: outputMode "intent" returns only console lines matching queryTerms; pass at least one query term',
          undefined,
          'invalid_argument',
        );
      }
      const which = whichScript(input);
      if (which) return toolError(which, undefined, 'invalid_argument');
      const out = await runScript(ctx, extra, {
        code: input.code,
        name: input.name,
        version: input.version,
        vars: input.vars,
        timeoutMs: input.timeout_ms,
        ...(input.workspace ? { workspace: { id: input.workspace, ...(input.workspace_source ? { source: input.workspace_source } : {}) } } : {}),
      });
      // The call's log line: the script's own decision (its subprocesses are decided one by one, in the audit log).
      if (out.kind === 'ran') noteCall(extra.mcpReq.signal, { decision: 'allowed', stage: 'policy', jobId: out.run.scriptId });
      else if (out.kind === 'denied') noteCall(extra.mcpReq.signal, { decision: 'denied', stage: 'script' });
      if (out.kind === 'refused') return toolError(out.message, undefined, out.code);
      if (out.kind === 'denied') return policyDenied('script', out.reason, true);
      const run = out.run;
      const shaped = shapeRuntimeResult(asExit(run), {
        artifactHandle: run.artifactHandle,
        outputMode,
        queryTerms: input.queryTerms,
        contextLines: input.contextLines,
        maxResponseLines: input.maxResponseLines,
      });
      const structured = {
        ...shaped,
        status: run.status,
        ...(run.result !== undefined ? { result: run.result } : {}),
        scriptId: run.scriptId,
        ...(run.script ? { script: run.script } : {}),
        subprocesses: run.subprocesses,
        consoleTruncated: run.consoleTruncated,
        ...(run.typescript ? { notes: [...(shaped.notes ?? []), 'TypeScript: types were stripped before running'] } : {}),
      };
      // A failed script: the structured part carries `error: {code: "sandbox_error", message: "Sandbox error: …"}`.
      if (run.error) return toolError(run.error, structured, 'sandbox_error');
      return toolResult(structured);
    },
  );
}

/** Why the call names no program or two: exactly one of `code` and `name`; `version` only with `name`. */
function whichScript(input: { code?: string; name?: string; version?: number }): string | null {
  if (input.code !== undefined && input.name !== undefined)
    return 'Error: run_script: pass either "code" (an inline program) or "name" (a script of the team library), not both';
  if (input.code === undefined && input.name === undefined)
    return 'Error: run_script: pass "code" (an inline program) or "name" (a script of the team library, see the admin CLI\'s "gatehouse scripts list")';
  if (input.version !== undefined && input.name === undefined) return 'Error: run_script: "version" goes with "name" (a version of a library script)';
  return null;
}

/** The script's output as a job exit, so outputMode shaping is the same code as runtime_execute's. */
function asExit(run: ScriptRun): JobExit {
  const enc = new TextEncoder();
  const lines = (s: string) => (s === '' ? 0 : s.split('\n').length - (s.endsWith('\n') ? 1 : 0));
  return {
    type: 'job.exit',
    jobId: run.scriptId,
    state: run.status === 'timeout' ? 'timed_out' : run.status === 'cancelled' ? 'cancelled' : 'exited',
    exitCode: run.status === 'success' ? 0 : run.status === 'failure' ? 1 : null,
    signal: null,
    timedOut: run.status === 'timeout',
    durationMs: run.durationMs,
    stdout: run.stdout,
    stderr: run.stderr,
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: {
      stdout: { bytes: enc.encode(run.stdout).byteLength, lines: lines(run.stdout), artifactTruncated: false },
      stderr: { bytes: enc.encode(run.stderr).byteLength, lines: lines(run.stderr), artifactTruncated: false },
    },
    artifactsUploaded: run.artifactHandle !== null,
  };
}
