/**
 * The request path of one governed job, shared by `execute`, `runtime_execute` and a script's
 * subprocesses (src/script/subprocess.ts):
 * team policy → (denied: audit, return the reason) → job spec → audit row → team DO → result.
 *
 * Every call leaves exactly one audit row, whatever happens: a denial writes it complete; an
 * accepted job writes it when accepted (so a running job is visible in the audit tail) and the
 * team's DO completes it when the job ends — even if this call's client went away meanwhile.
 * A client that disconnects never stops its job and never gets a made-up result.
 */
import type { JobExit, JobSpec, SandboxKind } from '../contracts/agent-protocol.ts';
import type { InteractiveSpec } from '../contracts/interactive.ts';
import type { GatehouseErrorShape } from '../contracts/errors.ts';
import type { RuntimeName } from '../contracts/runtimes.ts';
import type { JobSelector } from '../contracts/job-view.ts';
import type { WorkspaceId, WorkspaceSource } from '../contracts/workspaces.ts';
import { artifactHoursOf } from '../contracts/policy.ts';
import { decide, type PolicyDecision, type PolicyRequest } from '../policy/engine.ts';
import { teamPolicyOf } from '../store/policy-cache.ts';
import { newArtifactHandle } from '../store/artifacts.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { awaitJob, cancelByCall, jobOutcome, jobStatus, submitAndFollow, type DispatchOutcome } from '../dispatch/client.ts';
import { isSettled } from '../contracts/job-view.ts';
import { callCancelKey, type ToolContext, type ToolExtra } from './call-context.ts';
import { progressReporter } from './progress.ts';
import type { InputRequiredResult } from '@modelcontextprotocol/server';
import { stamp } from '../contracts/trace.ts';
import { approvalGate, type Refusal } from '../approval/gate.ts';
import type { ApprovableRequest } from '../approval/request.ts';
import { noteCall, type CallFacts } from '../edge/call-log.ts';

/** How much longer than its lifetime an interactive job's own timeout is: the lifetime stop comes first, with its reason. */
const SESSION_TIMEOUT_MARGIN_MS = 60_000;

/** A job's workspace as a call names it (docs/workspaces.md): the policy's quota and time-to-live are added here. */
export interface JobWorkspaceRef {
  id: WorkspaceId;
  source?: WorkspaceSource;
}

export interface GovernedRequest {
  tool: 'execute' | 'runtime_execute' | 'run_script';
  /** A run_script subprocess: the script's id, so its audit row links to the script's row. */
  parentJobId?: string;
  policy: Omit<PolicyRequest, 'team' | 'subject' | 'tool'>;
  /** What the agent runs; `mode` may differ from the policy's (runtime shell code is decided as a shell string). */
  job: Pick<JobSpec, 'mode' | 'command' | 'args'> & { runtime?: RuntimeName; code?: string; stdin?: string };
  /** Answer as soon as the job is accepted; the client follows it with job_status / job_output. */
  background?: boolean;
  /**
   * The client may take a task (MCP Tasks extension): wait up to `afterMs` for the job; if it is
   * still open then, answer `pending` and let the caller turn the call into a task.
   */
  task?: { afterMs: number };
  selector?: JobSelector;
  /** The job's own workspace (docs/workspaces.md); absent: the agent's shared workspace. */
  workspace?: JobWorkspaceRef;
  /** An admin-approved approval for exactly this request (policy rule decided `ask`). */
  approvalId?: string;
  /** An interactive job (stdin kept open for job_input; `tty`: on a terminal): always in the background. */
  interactive?: InteractiveSpec;
  /**
   * A script's stdio MCP server (src/script/stdio-server.ts): interactive for the script's own MCP client only, so
   * the `interactive.enabled` gate (input from a client) does not apply; the command is decided like any job's.
   */
  scriptServer?: true;
}

export type GovernedOutcome =
  | { kind: 'denied'; decision: PolicyDecision }
  /** A rule decided `ask` and no approval lets the call run (yet): the tool answers with this refusal. */
  | { kind: 'approval'; refusal: Refusal; decision: PolicyDecision }
  /** A rule decided `ask` and the client's user is asked (2026-07-28 input_required). */
  | { kind: 'input_required'; result: InputRequiredResult; decision: PolicyDecision }
  | { kind: 'error'; error: GatehouseErrorShape; decision: PolicyDecision | null; jobId: string; handle: string }
  | { kind: 'accepted'; state: 'queued' | 'running'; decision: PolicyDecision; jobId: string; handle: string; agentId: string | null }
  /** Offered as a task (`GovernedRequest.task`) and still open after the wait: the job runs on; the caller makes it a task. */
  | { kind: 'pending'; state: 'queued' | 'running'; decision: PolicyDecision; jobId: string; handle: string; agentId: string | null }
  | { kind: 'done'; exit: JobExit; decision: PolicyDecision; jobId: string; handle: string; agentId: string; sandbox: SandboxKind };

