/**
 * A bench-only trace of where one call's wall time goes: with `HOTPATH_TRACE=1` among the
 * gateway's vars (and in the agent's environment), each step of the governed path prints one
 * line `hotpath-trace <step> <epoch ms>`; `node bench/hotpath.ts --trace` runs calls one at a
 * time and lines the steps up. Off (always, outside that bench), a step costs one property read.
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

export function stamp(env: { HOTPATH_TRACE?: string }, step: TraceStep): void {
  if (env.HOTPATH_TRACE === '1') console.warn(`${TRACE_PREFIX} ${step} ${Date.now()}`);
}

/** A response whose body's end is stamped (only built while tracing). */
export function stampBodyEnd(env: { HOTPATH_TRACE?: string }, res: Response): Response {
  if (env.HOTPATH_TRACE !== '1' || !res.body) return res;
  const end = new TransformStream<Uint8Array, Uint8Array>({ flush: () => stamp(env, 'edge.response_end') });
  return new Response(res.body.pipeThrough(end), res);
}
