/**
 * Why a queued job was refused, in words a caller can act on: no agent at all, none with its
 * runtime, sandbox floor, agent or labels, or all of them busy (the team's or the agents' limit).
 */
import { RUNTIMES, type RuntimeName } from '../contracts/runtimes.ts';
import type { JobRow } from './job-rows.ts';
import type { GatehouseErrorShape as Failure } from '../contracts/errors.ts';
import { noAgentMessage } from './outcomes.ts';
import type { Ineligibility } from './scheduler.ts';
import { INTERACTIVE_MIN_PROTOCOL } from '../contracts/interactive.ts';

/** The refusal of a job past the policy's `maxConcurrentJobs`: the policy sets the limit, the team's object enforces it. */
export function concurrencyLimitMessage(active: number, max: number): string {
  return `Concurrency limit reached (${active}/${max} active jobs)`;
}

/** What the team looks like when the job is refused. */
export interface RefusalContext {
  team: string;
  /** The ids of the agents connected. */
  connected: string[];
  /** The team's running jobs. */
  active: number;
  /** Connected agents that could take jobs, and their slots. */
  agents: number;
  slots: number;
}

/** The workspace a job's spec names (the row keeps the spec when it fits; a refusal is rare enough to parse it). */
function workspaceOf(row: JobRow): string | null {
  try {
    return row.spec ? ((JSON.parse(row.spec) as { workspace?: { id?: string } }).workspace?.id ?? null) : null;
  } catch {
    return null;
  }
}

export function refusalOf(row: JobRow, why: Ineligibility | 'busy', c: RefusalContext): Failure {
  const waited = `${Math.max(0, row.deadline - row.created_at)}ms`;
  const ws = why === 'agent' || why === 'busy' || why === 'no_agent' ? workspaceOf(row) : null;
  // A workspace job waits for the agent that holds its workspace, and no other: the caller is told which, and why.
  if (ws && row.sel_agent && (why === 'agent' || why === 'no_agent'))
    return {
      code: 'no_agent',
      message: `workspace "${ws}" is held by executor agent "${row.sel_agent}", which is not connected (waited ${waited}); its jobs run only there. Start that agent again, or use another workspace`,
    };
  if (ws && why === 'busy' && c.active < row.max_concurrent)
    return {
      code: 'concurrency_limit',
      message: `workspace "${ws}" is held by executor agent "${row.sel_agent}", whose slots were all busy for ${waited}; its jobs run only there. Try again later`,
    };
  switch (why) {
    case 'no_agent':
      return { code: 'no_agent', message: `${noAgentMessage(c.team)} (waited ${waited} for one)` };
    case 'runtime': {
      const def = RUNTIMES[row.runtime as RuntimeName];
      return {
        code: 'runtime_unavailable',
        message: `runtime "${row.runtime}" is not installed on any connected executor agent; install ${def ? `the Debian package ${def.debianPackage}` : 'its toolchain'} on the agent host and restart the agent`,
      };
    }
    case 'sandbox':
      return {
        code: 'no_agent',
        message: `no connected executor agent meets the team's sandbox floor (sandbox.minimum = ${row.sandbox_min}); start an agent with --sandbox ${row.sandbox_min === 'gvisor' ? 'gvisor' : 'gvisor or bwrap'}`,
      };
    case 'agent':
      return {
        code: 'no_agent',
        message: `executor agent "${row.sel_agent}" is not connected (or cannot run this job); connected: ${c.connected.join(', ') || 'none'}`,
      };
    case 'labels':
      return { code: 'no_agent', message: `no connected executor agent carries all the labels ${row.sel_labels}; start one with --label for each` };
    case 'protocol':
      return {
        code: 'no_agent',
        message: `no connected executor agent can run an interactive job: it needs agent protocol v${INTERACTIVE_MIN_PROTOCOL} or later (job.input), and the connected agents speak an older one; upgrade the agents to the gateway's release`,
      };
    case 'busy': {
      const message =
        c.active >= row.max_concurrent || c.slots >= row.max_concurrent
          ? concurrencyLimitMessage(c.active, row.max_concurrent)
          : `All executor agents are busy (${c.active}/${c.slots} slots in use on ${c.agents} agent${c.agents === 1 ? '' : 's'}); try again later or start another agent`;
      return { code: 'concurrency_limit', message: `${message} (waited ${waited} in the queue)` };
    }
  }
}
