/**
 * One subprocess a script asks for, through the same governed path as the `execute` tool
 * (staged policy, OPA, audit, dispatch to the team's agent, sandbox, artifact), answered with
 * the subprocess API's documented messages. Per-script caps (how many, how long in total) are
 * reserved here, before the policy, and hold for subprocesses that run at once (subprocess-budget.ts).
 */
import type { PolicyDecision } from '../policy/engine.ts';
import type { ScriptPolicy } from '../contracts/policy.ts';
import { describeIssues, type ErrorCode } from '../contracts/errors.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { executeResult, runGoverned, type GovernedOutcome, type JobWorkspaceRef } from '../governed/governed-run.ts';
import type { ToolContext, ToolExtra } from '../governed/call-context.ts';
import type { ScriptSlot } from './request-budget.ts';
import type { SubprocessBudget } from './subprocess-budget.ts';
import { SubprocessRequest, type HostAnswer, type SubprocessValue } from './protocol.ts';

/** The operation name of the policy input document and of the error messages. */
type Operation = 'command_output' | 'exec';

const NO_SUBPROCESS_CONFIG = 'subprocess: internal error — no subprocess config available';

function deniedMessage(op: Operation, command: string): string {
  return `subprocess.${op} denied by policy: '${command}' is not allowed`;
}
function policyErrorMessage(op: Operation, detail: string): string {
  return `subprocess.${op}: policy error: ${detail}`;
}
function failedToExecuteMessage(op: Operation, command: string, osError: string): string {
  return op === 'exec' ? `subprocess.exec: failed to execute '${command}': ${osError}` : `subprocess: failed to execute '${command}': ${osError}`;
}

/** OPA could not be asked (network, HTTP status, unparsable answer) — an evaluation error, not a "no". */
const OPA_ERROR = /^(OPA request|OPA returned HTTP|Failed to parse OPA response|OPA evaluator URL)/;

function isPolicyError(d: PolicyDecision): boolean {
  if (d.stage !== 'opa' || !d.opa) return false;
  const no = d.opa.verdicts.filter((v) => !v.allowed);
  return no.length > 0 && no.every((v) => OPA_ERROR.test(v.reason));
}

/** Mutable per-script state, shared by every subprocess of one script. */
export interface ScriptBudget {
  /** `script.subprocess.maxCount` / `maxTotalMs`, reserved before each subprocess starts. */
  subprocesses: SubprocessBudget;
  progress: number;
  closed: boolean;
}

export interface SubprocessContext {
  ctx: ToolContext;
  extra: ToolExtra;
  script: ScriptPolicy;
  scriptId: string;
  budget: ScriptBudget;
  /** The script's share of its request's subrequests (Cloudflare's per-request limit). */
  slot: ScriptSlot;
  /** The policy's job timeouts: what a subprocess without `timeoutMs` would get, and the most any gets. */
  timeouts: { defaultMs: number; maxMs: number };
  /** The script's workspace: its subprocesses, file reads and servers run there. */
  workspace?: JobWorkspaceRef;
}

type Answer = HostAnswer<SubprocessValue>;

const fail = (code: ErrorCode, message: string, reason?: string): Answer => ({ ok: false, error: { code, message, ...(reason ? { reason } : {}) } });