export async function runGoverned(ctx: ToolContext, extra: ToolExtra, r: GovernedRequest): Promise<GovernedOutcome> {
  const { env, principal } = ctx;
  const started = Date.now();
  const auditBase = {
    team: principal.team,
    subject: principal.subject,
    tokenId: principal.tokenId,
    tool: r.tool,
    command: { mode: r.policy.mode, command: r.policy.command, args: r.policy.args, runtime: r.policy.runtime, env: r.policy.env },
    cwd: r.policy.cwd,
    ...(r.parentJobId ? { parentJobId: r.parentJobId } : {}),
  };
  /** Set once an audit row exists for this call (or the team's DO holds it); the finally below writes one if none does. */
  let audited = false;
  let failure: string | null = null;
  let jobId = '';
  // The call's log line (src/edge/call-log.ts) learns the decision and the job; a script's subprocess is not a call of its own.
  const note = (f: CallFacts) => {
    if (!r.parentJobId) noteCall(extra.mcpReq.signal, f);
  };
  try {
    const { policy } = await teamPolicyOf(env, principal);
    const decision = await decide(policy, {
      ...r.policy,
      ...(r.interactive && !r.scriptServer ? { interactive: true } : {}),
      tool: r.tool,
      team: principal.team,
      subject: principal.subject,
    });
    stamp(env, 'edge.decided');
    jobId = crypto.randomUUID();
    let approval: { id: string; note: string } | undefined;
    if (decision.ask && decision.effective) {
      const gate = await approvalGate(ctx, extra, {
        request: approvable(r),
        decision: { ...decision, ask: decision.ask },
        policy,
        approvalId: r.approvalId,
        jobId,
      });
      if (gate.kind === 'prompt') {
        audited = true;
        note({ decision: 'asked', stage: 'approval', outcome: 'input_required' });
        await recordAudit(env, {
          ...auditBase,
          decision: 'asked',
          reason: `${decision.stage}: ${decision.reason}; asked the MCP client's user to approve (approval prompt)`,
          approvalId: gate.approvalId,
          durationMs: Date.now() - started,
        });
        return { kind: 'input_required', result: gate.result, decision };
      }
      if (gate.kind === 'refused') {
        audited = true;
        note({ decision: gate.refusal.asked ? 'asked' : 'denied', stage: 'approval' });
        await recordAudit(env, {
          ...auditBase,
          decision: gate.refusal.asked ? 'asked' : 'denied',
          reason: `${gate.refusal.code}: ${gate.refusal.message}`,
          approvalId: gate.refusal.approvalId,
          durationMs: Date.now() - started,
        });
        // A script's subprocess sees an ordinary denial (it has no way to come back with an approval).
        if (r.tool === 'run_script') return { kind: 'denied', decision: { ...decision, reason: gate.refusal.message } };
        return { kind: 'approval', refusal: gate.refusal, decision };
      }
      approval = { id: gate.approvalId, note: gate.note };
    } else if (!decision.allowed || !decision.effective) {
      audited = true;
      note({ decision: 'denied', stage: decision.stage });
      await recordAudit(env, { ...auditBase, decision: 'denied', reason: `${decision.stage}: ${decision.reason}`, durationMs: Date.now() - started });
      return { kind: 'denied', decision };
    }
    const eff = decision.effective;
    note({ decision: 'allowed', stage: approval ? 'approval' : decision.opa ? 'opa' : 'policy', jobId });
    // A simple command string decided as argv, or the policy's prepended arguments: the job runs
    // exactly the argv that was decided, without sh -c.
    const job =
      decision.runAs && r.job.mode !== 'code' ? { ...r.job, mode: 'argv' as const, command: decision.runAs.command, args: decision.runAs.args } : r.job;
    const spec: JobSpec = {
      jobId,
      // Made from the job id: the team's object finds the job by it, and keeps output the exit holds without a row of its own.
      artifactHandle: newArtifactHandle(jobId),
      mode: job.mode,
      command: job.command,
      args: job.args,
      ...(job.runtime ? { runtime: job.runtime } : {}),
      ...(job.code !== undefined ? { code: job.code } : {}),
      ...(job.stdin !== undefined ? { stdin: job.stdin } : {}),
      cwd: eff.cwd,
      env: eff.env,
      // A session's lifetime replaces the timeout; the team's object stops it first, saying why (interactive-sessions.ts).
      timeoutMs: r.interactive ? policy.interactive.maxLifetimeMs + SESSION_TIMEOUT_MARGIN_MS : eff.timeoutMs,
      limits: {
        inlineBytes: eff.inlineBytes,
        artifactBytes: eff.artifactBytes,
        // The team's resource limits; the agent enforces them (executor/README.md, "Limits").
        memoryBytes: policy.limits.memoryBytes,
        maxProcesses: policy.limits.maxProcesses,
        maxOpenFiles: policy.limits.maxOpenFiles,
        maxFileBytes: policy.limits.maxFileBytes,
        cpuSeconds: policy.limits.cpuSeconds,
        tmpBytes: policy.limits.tmpBytes,
        diskWriteBytes: policy.limits.diskWriteBytes,
      },
      ...(eff.allowedExecutables && job.mode !== 'shell' ? { allowedExecutables: eff.allowedExecutables } : {}),
      ...(policy.sandbox.reuse ? { reuse: policy.sandbox.reuse } : {}),
      ...(eff.hardenGit && job.mode === 'argv' ? { hardenGit: true as const } : {}),
      // Also when off: the agent names `network.source` when it refuses a connection.
      network: eff.network,
      ...(r.interactive ? { interactive: r.interactive } : {}),
      ...(r.workspace
        ? { workspace: { ...r.workspace, quotaBytes: policy.workspaces.quotaBytes, idleMs: Math.round(policy.workspaces.idleHours * 3_600_000) } }
        : {}),
    };
    // No D1 write here: the team's DO keeps the call's audit row with the job (durably, in the
    // same transaction) and writes both D1 rows in the background, with the job's end if it is short.
    const key = callCancelKey(ctx, extra);
    const { answer, events } = await submitAndFollow(env, principal.team, {
      spec,
      cancelKey: key,
      runtime: r.job.runtime,
      tool: r.tool,
      subject: principal.subject,
      tokenId: principal.tokenId,
      maxConcurrentJobs: policy.limits.maxConcurrentJobs,
      queueWaitMs: policy.limits.queueWaitMs,
      maxQueueLength: policy.queue.maxLength,
      sandboxMinimum: policy.sandbox.minimum === 'none' ? undefined : policy.sandbox.minimum,
      // A job that may become a task is followed by polling its durable row, not by an event stream.
      agent: r.selector?.agent,
      labels: r.selector?.labels,
      background: r.background === true || r.task !== undefined || r.interactive !== undefined,
      ...(r.interactive ? { session: policy.interactive } : {}),
      artifactHours: artifactHoursOf(policy),
      audit: {
        at: started,
        command: auditBase.command,
        cwd: auditBase.cwd,
        ...(r.parentJobId ? { parentJobId: r.parentJobId } : {}),
        reason: [approval ? `ask: ${approval.note}` : decision.reason, ...decision.notes].filter(Boolean).join('; '),
        ...(approval ? { approvalId: approval.id } : {}),
      },
    });
    audited = true;
    const done = (o: DispatchOutcome): GovernedOutcome => {
      note({ outcome: o.exit.state, exitCode: o.exit.exitCode, agent: o.agentId, sandbox: o.sandbox });
      return { kind: 'done', exit: o.exit, decision, jobId, handle: spec.artifactHandle, agentId: o.agentId, sandbox: o.sandbox };
    };
    if (!answer.ok) return { kind: 'error', error: { code: answer.code, message: answer.message }, decision, jobId, handle: spec.artifactHandle };
    note({ agent: answer.agentId, ...(r.background ? { outcome: answer.state } : {}) });
    if (r.background) return { kind: 'accepted', state: answer.state, decision, jobId, handle: spec.artifactHandle, agentId: answer.agentId };
    if (r.task) {
      const stopWaiting = cancelOnStreamClose(ctx, extra, key);
      const view = await jobStatus(env, principal.team, spec.jobId, r.task.afterMs).finally(stopWaiting);
      // Its result is complete once the uploads its exit announced have ended (a foreground call waits for them too).
      if (view && !isSettled(view)) {
        note({ outcome: view.state, agent: view.agent_id });
        return { kind: 'pending', state: view.state as 'queued' | 'running', decision, jobId, handle: spec.artifactHandle, agentId: view.agent_id };
      }
      const res = await jobOutcome(env, principal.team, spec.jobId);
      if (!res.ok) return { kind: 'error', error: res.error, decision, jobId, handle: spec.artifactHandle };
      return done(res.value);
    }
    // A background call's stream ends at once; only a foreground call's hang-up is a 2026-era cancel.
    const stopOnHangUp = cancelOnStreamClose(ctx, extra, key);
    const res = await awaitJob(env, principal.team, spec.jobId, progressReporter(extra), events).finally(stopOnHangUp);
    if (!res.ok) return { kind: 'error', error: res.error, decision, jobId, handle: spec.artifactHandle };
    return done(res.value);
  } catch (e) {
    failure = e instanceof Error ? e.message : String(e);
    return {
      kind: 'error',
      error: { code: 'internal', message: `the call failed before the job's end was known: ${failure}` },
      decision: null,
      jobId,
      handle: '',
    };
  } finally {
    // Exactly one row: none yet → write it. If the DO did take the job and only its answer was
    // lost, its own copy of the row finds this one (same job id) and completes it.
    if (!audited) {
      await recordAudit(env, {
        ...auditBase,
        decision: 'failed',
        reason: `internal: ${failure ?? 'no decision'}`,
        jobId: jobId || undefined,
        durationMs: Date.now() - started,
      }).catch(() => {});
    }
  }
}

