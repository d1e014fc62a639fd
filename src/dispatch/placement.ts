/**
 * Where the pure scheduler (scheduler.ts) meets the team's rows and sockets: a job row as the
 * scheduler sees it, and the agent a new job can start on at once — so `Jobs.submit` writes the job
 * running (one row) rather than queued and then started.
 */
import type { SandboxKind } from '../contracts/agent-protocol.ts';
import type { AgentLink } from './agent-link.ts';
import type { DispatchRequest } from './events.ts';
import type { JobRow } from './job-rows.ts';
import { schedule, whyNoAgentFits, type SchedJob } from './scheduler.ts';
import type { Placement, Workspaces } from './workspaces.ts';

/** A job row as the scheduler reads it. */
export function toSchedJob(r: JobRow, interactive = false): SchedJob {
  return {
    ...(interactive ? { interactive } : {}),
    id: r.id,
    deadline: r.deadline,
    runtime: r.runtime ?? undefined,
    sandboxMinimum: r.sandbox_min ?? undefined,
    agent: r.sel_agent ?? undefined,
    labels: r.sel_labels ? (JSON.parse(r.sel_labels) as string[]) : undefined,
  };
}

/** The agent a new job starts on right away, as the scheduler would place it; null when it would wait or be refused. */
export function placeNow(
  req: DispatchRequest,
  now: number,
  link: Pick<AgentLink, 'schedAgents' | 'agent' | 'socketOf'>,
  /** The team's running jobs that take a concurrency slot (interactive ones do not). */
  running: readonly JobRow[],
  load: ReadonlyMap<string, number>,
): { id: string; subject: string; sandbox: SandboxKind } | null {
  const job: SchedJob = {
    ...(req.spec.interactive ? { interactive: true } : {}),
    id: req.spec.jobId,
    deadline: now + req.queueWaitMs,
    runtime: req.runtime,
    sandboxMinimum: req.sandboxMinimum,
    agent: req.agent,
    labels: req.labels?.length ? req.labels : undefined,
  };
  const decision = schedule({ now, queue: [job], agents: link.schedAgents(load), teamRunning: running.length, maxConcurrent: req.maxConcurrentJobs });
  const agentId = decision.start[0]?.agentId;
  const r = agentId ? link.agent(agentId) : null;
  return agentId && r && link.socketOf(agentId) ? { id: agentId, subject: r.subject, sandbox: r.sandbox } : null;
}

/** The agent a workspace job is pinned to (workspaces.ts): the one that holds its workspace, or one that can create it. */
export function placeWorkspace(
  req: DispatchRequest,
  now: number,
  link: Pick<AgentLink, 'schedAgents'>,
  load: ReadonlyMap<string, number>,
  workspaces: Pick<Workspaces, 'place'>,
): Placement {
  const job: SchedJob = {
    id: req.spec.jobId,
    deadline: now,
    runtime: req.runtime,
    sandboxMinimum: req.sandboxMinimum,
    labels: req.labels?.length ? req.labels : undefined,
  };
  return workspaces.place({ workspace: req.spec.workspace!, agent: req.agent, fits: (a) => whyNoAgentFits(job, [a]) === null }, link.schedAgents(load), now);
}
