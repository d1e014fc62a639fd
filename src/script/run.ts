/**
 * Runs one script: policy gate and limits, code preparation, a fresh isolate from the Worker
 * Loader (no network, no bindings, CPU limit), a wall timeout, then the output — console lines
 * and the return value — stored as an artifact and one audit row for the script (each
 * subprocess has its own row, linked by the script's id).
 */
import { artifactHoursOf, type ScriptPolicy } from '../contracts/policy.ts';
import { teamPolicyOf } from '../store/policy-cache.ts';
import { newArtifactHandle, putArtifactBody } from '../store/artifacts.ts';
import { indexArtifact } from '../dispatch/artifact-client.ts';
import { smallBodyMaxBytes } from '../dispatch/body-place.ts';
import type { AuditEntry } from '../store/audit.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { cancelByCall } from '../dispatch/client.ts';
import { callCancelKey, type ToolContext, type ToolExtra } from '../governed/call-context.ts';
import { CONSOLE_MAX_BYTES, LOADER_MISSING_MESSAGE, RETURN_MAX_BYTES, SLEEP_MAX_MS, TICKS_PER_CPU_MS } from './limits.ts';
import { codeBytes, prepareScript } from './prepare.ts';
import { openIsolate } from './isolate.ts';
import { ScriptHost } from './script-host.ts';
import { ScriptServers } from './servers.ts';
import type { ScriptRunOptions, ScriptRunReport } from './protocol.ts';
import { acceptReport, sanitizeError, type AcceptedReport } from './report.ts';
import type { ScriptBudget } from './subprocess.ts';
import { SubprocessBudget } from './subprocess-budget.ts';
import { requestLedger, type ScriptSlot } from './request-budget.ts';
import { workersPlan } from '../platform/plan.ts';
import { scriptDigest, type ScriptRef } from '../contracts/scripts.ts';
import { resolveNamedScript } from './named-script.ts';
import type { JobWorkspaceRef } from '../governed/governed-run.ts';

export interface RunScriptRequest {
  /** Exactly one of `code` (inline) and `name` (the team library, then the workspace: named-script.ts). */
  code?: string;
  name?: string;
  /** With `name`: the library's version (default: the newest). */
  version?: number;
  vars?: Record<string, unknown>;
  timeoutMs?: number;
  /** Every subprocess, workspace file read and stdio server of the script runs in this workspace. */
  workspace?: JobWorkspaceRef;
}

type RefusalCode = 'invalid_argument' | 'config_error' | 'limit_reached' | 'not_found';

type ScriptStatus = 'success' | 'failure' | 'timeout' | 'cancelled';

export interface ScriptRun {
  status: ScriptStatus;
  scriptId: string;
  /** The return value (JSON), when the script succeeded and returned something. */
  result?: unknown;
  /** `Sandbox error: …` when the script failed. */
  error?: string;
  consoleTruncated: boolean;
  /** What the artifact holds: console lines then the return value (stdout), the error (stderr). */
  stdout: string;
  stderr: string;
  artifactHandle: string | null;
  durationMs: number;
  /** `cap`: the subprocesses this script could start — the policy's maxCount, or fewer where the plan's subrequest limit says so. */
  subprocesses: { count: number; totalMs: number; cap: number };
  typescript: boolean;
  /** Which script ran, when it was called by name. */
  script?: ScriptRef;
}

/**
 * `denied`: the team policy refuses the script (the tool words the denial around `reason`); `refused`:
 * the script could not start, `message` being the whole line the caller reads (`Error: …`).
 */
export type ScriptOutcome = { kind: 'denied'; reason: string } | { kind: 'refused'; message: string; code: RefusalCode } | { kind: 'ran'; run: ScriptRun };

