/**
 * Callers waiting on a job: followers of its events (an NDJSON stream: where it stands, output,
 * its end) and `job_status` long-polls waiting for its end. Memory only, by nature: a follower is
 * a live caller. When the object restarts its streams break and each caller reads the durable job
 * table instead (src/dispatch/client.ts), so nothing here has to survive.
 *
 * While a caller waits the object is awake for its call anyway, so the liveness check of the agents
 * runs from a timer here (`Watch`) instead of the alarm: a short job a caller follows arms no alarm
 * (an alarm set is a row written, its run a billed request). When the last caller of a job still
 * open goes away, `unwatched` hands its job back to the alarm.
 */
import type { SandboxKind } from '../contracts/agent-protocol.ts';
import { isTerminal } from '../contracts/job-view.ts';
import type { DispatchEvent } from './events.ts';
import type { JobRecords } from './job-records.ts';
import type { JobRow, JobRows } from './job-rows.ts';
import { lostExit } from './outcomes.ts';
import { asErrorCode } from '../contracts/errors.ts';

type Listener = (e: DispatchEvent) => void;

/** The liveness check run while callers wait: every `intervalMs`, and when the last caller of an open job leaves. */
export interface Watch {
  intervalMs: number;
  tick(): void | Promise<void>;
  unwatched(): void;
}

/** What following needs of the jobs: their rows, results and open uploads (read only). */
export type FollowedJobs = Pick<JobRows, 'get' | 'queued'> &
  Pick<JobRecords, 'result'> & {
    /** Whether an upload the job's exit announced is still running (stream-artifacts.ts). */
    hasUploading(jobId: string): boolean;
  };

export class Followers {
  private readonly jobs: FollowedJobs;
  private readonly onSettled: () => void;
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly endWaiters = new Map<string, Set<() => void>>();
  /** `job_output` waits: each resolves at the job's next output or its end. */
  private readonly outputWaiters = new Map<string, Set<() => void>>();
  private readonly watch: Watch | null;
  private watcher: ReturnType<typeof setInterval> | null = null;

  /** `onSettled` runs when a job's end goes out to its followers (a trace step of the hot path). */
  constructor(jobs: FollowedJobs, onSettled: () => void = () => {}, watch: Watch | null = null) {
    this.jobs = jobs;
    this.onSettled = onSettled;
    this.watch = watch;
  }

  /** Whether a caller follows the job or waits for its end (the object stays awake for that call). */
  isFollowed(jobId: string): boolean {
    return (this.listeners.get(jobId)?.size ?? 0) + (this.endWaiters.get(jobId)?.size ?? 0) > 0;
  }

  /** Runs the watch while anyone waits; a job left open by its last caller goes back to the alarm. */
  private rewatch(left?: string): void {
    if (!this.watch) return;
    const waiting = [...this.listeners.values(), ...this.endWaiters.values()].some((set) => set.size > 0);
    if (waiting && !this.watcher)
      this.watcher = setInterval(
        () => void Promise.resolve(this.watch?.tick()).catch((e) => console.error(`liveness check while callers wait: ${(e as Error).message}`)),
        this.watch.intervalMs,
      );
    if (!waiting && this.watcher) {
      clearInterval(this.watcher);
      this.watcher = null;
    }
    if (left !== undefined && !this.isFollowed(left)) {
      const row = this.jobs.get(left);
      if (row && !isTerminal(row.state)) this.watch.unwatched();
    }
  }

  /** The job's events as NDJSON lines; the stream ends with the job, or when the caller goes away (which never affects the job). */
  follow(jobId: string): ReadableStream<Uint8Array> {
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const writer = writable.getWriter();
    const encoder = new TextEncoder();
    let open = true;
    const stop = () => {
      if (!open) return;
      open = false;
      this.listeners.get(jobId)?.delete(listener);
      writer.close().catch(() => {});
      this.rewatch(jobId);
    };
    const listener: Listener = (e) => {
      if (!open) return;
      writer.write(encoder.encode(JSON.stringify(e) + '\n')).catch(() => stop());
      if (e.type === 'exit' || e.type === 'error') stop();
    };
    const row = this.jobs.get(jobId);
    if (!row) {
      listener({ type: 'error', code: 'not_found', message: `job "${jobId}" not found` });
      return readable;
    }
    if (isTerminal(row.state) && !this.jobs.hasUploading(jobId)) {
      listener(this.finalEvent(row));
      return readable;
    }
    const set = this.listeners.get(jobId) ?? new Set<Listener>();
    this.listeners.set(jobId, set);
    set.add(listener);
    this.rewatch();
    if (isTerminal(row.state)) return readable; // its end comes once the uploads it announced are settled
    listener(
      row.state === 'running'
        ? { type: 'started', jobId, agentId: row.agent!, sandbox: row.sandbox! }
        : { type: 'queued', jobId, position: this.jobs.queued().findIndex((q) => q.id === jobId) + 1 },
    );
    return readable;
  }

  /** Resolves when the job ends (`ended`) or after `waitMs`, whichever comes first. */
  waitForEnd(jobId: string, waitMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const set = this.endWaiters.get(jobId) ?? new Set<() => void>();
      this.endWaiters.set(jobId, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        this.rewatch(jobId);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      set.add(done);
      this.rewatch();
    });
  }

  /** Resolves at the job's next output, its end, or after `waitMs`, whichever comes first. */
  waitForOutput(jobId: string, waitMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const set = this.outputWaiters.get(jobId) ?? new Set<() => void>();
      this.outputWaiters.set(jobId, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0) this.outputWaiters.delete(jobId);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      set.add(done);
    });
  }

  emit(jobId: string, e: DispatchEvent): void {
    for (const l of [...(this.listeners.get(jobId) ?? [])]) l(e);
    if (e.type === 'output') for (const done of [...(this.outputWaiters.get(jobId) ?? [])]) done();
  }

  /** The job reached its terminal state: status waiters learn it now; followers once its uploads settle. */
  ended(jobId: string): void {
    for (const done of [...(this.endWaiters.get(jobId) ?? []), ...(this.outputWaiters.get(jobId) ?? [])]) done();
    this.endWaiters.delete(jobId);
    this.settle(jobId);
  }

  /** Gives followers of an ended job its result once no upload it announced is still running. */
  settle(jobId: string): void {
    const row = this.jobs.get(jobId);
    if (!row || !isTerminal(row.state) || this.jobs.hasUploading(jobId)) return;
    this.onSettled();
    this.emit(jobId, this.finalEvent(row));
    this.listeners.delete(jobId);
    this.rewatch();
  }

  private finalEvent(row: JobRow): DispatchEvent {
    const exit = this.jobs.result(row.id);
    if (exit) return { type: 'exit', exit, agentId: row.agent ?? '', sandbox: (row.sandbox ?? 'none') as SandboxKind };
    if (row.state === 'lost' && row.agent) {
      return {
        type: 'exit',
        exit: lostExit(row.id, (row.ended_at ?? Date.now()) - (row.started_at ?? row.created_at), row.error_message ?? 'lost'),
        agentId: row.agent,
        sandbox: row.sandbox ?? 'none',
      };
    }
    return { type: 'error', code: asErrorCode(row.error_code ?? row.state, 'internal'), message: row.error_message ?? `job ${row.state}` };
  }
}
