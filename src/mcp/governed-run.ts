/**
 * The request path of one governed job, shared by `execute` and `runtime_execute`:
 * team policy → (denied: audit, return the reason) → job spec → TeamDispatcher → audit.
 * Every call leaves exactly one audit row, whatever happens.
 */
import type { JobExit, JobSpec } from '../contracts/agent-protocol.ts';
import type { GatehouseErrorShape } from '../contracts/errors.ts';
import type { RuntimeName } from '../contracts/runtimes.ts';
import { decide, type PolicyDecision, type PolicyRequest } from '../policy/engine.ts';
import { getTeamPolicy } from '../store/policies.ts';
import { newArtifactHandle } from '../store/artifacts.ts';
import { writeAudit } from '../store/audit.ts';
import { recordJobCreated } from '../store/jobs.ts';
import { cancelByCall, dispatchJob } from '../dispatch/client.ts';
import { callCancelKey, type ToolContext, type ToolExtra } from './context.ts';
import { progressReporter } from './progress.ts';

export interface GovernedRequest {
  tool: 'execute' | 'runtime_execute' | 'run_script';
  /** A run_script subprocess: the script's id, so its audit row links to the script's row. */
  parentJobId?: string;
  policy: Omit<PolicyRequest, 'team' | 'subject' | 'tool'>;
  /** What the agent runs; `mode` may differ from the policy's (runtime shell code is decided as a shell string). */
  job: Pick<JobSpec, 'mode' | 'command' | 'args'> & { runtime?: RuntimeName; code?: string; stdin?: string };
}

export type GovernedOutcome =
  | { kind: 'denied'; decision: PolicyDecision }
  | { kind: 'error'; error: GatehouseErrorShape; decision: PolicyDecision; jobId: string; handle: string }
  | { kind: 'done'; exit: JobExit; decision: PolicyDecision; jobId: string; handle: string; agentId: string };

export async function runGoverned(ctx: ToolContext, extra: ToolExtra, r: GovernedRequest): Promise<GovernedOutcome> {
  const { env, principal } = ctx;
  const started = Date.now();
  const auditBase = {
    team: principal.team, subject: principal.subject, tokenId: principal.tokenId, tool: r.tool,
    command: { mode: r.policy.mode, command: r.policy.command, args: r.policy.args, runtime: r.policy.runtime, env: r.policy.env },
    cwd: r.policy.cwd,
    ...(r.parentJobId ? { parentJobId: r.parentJobId } : {}),
  };
  const { policy } = await getTeamPolicy(env, principal.team);
  const decision = await decide(policy, { ...r.policy, tool: r.tool, team: principal.team, subject: principal.subject });
  if (!decision.allowed || !decision.effective) {
    await writeAudit(env.DB, { ...auditBase, decision: 'denied', reason: `${decision.stage}: ${decision.reason}`, durationMs: Date.now() - started });
    return { kind: 'denied', decision };
  }
  const eff = decision.effective;
  // A simple command string was decided as argv: it runs exactly as decided, without sh -c.
  const job = decision.runAs && r.job.mode === 'shell' ? { ...r.job, mode: 'argv' as const, command: decision.runAs.command, args: decision.runAs.args } : r.job;
  const spec: JobSpec = {
    jobId: crypto.randomUUID(),
    artifactHandle: newArtifactHandle(),
    mode: job.mode,
    command: job.command,
    args: job.args,
    ...(job.runtime ? { runtime: job.runtime } : {}),
    ...(job.code !== undefined ? { code: job.code } : {}),
    ...(job.stdin !== undefined ? { stdin: job.stdin } : {}),
    cwd: eff.cwd,
    env: eff.env,
    timeoutMs: eff.timeoutMs,
    limits: {
      inlineBytes: eff.inlineBytes, artifactBytes: eff.artifactBytes,
      // The team's resource limits; the agent enforces them (executor/README.md, "Limits").
      memoryBytes: policy.limits.memoryBytes, maxProcesses: policy.limits.maxProcesses, maxOpenFiles: policy.limits.maxOpenFiles,
      maxFileBytes: policy.limits.maxFileBytes, cpuSeconds: policy.limits.cpuSeconds, tmpBytes: policy.limits.tmpBytes,
      diskWriteBytes: policy.limits.diskWriteBytes,
    },
    ...(eff.allowedExecutables && job.mode !== 'shell' ? { allowedExecutables: eff.allowedExecutables } : {}),
  };
  await recordJobCreated(env.DB, { team: principal.team, spec, tool: r.tool, subject: principal.subject, at: started });
  const key = callCancelKey(ctx, extra);
  const stopOnHangUp = cancelOnStreamClose(ctx, extra, key);
  const res = await dispatchJob(
    env, principal.team,
    {
      spec, cancelKey: key, runtime: r.job.runtime, tool: r.tool, subject: principal.subject,
      maxConcurrentJobs: policy.limits.maxConcurrentJobs, queueWaitMs: policy.limits.queueWaitMs,
    },
    progressReporter(extra),
  ).finally(stopOnHangUp);
  if (!res.ok) {
    await writeAudit(env.DB, { ...auditBase, decision: 'failed', reason: `${res.error.code}: ${res.error.message}`, jobId: spec.jobId, durationMs: Date.now() - started });
    return { kind: 'error', error: res.error, decision, jobId: spec.jobId, handle: spec.artifactHandle };
  }
  const exit = res.value.exit;
  await writeAudit(env.DB, {
    ...auditBase,
    decision: exit.state === 'failed_to_start' || exit.state === 'lost' ? 'failed' : 'allowed',
    reason: [decision.reason, ...decision.notes, exit.error?.message].filter(Boolean).join('; '),
    jobId: spec.jobId,
    exitStatus: exitStatus(exit),
    durationMs: exit.durationMs,
    bytes: exit.streams.stdout.bytes + exit.streams.stderr.bytes,
  });
  return { kind: 'done', exit, decision, jobId: spec.jobId, handle: spec.artifactHandle, agentId: res.value.agentId };
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

export function exitStatus(exit: JobExit): string {
  switch (exit.state) {
    case 'exited':
      return `exit ${exit.exitCode}`;
    case 'signaled':
      return `signal ${exit.signal}`;
    default:
      return exit.state;
  }
}