export async function runScript(ctx: ToolContext, extra: ToolExtra, req: RunScriptRequest): Promise<ScriptOutcome> {
  const { env, principal } = ctx;
  const started = Date.now();
  const scriptId = crypto.randomUUID();
  const auditBase = {
    team: principal.team,
    subject: principal.subject,
    tokenId: principal.tokenId,
    tool: 'run_script',
    // Filled in once the code is known (a named script's is resolved after the policy allows script mode).
    command: { mode: 'script', ...(req.name !== undefined ? { script: { name: req.name, ...(req.version ? { version: req.version } : {}) } } : {}) } as Record<
      string,
      unknown
    >,
    jobId: scriptId,
  };
  const refuse = async (code: RefusalCode | 'policy_denied', message: string, audit = true): Promise<ScriptOutcome> => {
    if (audit)
      await recordAudit(env, { ...auditBase, decision: code === 'config_error' ? 'failed' : 'denied', reason: message, durationMs: Date.now() - started });
    return code === 'policy_denied' ? { kind: 'denied', reason: message } : { kind: 'refused', code, message };
  };

  const { policy } = await teamPolicyOf(env, principal);
  const script = policy.script;
  if (!script.enabled) return refuse('policy_denied', 'Script mode is disabled in configuration (script.enabled = false)');
  const timeoutMs = req.timeoutMs ?? script.defaultTimeoutMs;
  if (timeoutMs > script.maxTimeoutMs) return refuse('policy_denied', `Requested timeout (${timeoutMs}ms) exceeds maximum (${script.maxTimeoutMs}ms)`);
  let code = req.code ?? '';
  let ref: ScriptRef | undefined;
  if (req.name !== undefined) {
    const named = await resolveNamedScript(ctx, extra, script, req.name, req.version, req.workspace);
    if (!named.ok) return refuse(named.code === 'invalid_argument' ? 'invalid_argument' : 'not_found', named.message);
    code = named.code;
    ref = named.ref;
  }
  auditBase.command = {
    ...auditBase.command,
    codeBytes: codeBytes(code),
    codeSha256: ref?.sha256 ?? (await scriptDigest(code)),
    ...(ref ? { script: ref } : {}),
  };
  const prepared = prepareScript(code);
  if (!prepared.ok && prepared.code === 'invalid_argument') return refuse('invalid_argument', `Error: ${prepared.message}`);
  if (!env.LOADER) return refuse('config_error', LOADER_MISSING_MESSAGE);
  const plan = workersPlan(env);
  if (!plan.ok) return refuse(plan.code, plan.message);
  // The request's subrequests and Dynamic Workers are shared by every run_script call it carries.
  const ledger = requestLedger(principal, plan.plan);
  const opened = ledger.openScript(script.subprocess?.maxCount ?? 0, policy.opa.evaluators.length);
  if (!opened.ok) return refuse('limit_reached', opened.message, ledger.takeAudit());
  try {
    return await runOpened(ctx, extra, req, { ref, policy, script, timeoutMs, prepared, scriptId, started, auditBase, slot: opened.slot });
  } finally {
    opened.slot.close();
  }
}

interface Opened {
  ref: ScriptRef | undefined;
  policy: Awaited<ReturnType<typeof teamPolicyOf>>['policy'];
  script: ScriptPolicy;
  timeoutMs: number;
  prepared: ReturnType<typeof prepareScript>;
  scriptId: string;
  started: number;
  auditBase: Omit<AuditEntry, 'decision'>;
  slot: ScriptSlot;
}

