/**
 * The team's scheduler, as a pure function: given the queue, the connected agents and the clock,
 * it says which queued jobs start on which agent and which ones have waited past their deadline.
 * It touches no socket and no storage; the Durable Object applies its decisions.
 *
 * Rules:
 * - FIFO: jobs are considered oldest first. A job that cannot start yet reserves the agents it
 *   could use, so a later job never takes a slot an earlier one is waiting for.
 * - An agent never runs more than its capacity; the team never runs more than its concurrency limit.
 * - Among eligible agents with a free slot, the least loaded (running / capacity) wins; ties go to
 *   the agent with the most free slots, then the lowest id (deterministic).
 * - Eligibility: the runtime the job needs, the team's sandbox floor, the job's agent/labels selector, and for an
 *   interactive job an agent protocol that carries its input (INTERACTIVE_MIN_PROTOCOL).
 * - An interactive job has its own budget (`interactive.maxSessions`, counted when it is submitted): it neither
 *   waits for nor takes one of the team's `maxConcurrentJobs` slots, so a long session never starves other jobs.
 * - A job still queued at its deadline is expired (the caller gets a clear error).
 */
import type { SandboxKind } from '../contracts/agent-protocol.ts';
import { INTERACTIVE_MIN_PROTOCOL } from '../contracts/interactive.ts';

/** Isolation strength: a floor of `bwrap` admits bwrap and gvisor agents, never `none`. */
const SANDBOX_RANK: Record<SandboxKind, number> = { none: 0, bwrap: 1, gvisor: 2 };

export interface SchedAgent {
  id: string;
  capacity: number;
  /** Jobs this agent runs now (assigned, not yet ended). */
  running: number;
  sandbox: SandboxKind;
  labels: string[];
  runtimes: string[];
  /** The agent protocol version of its hello (absent: taken as current). */
  protocol?: number;
  /** What it announced beyond its protocol (`workspaces`); absent: nothing. */
  capabilities?: string[];
}

export interface SchedJob {
  id: string;
  /** Oldest first; the caller passes the queue in this order. */
  deadline: number;
  runtime?: string;
  sandboxMinimum?: SandboxKind;
  agent?: string;
  labels?: string[];
  /** Interactive: needs an agent speaking INTERACTIVE_MIN_PROTOCOL, and is outside the team's concurrency limit. */
  interactive?: boolean;
}

export interface SchedInput {
  now: number;
  queue: SchedJob[];
  agents: SchedAgent[];
  /** Jobs of the team running now, on any agent (interactive ones excluded: they have their own budget). */
  teamRunning: number;
  /** The team policy's concurrency limit. */
  maxConcurrent: number;
}

export interface SchedDecision {
  start: { jobId: string; agentId: string }[];
  expire: { jobId: string; reason: Ineligibility | 'busy' }[];
}

export type Ineligibility = 'no_agent' | 'runtime' | 'sandbox' | 'agent' | 'labels' | 'protocol';

/** Why `agent` cannot run `job` at all (null: it can, capacity permitting). */
function ineligible(job: SchedJob, agent: SchedAgent): Ineligibility | null {
  if (job.agent !== undefined && agent.id !== job.agent) return 'agent';
  if (job.sandboxMinimum && SANDBOX_RANK[agent.sandbox] < SANDBOX_RANK[job.sandboxMinimum]) return 'sandbox';
  if (job.runtime && !agent.runtimes.includes(job.runtime)) return 'runtime';
  if (job.labels?.length && !job.labels.every((l) => agent.labels.includes(l))) return 'labels';
  if (job.interactive && (agent.protocol ?? INTERACTIVE_MIN_PROTOCOL) < INTERACTIVE_MIN_PROTOCOL) return 'protocol';
  return null;
}

/**
 * Why no connected agent can ever take `job`, or null when some can. Each agent fails on its first
 * unmet requirement (agent, sandbox, runtime, labels); the answer is the one of the agent that got
 * furthest, which is what the user has to change.
 */
export function whyNoAgentFits(job: SchedJob, agents: SchedAgent[]): Ineligibility | null {
  if (agents.length === 0) return 'no_agent';
  const reasons = agents.map((a) => ineligible(job, a));
  if (reasons.some((r) => r === null)) return null;
  for (const r of ['protocol', 'labels', 'runtime', 'sandbox', 'agent'] as const) if (reasons.includes(r)) return r;
  return 'no_agent';
}

export function schedule(input: SchedInput): SchedDecision {
  const out: SchedDecision = { start: [], expire: [] };
  const load = new Map(input.agents.map((a) => [a.id, a.running]));
  const reserved = new Set<string>();
  let teamRunning = input.teamRunning;
  for (const job of input.queue) {
    if (input.now >= job.deadline) {
      out.expire.push({ jobId: job.id, reason: whyNoAgentFits(job, input.agents) ?? 'busy' });
      continue;
    }
    if (!job.interactive && teamRunning >= input.maxConcurrent) continue; // still expire later jobs whose deadline passed
    const eligible = input.agents.filter((a) => ineligible(job, a) === null);
    const free = eligible
      .filter((a) => !reserved.has(a.id) && load.get(a.id)! < a.capacity)
      .sort((a, b) => {
        const la = load.get(a.id)! / a.capacity;
        const lb = load.get(b.id)! / b.capacity;
        if (la !== lb) return la - lb;
        const fa = a.capacity - load.get(a.id)!;
        const fb = b.capacity - load.get(b.id)!;
        if (fa !== fb) return fb - fa;
        return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
      });
    const pick = free[0];
    if (!pick) {
      for (const a of eligible) reserved.add(a.id);
      continue;
    }
    out.start.push({ jobId: job.id, agentId: pick.id });
    load.set(pick.id, load.get(pick.id)! + 1);
    if (!job.interactive) teamRunning += 1;
  }
  return out;
}

/** The earliest deadline among queued jobs (for the next alarm), or null. */
export function nextDeadline(queue: SchedJob[]): number | null {
  let min: number | null = null;
  for (const j of queue) if (min === null || j.deadline < min) min = j.deadline;
  return min;
}