export async function runSubprocess(sc: SubprocessContext, raw: unknown): Promise<Answer> {
  const parsed = SubprocessRequest.safeParse(raw);
  if (!parsed.success) return fail('invalid_argument', `subprocess: invalid request: ${describeIssues(parsed.error.issues)}`);
  const req = parsed.data;
  const shell = req.op === 'exec' || (req.op === 'gatehouse_exec' && req.args === undefined);
  const op: Operation = shell ? 'exec' : 'command_output';
  const { ctx, script, budget } = sc;
  if (!script.subprocess) return fail('policy_denied', NO_SUBPROCESS_CONFIG);
  if (budget.closed) return fail('cancelled', `subprocess.${op}: the script has ended (timed out or cancelled); no more subprocesses`);
  if (req.command.trim() === '') return fail('invalid_argument', `subprocess.${op}: command is empty`);

  const auditBase = {
    team: ctx.principal.team,
    subject: ctx.principal.subject,
    tokenId: ctx.principal.tokenId,
    tool: 'run_script',
    command: { operation: op, mode: shell ? 'shell' : 'argv', command: req.command, args: req.args ?? [], env: req.env },
    cwd: req.cwd,
    parentJobId: sc.scriptId,
  };
  const refuse = async (message: string): Promise<Answer> => {
    // Each refusal's audit row is a subrequest too: past the request's limit a refusal goes unaudited.
    if (sc.slot.takeRefusalAudit()) await recordAudit(ctx.env, { ...auditBase, decision: 'denied', reason: message });
    return fail('limit_reached', message);
  };
  // Reserve before anything is awaited: subprocesses started at once each see the others' reservations.
  const reservation = budget.subprocesses.reserve(Math.min(req.timeoutMs ?? sc.timeouts.defaultMs, sc.timeouts.maxMs));
  if (!reservation.ok) return refuse(reservation.message);
  const { grant } = reservation;
  const overLimit = sc.slot.beforeSubprocess(budget.subprocesses.started - 1);
  if (overLimit) {
    budget.subprocesses.release(grant);
    return refuse(overLimit);
  }
  const n = grant.ordinal;
  // A subprocess never outlives its share of the script's subprocess time; otherwise the policy
  // decides its timeout as for execute (default, clamp or deny above the maximum).
  const timeoutMs = grant.limited ? grant.timeoutMs : req.timeoutMs;

  const started = Date.now();
  let out: GovernedOutcome;
  try {
    out = await runGoverned(ctx, progressFor(sc, `#${n} ${label(req.command)}`), {
      tool: 'run_script',
      parentJobId: sc.scriptId,
      // child_process.exec is `sh -c` by contract: the shell-string rules decide it and OPA sees the
      // `exec` document even for a string without shell syntax. gatehouse.exec without args is
      // execute's command string, decided like execute's.
      policy: {
        mode: shell ? 'shell' : 'argv',
        command: req.command,
        args: shell ? [] : (req.args ?? []),
        cwd: req.cwd,
        env: req.env,
        timeoutMs,
        ...(req.op === 'exec' ? { shellOnly: true as const } : {}),
      },
      job: { mode: shell ? 'shell' : 'argv', command: req.command, args: shell ? [] : (req.args ?? []), stdin: req.stdin },
      ...(sc.workspace ? { workspace: sc.workspace } : {}),
    });
  } finally {
    budget.subprocesses.settle(grant, Date.now() - started);
  }
  if (out.kind === 'denied') {
    const reason = `${out.decision.stage}: ${out.decision.reason}`;
    if (isPolicyError(out.decision)) return fail('policy_error', policyErrorMessage(op, out.decision.reason), reason);
    return fail('policy_denied', deniedMessage(op, req.command), reason);
  }
  if (out.kind === 'error') return fail(out.error.code, `subprocess.${op}: ${out.error.message}`);
  // Subprocesses never run in the background: runGoverned answers them only when the job ended.
  if (out.kind !== 'done') return fail('internal', `subprocess.${op}: the job was accepted but not awaited`);
  const { exit } = out;
  // A cancelled subprocess means the call was cancelled (or the script timed out): start nothing more.
  if (exit.state === 'cancelled') budget.closed = true;
  await notify(sc, `#${n} ${label(req.command)}: ${exit.state}${exit.exitCode !== null ? ` ${exit.exitCode}` : ''} (${Math.round(exit.durationMs)} ms)`);
  if (exit.state === 'failed_to_start') {
    const os = exit.error?.message || 'spawn failed';
    return fail('spawn_failed', failedToExecuteMessage(op, req.command, os));
  }
  if (exit.state === 'lost') return fail('lost', `subprocess.${op}: the job was lost: ${exit.error?.message ?? 'its executor agent vanished'}`);
  return {
    ok: true,
    value: {
      code: exit.exitCode ?? -1,
      stdout: exit.stdout,
      stderr: exit.stderr,
      result: executeResult(out),
    },
  };
}

function label(command: string): string {
  const s = command.replace(/\s+/g, ' ').trim();
  return s.length > 60 ? `${s.slice(0, 60)}…` : s;
}

/**
 * Progress of every subprocess goes to the run_script call's progress token, numbered on one
 * counter: progress must only increase over the whole call, not restart with each job.
 */
function progressFor(sc: SubprocessContext, prefix: string): ToolExtra {
  const extra = sc.extra;
  return {
    ...extra,
    mcpReq: {
      ...extra.mcpReq,
      notify: async (n) => {
        if (n.method === 'notifications/progress') {
          sc.budget.progress += 1;
          const params = n.params as { progressToken: string | number; message?: string };
          return extra.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken: params.progressToken, progress: sc.budget.progress, message: `${prefix}: ${params.message ?? ''}` },
          });
        }
        return extra.mcpReq.notify(n);
      },
    },
  };
}

async function notify(sc: SubprocessContext, message: string): Promise<void> {
  const token = sc.extra.mcpReq._meta?.progressToken;
  if (token === undefined) return;
  sc.budget.progress += 1;
  try {
    await sc.extra.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: sc.budget.progress, message } });
  } catch {
    // The client stream may be gone; the script's result matters more than its progress.
  }
}