async function runOpened(ctx: ToolContext, extra: ToolExtra, req: RunScriptRequest, o: Opened): Promise<ScriptOutcome> {
  const { env, principal } = ctx;
  const { ref, policy, script, timeoutMs, prepared, scriptId, started, auditBase, slot } = o;

  const caps = script.subprocess ?? { maxCount: 0, maxTotalMs: 0 };
  const budget: ScriptBudget = { subprocesses: new SubprocessBudget(caps), progress: 0, closed: false };
  const subprocesses = budget.subprocesses;
  /** The script's audit row is written once: by the normal end or by the cancellation path. */
  let finalized = false;
  let report: AcceptedReport | undefined;
  let status: ScriptStatus;
  let error: string | undefined;
  let typescript = false;
  let servers: ScriptServers | undefined;
  if (!prepared.ok) {
    status = 'failure';
    error = `Sandbox error: ${prepared.message}`;
  } else {
    typescript = prepared.value.typescript;
    // A client that closes the call ends this request: what must still happen (kill the running
    // subprocesses, the script's audit row) is handed to waitUntil from the abort event itself.
    const signal = extra.mcpReq.signal;
    const onAbort = () => {
      budget.closed = true;
      ctx.waitUntil(
        (async () => {
          await servers?.close();
          if (subprocesses.started > 0)
            await cancelByCall(env, principal.team, callCancelKey(ctx, extra), 'the client cancelled the script').catch(() => false);
          if (finalized) return;
          finalized = true;
          await recordAudit(env, {
            ...auditBase,
            decision: 'allowed',
            reason: `Sandbox error: Execution cancelled by the client; ${subprocesses.started} subprocess(es) started`,
            exitStatus: 'cancelled',
            durationMs: Date.now() - started,
          });
        })().catch(() => undefined),
      );
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    const sc = {
      ctx,
      extra,
      script,
      scriptId,
      budget,
      slot,
      timeouts: { defaultMs: policy.limits.defaultTimeoutMs, maxMs: policy.limits.maxTimeoutMs },
      ...(req.workspace ? { workspace: req.workspace } : {}),
    };
    servers = new ScriptServers(sc);
    const ended = await runIsolate(env.LOADER!, script, prepared.value.source, prepared.value.guardName, req, timeoutMs, sc, servers).finally(() =>
      // Every server connection the script opened ends with it: normal end, error, timeout or cancel.
      servers?.close(),
    );
    budget.closed = true;
    signal.removeEventListener('abort', onAbort);
    if (ended.kind !== 'report' && ended.kind !== 'cancelled' && subprocesses.started > 0) {
      // Kill what the script still has running: its subprocesses share this call's cancel key.
      await cancelByCall(env, principal.team, callCancelKey(ctx, extra), ended.kind === 'timeout' ? 'the script timed out' : 'the script was cancelled').catch(
        () => false,
      );
    }
    if (ended.kind === 'report') {
      report = acceptReport(ended.report);
      status = report.error === null ? 'success' : 'failure';
      if (report.error !== null) error = `Sandbox error: ${report.error}`;
    } else if (ended.kind === 'timeout') {
      status = 'timeout';
      error = 'Sandbox error: Execution timeout';
    } else if (ended.kind === 'cancelled') {
      status = 'cancelled';
      error = 'Sandbox error: Execution cancelled by the client';
    } else {
      status = 'failure';
      error = `Sandbox error: ${sanitizeError(ended.message)}`;
    }
  }

  const consoleText = report?.console ?? '';
  const result = report?.result;
  const stdout = joinOutput(consoleText, result);
  const stderr = error ? `${error}\n` : '';
  const durationMs = Date.now() - started;
  const handle = await storeOutput(ctx, scriptId, stdout, stderr, artifactHoursOf(policy));
  if (!finalized) {
    finalized = true;
    await recordAudit(env, {
      ...auditBase,
      decision: 'allowed',
      reason:
        [
          error,
          subprocesses.started ? `${subprocesses.started} subprocess${subprocesses.started === 1 ? '' : 'es'} (${subprocesses.totalMs} ms)` : undefined,
          servers?.calls ? `${servers.calls} server call${servers.calls === 1 ? '' : 's'}` : undefined,
        ]
          .filter(Boolean)
          .join('; ') || 'Allowed by the team policy (script.enabled)',
      exitStatus: status,
      durationMs,
      bytes: new TextEncoder().encode(stdout + stderr).byteLength,
    });
  }
  return {
    kind: 'ran',
    run: {
      status,
      scriptId,
      ...(result !== undefined ? { result } : {}),
      ...(error ? { error } : {}),
      consoleTruncated: report?.consoleTruncated ?? false,
      stdout,
      stderr,
      artifactHandle: handle,
      durationMs,
      subprocesses: { count: subprocesses.started, totalMs: subprocesses.totalMs, cap: slot.cap },
      typescript,
      ...(ref ? { script: ref } : {}),
    },
  };
}

type Ended = { kind: 'report'; report: ScriptRunReport } | { kind: 'timeout' } | { kind: 'cancelled' } | { kind: 'crashed'; message: string };

async function runIsolate(
  loader: WorkerLoader,
  script: ScriptPolicy,
  source: string,
  guardName: string,
  req: RunScriptRequest,
  timeoutMs: number,
  sc: ConstructorParameters<typeof ScriptHost>[0],
  servers: ScriptServers,
): Promise<Ended> {
  const entry = openIsolate<ScriptHost>(loader, script, source);
  const opts: ScriptRunOptions = {
    vars: req.vars ?? {},
    consoleMaxBytes: CONSOLE_MAX_BYTES,
    returnMaxBytes: RETURN_MAX_BYTES,
    sleepMaxMs: SLEEP_MAX_MS,
    tickBudget: script.cpuMs * TICKS_PER_CPU_MS,
    cpuMs: script.cpuMs,
    guardName,
  };
  const host = new ScriptHost(sc, servers);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  const signal = sc.extra.mcpReq.signal;
  try {
    return await Promise.race<Ended>([
      entry.run(host, opts).then(
        (report) => ({ kind: 'report', report }),
        (e: unknown) => ({ kind: 'crashed', message: e instanceof Error ? e.message : String(e) }),
      ),
      new Promise<Ended>((resolve) => {
        timer = setTimeout(() => resolve({ kind: 'timeout' }), timeoutMs);
      }),
      new Promise<Ended>((resolve) => {
        if (signal.aborted) return resolve({ kind: 'cancelled' });
        onAbort = () => resolve({ kind: 'cancelled' });
        signal.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

/** Console lines, then the return value: a string as it is, anything else as 2-space JSON. */
function joinOutput(consoleText: string, result: unknown): string {
  const parts = consoleText === '' ? [] : [consoleText];
  if (result !== undefined) parts.push(typeof result === 'string' ? result : JSON.stringify(result, null, 2));
  return parts.length ? `${parts.join('\n')}\n` : '';
}

async function storeOutput(ctx: ToolContext, scriptId: string, stdout: string, stderr: string, retentionHours: number): Promise<string | null> {
  if (stdout === '' && stderr === '') return null;
  const handle = newArtifactHandle();
  for (const [stream, text] of [
    ['stdout', stdout],
    ['stderr', stderr],
  ] as const) {
    if (text === '') continue;
    const body = new TextEncoder().encode(text);
    const entry = { handle, jobId: scriptId, stream, lines: text.split('\n').length - (text.endsWith('\n') ? 1 : 0), truncated: false, retentionHours };
    // A small output stays with the team (no R2 PUT); a larger one goes to R2, indexed by the team's object either way.
    if (body.byteLength <= smallBodyMaxBytes(retentionHours)) {
      await indexArtifact(ctx.env, ctx.principal.team, { ...entry, r2Key: null, bytes: body.byteLength }, body);
      continue;
    }
    const r = await putArtifactBody(ctx.env, {
      ...entry,
      team: ctx.principal.team,
      body: new Blob([body]).stream(),
      contentLength: body.byteLength,
    });
    if (!r.ok) return null;
    await indexArtifact(ctx.env, ctx.principal.team, { ...entry, r2Key: r.value.r2Key, bytes: r.value.bytes }, null);
  }
  return handle;
}
