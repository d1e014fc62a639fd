/**
 * Turns job events into MCP progress notifications, when the client asked for them (a
 * progressToken in the request's _meta). The first one always names the job id, so a client
 * that loses the call can re-attach with job_status / job_output. Output is throttled so a
 * chatty job cannot flood the stream.
 */
import type { ToolExtra } from './call-context.ts';
import type { DispatchEvent } from '../dispatch/events.ts';

const MIN_INTERVAL_MS = 200;
const MESSAGE_CHARS = 200;

export function progressReporter(extra: ToolExtra): (e: DispatchEvent) => Promise<void> {
  const token = extra.mcpReq._meta?.progressToken;
  let progress = 0;
  /** Last output-driven notification; lifecycle events (queued/started) are never throttled. */
  let last = 0;
  let pending = '';
  return async (e) => {
    if (token === undefined) return;
    let message: string;
    if (e.type === 'queued') message = `job ${e.jobId} queued (position ${e.position})`;
    else if (e.type === 'started') message = `job ${e.jobId} started on agent ${e.agentId} (${e.sandbox})`;
    else if (e.type === 'output') {
      pending += e.data;
      const now = Date.now();
      if (now - last < MIN_INTERVAL_MS) return;
      last = now;
      const lines = pending.split('\n').filter((l) => l.trim() !== '');
      message = `${e.stream}: ${(lines.at(-1) ?? '').slice(0, MESSAGE_CHARS)}`;
      pending = '';
    } else return;
    progress += 1;
    try {
      await extra.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, message } });
    } catch {
      // The client stream may be gone; the job's result still matters more than its progress.
    }
  };
}
