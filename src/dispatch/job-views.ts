/**
 * The team's jobs as callers read them: a job's view (waiting for its end when asked), its whole
 * result, the output the edge keeps of it, and the list. Reads only: what changes a job is job-lifecycle.ts.
 */
import type { JobExit, StreamName } from '../contracts/agent-protocol.ts';
import { isTerminal, JobListFilter, type JobView } from '../contracts/job-view.ts';
import type { KeptOutput } from './events.ts';
import type { Followers } from './followers.ts';
import type { JobRecords } from './job-records.ts';
import type { JobRows } from './job-rows.ts';
import type { LiveOutput } from './live-output.ts';
import { waitForOutput, type OutputWaitEnd, type OutputWaitQuery } from './output-wait.ts';

export interface JobViewParts {
  rows: Pick<JobRows, 'get' | 'list'>;
  records: Pick<JobRecords, 'view' | 'result'>;
  live: Pick<LiveOutput, 'read' | 'relayed'>;
  followers: Pick<Followers, 'waitForEnd' | 'waitForOutput'>;
}

export class JobViews {
  private readonly parts: JobViewParts;

  constructor(parts: JobViewParts) {
    this.parts = parts;
  }

  private get rows(): JobViewParts['rows'] {
    return this.parts.rows;
  }

  /** The job's view; with `waitMs`, waits (long-poll) until it ends or the time is up. */
  async status(jobId: string, waitMs: number): Promise<JobView | null> {
    let row = this.rows.get(jobId);
    if (!row) return null;
    if (!isTerminal(row.state) && waitMs > 0) {
      await this.parts.followers.waitForEnd(jobId, waitMs);
      row = this.rows.get(jobId)!;
    }
    return this.parts.records.view(row);
  }

  /** `job_output`'s wait: until output past the offset (or `until`) is kept, the job ends, or the time is up. */
  waitOutput(q: OutputWaitQuery, now: () => number): Promise<OutputWaitEnd> {
    return waitForOutput(this.parts, q, now);
  }

  /** The finished job's full result (inline output reassembled), with who ran it. */
  result(jobId: string): { view: JobView; exit: JobExit | null } | null {
    const row = this.rows.get(jobId);
    if (!row) return null;
    return { view: this.parts.records.view(row), exit: this.parts.records.result(jobId) };
  }

  /**
   * Output the edge keeps, from a byte offset: what the agent relayed live (the first
   * LIVE_OUTPUT_MAX_BYTES of each stream), or — for an ended job whose result holds more — the
   * result's inline output. `total` is what is kept so far.
   */
  liveOutput(jobId: string, stream: StreamName, offset: number, maxBytes: number): KeptOutput | null {
    const row = this.rows.get(jobId);
    if (!row) return null;
    const live = this.parts.live.read(jobId, stream, offset, maxBytes);
    if (isTerminal(row.state) && row.exit) {
      const inline = new TextEncoder().encode(this.parts.records.result(jobId)?.[stream] ?? '');
      if (inline.byteLength > live.total) {
        return {
          data: inline.subarray(Math.min(offset, inline.byteLength), Math.min(offset + maxBytes, inline.byteLength)),
          total: inline.byteLength,
          source: 'result',
        };
      }
    }
    return { ...live, source: 'live' };
  }

  list(filter: JobListFilter): { jobs: JobView[]; next_cursor: string | null } {
    const f = JobListFilter.parse(filter);
    const cursor = f.cursor !== undefined && /^\d+$/.test(f.cursor) ? Number(f.cursor) : undefined;
    const { rows, next } = this.rows.list({ state: f.state, subject: f.subject, tool: f.tool, cursor, limit: f.limit });
    return { jobs: rows.map((r) => this.parts.records.view(r)), next_cursor: next === null ? null : String(next) };
  }
}
