/**
 * `job_output`'s wait in the team's object: resolves once the job's kept output past an offset is non-empty (or
 * holds `until`), the job ended, or the time is up. Reads only; woken by each live output frame (followers.ts).
 */
import type { StreamName } from '../contracts/agent-protocol.ts';
import { isTerminal } from '../contracts/job-view.ts';
import { UNTIL_WINDOW_BYTES, untilMatcher } from '../contracts/output-wait.ts';
import type { Followers } from './followers.ts';
import type { JobRows } from './job-rows.ts';
import type { LiveOutput } from './live-output.ts';

export interface OutputWaitQuery {
  jobId: string;
  stream: StreamName;
  offset: number;
  waitMs: number;
  until?: string;
}

/** Why the wait ended: output arrived, `until` was seen, the job ended (or is unknown), or the time ran out. */
export type OutputWaitEnd = 'output' | 'until' | 'ended' | 'timeout';

export async function waitForOutput(
  p: { rows: Pick<JobRows, 'get'>; live: Pick<LiveOutput, 'read' | 'relayed'>; followers: Pick<Followers, 'waitForOutput'> },
  q: OutputWaitQuery,
  now: () => number,
): Promise<OutputWaitEnd> {
  const matcher = q.until ? untilMatcher(q.until) : null;
  if (matcher && !matcher.ok) return 'ended';
  const deadline = now() + q.waitMs;
  for (;;) {
    const row = p.rows.get(q.jobId);
    if (!row || isTerminal(row.state)) return 'ended';
    const kept = p.live.relayed(q.jobId, q.stream);
    if (kept > q.offset) {
      if (!matcher) return 'output';
      const from = Math.max(q.offset, kept - UNTIL_WINDOW_BYTES);
      const text = new TextDecoder().decode(p.live.read(q.jobId, q.stream, from, kept - from).data);
      if (matcher.test(text)) return 'until';
    }
    const left = deadline - now();
    if (left <= 0) return 'timeout';
    await p.followers.waitForOutput(q.jobId, left);
  }
}