/** What an approval is bound to: the request as the caller sent it. */
function approvable(r: GovernedRequest): ApprovableRequest {
  return {
    tool: r.tool,
    mode: r.policy.mode,
    command: r.policy.command,
    args: r.policy.args,
    runtime: r.policy.runtime,
    code: r.policy.code ?? r.job.code,
    stdin: r.job.stdin,
    cwd: r.policy.cwd,
    env: r.policy.env,
    timeoutMs: r.policy.timeoutMs,
  };
}

/**
 * 2026-07-28 has no `notifications/cancelled` over HTTP: a client cancels a call by closing the
 * call's response stream, which aborts the SDK's request signal. Then the team's DO kills the
 * job's whole process tree. (2025-era clients keep `notifications/cancelled`, routed in index.ts.)
 * Returns the function that stops listening once the job has ended on its own.
 */
function cancelOnStreamClose(ctx: ToolContext, extra: ToolExtra, key: string): () => void {
  if (ctx.era !== 'modern') return () => {};
  const signal = extra.mcpReq.signal;
  const onAbort = () => {
    ctx.waitUntil(cancelByCall(ctx.env, ctx.principal.team, key, 'the client closed the request stream').catch(() => false));
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}

/** A job that ended, as the tools shape their answer from it (also when a task's result is read later). */
export type EndedJob = Pick<Extract<GovernedOutcome, { kind: 'done' }>, 'exit' | 'jobId' | 'handle' | 'agentId' | 'sandbox'> & {
  /** The policy decision's notes (said beside the result). */
  notes: string[];
};

/** What the result of an ended job says beside it: the policy's notes, then the agent's (JobExit.notices). */
export function jobNotices(out: Pick<EndedJob, 'exit' | 'notes'>): string[] {
  return [...out.notes, ...(out.exit.notices ?? [])];
}

/** The `execute` tool's result for a job that ended; `gatehouse.exec` in scripts returns the same shape. */
export function executeResult(out: Pick<EndedJob, 'exit' | 'jobId' | 'handle' | 'agentId' | 'sandbox'>) {
  const { exit } = out;
  return {
    stdout: exit.stdout,
    stderr: exit.stderr,
    exit_code: exit.exitCode,
    timed_out: exit.timedOut,
    stdout_truncated: exit.stdoutTruncated,
    stderr_truncated: exit.stderrTruncated,
    elapsed_ms: Math.round(exit.durationMs),
    state: exit.state,
    signal: exit.signal,
    job_id: out.jobId,
    artifact_handle: out.handle,
    agent_id: out.agentId,
    sandbox: out.sandbox,
    ...(exit.error && exit.state !== 'failed_to_start' ? { error: exit.error } : {}),
  };
}
