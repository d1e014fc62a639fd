/**
 * The bench's trace of one call (`node bench/hotpath.ts --trace`): the steps of the governed path
 * and the line each side prints at a step, `hotpath-trace <step> <epoch ms>`. The Worker and its
 * team's object (`stamp` below; the MCP route's marks: src/mcp/trace.ts), the agent
 * (executor/agent.ts) and the bench that lines the steps up all use this one list.
 */

/** The steps of one governed `execute`, in path order (a `policy_check` passes the first four, then `edge.audited`). */
export const TRACE_STEPS = [
  'client.send',
  'edge.request', // the MCP route's first middleware
  'edge.authenticated', // JWT verified, revocation + policy version read (one D1 query)
  'edge.rate_limited', // the per-token and per-team limits
  'edge.decided', // policy from the isolate's cache, decision
  'edge.audited', // policy_check: its audit row written
  'do.submitted', // the team's DO took the submit+follow call (it writes the job's D1 rows later)
  'do.job_start_sent', // job.start written to the agent's WebSocket
  'agent.job_start', // the agent read it
  'agent.exit_ready', // the job's process ended and its exit is built
  'agent.exit_sent',
  'do.exit_received', // job.exit read by the DO (stored in the same turn)
  'do.settled', // the job's end (and announced uploads) stored: followers get the exit event
  'edge.exit_event', // the Worker read the exit event from the DO's stream
  'edge.response_end', // the Worker's response body closed
  'client.body_end', // the client read the response's last byte
  'client.done',
] as const;
export type TraceStep = (typeof TRACE_STEPS)[number];

export const TRACE_PREFIX = 'hotpath-trace';

/** The line a side prints when a call reaches `step`. */
export function traceLine(step: TraceStep, at = Date.now()): string {
  return `${TRACE_PREFIX} ${step} ${at}`;
}

/** Replaced at build time by `--define GATEHOUSE_TRACE:true` (bench/gateway.ts); a global in no other build. */
declare const GATEHOUSE_TRACE: boolean | undefined;

/**
 * Whether this Worker build traces. Only a Worker built for the bench does: every other build leaves
 * GATEHOUSE_TRACE undefined, so a `stamp` returns at a constant. (The agent has its own switch.)
 */
export const TRACING = typeof GATEHOUSE_TRACE !== 'undefined' && GATEHOUSE_TRACE === true;

/**
 * The Worker's and the team's object's stamp: prints `step` with the time, in a traced build. `env`
 * is the caller's bindings and is not read: whether a Worker traces is fixed when it is built.
 */
export function stamp(_env: unknown, step: TraceStep): void {
  if (TRACING) console.warn(traceLine(step));
}
