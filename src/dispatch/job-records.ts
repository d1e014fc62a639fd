/**
 * A job's record across the stores that keep its parts — its row (job-rows.ts), its large texts
 * (job-texts.ts), its live output (live-output.ts) and its streams' upload states (stream-artifacts.ts,
 * of the artifact uploads capability) — written together where a job begins and ends, and read as one
 * view or result. It owns no table; each write that spans stores is one transaction.
 */
import type { JobExit, JobSpec, StreamName } from '../contracts/agent-protocol.ts';
import type { ArtifactState, JobState, JobView, StreamArtifact } from '../contracts/job-view.ts';
import { exitHoldsStream } from '../contracts/inline-result.ts';
import type { SqlHost } from './capability-host.ts';
import { SPEC_ROW_MAX_CHARS, type JobRow, type JobRows, type NewJob } from './job-rows.ts';
import type { JobTexts } from './job-texts.ts';
import type { LiveOutput } from './live-output.ts';
import type { StreamArtifacts } from './stream-artifacts.ts';

/**
 * Inline output (stdout + stderr characters) kept in the job row's `exit` JSON itself; above it
 * each stream goes to `job_blobs` in chunks. The default inline cap (40,000 bytes) fits, so most
 * results are one row; 64 Ki characters (≤ 192 KiB of UTF-8) keep the row far below the 2 MB limit.
 */
export const EXIT_ROW_INLINE_CHARS = 64 * 1024;

/** The `exit` column: the job's exit, with its inline output when `outputInline` (else in `job_blobs`; rows written before that flag existed too). */
type StoredExit = JobExit & { outputInline?: true };

const STREAMS = ['stdout', 'stderr'] as const;

export interface JobParts {
  rows: Pick<JobRows, 'create' | 'dayEndedBefore' | 'dropDay' | 'finish' | 'get' | 'markUploadOrphaned' | 'reset'>;
  texts: Pick<JobTexts, 'created' | 'drop' | 'dropParts' | 'output' | 'putOutput' | 'reset' | 'spec'>;
  live: Pick<LiveOutput, 'created' | 'relayed' | 'drop' | 'forget'>;
  streams: Omit<StreamArtifacts, 'begin' | 'complete' | 'report'>;
}

export class JobRecords {
  private readonly host: SqlHost;
  private readonly p: JobParts;

  constructor(host: SqlHost, parts: JobParts) {
    this.host = host;
    this.p = parts;
  }

  /** A write across the stores; one that throws was rolled back, and so are the copies memory kept. */
  private transaction<T>(f: () => T): T {
    try {
      return this.host.transactionSync(f);
    } catch (e) {
      this.p.rows.reset();
      this.p.texts.reset();
      this.p.streams.reset();
      throw e;
    }
  }

  /** Records a new job, queued; null when a job with its id exists already (its submit sent again). */
  create(j: NewJob): Readonly<JobRow> | null {
    const spec = JSON.stringify(j.spec);
    const inRow = spec.length <= SPEC_ROW_MAX_CHARS;
    return this.transaction(() => {
      const row = this.p.rows.create(j, inRow ? spec : null);
      if (!row) return null;
      this.p.texts.created(row.id, inRow ? null : spec);
      this.p.live.created(row.id);
      this.p.streams.created(row.id);
      return row;
    });
  }

  spec(id: string): JobSpec | null {
    const row = this.p.rows.get(id);
    if (!row) return null;
    const t = row.spec ?? this.p.texts.spec(id);
    return t === null ? null : (JSON.parse(t) as JobSpec);
  }

  /**
   * Moves an open job to its terminal state, once. With an `exit`, its inline output stays in the row
   * when small (else chunked) and its announced uploads stay open. Returns false when already closed.
   */
  finish(id: string, state: JobState, now: number, o: { exit?: JobExit; error?: { code: string; message: string }; fromAgent?: string } = {}): boolean {
    return this.transaction(() => {
      const { exit } = o;
      const inline = exit !== undefined && exit.stdout.length + exit.stderr.length <= EXIT_ROW_INLINE_CHARS;
      const stored = exit ? JSON.stringify(inline ? { ...exit, outputInline: true } : { ...exit, stdout: '', stderr: '' }) : null;
      const error = o.error ?? exit?.error ?? null;
      if (!this.p.rows.finish(id, state, now, { exit: stored, error, fromAgent: o.fromAgent })) return false;
      if (exit && !inline) this.p.texts.putOutput(id, exit.stdout, exit.stderr);
      this.p.streams.jobEnded(id, exit?.pendingArtifacts ?? []);
      this.dropStoredLive(id);
      this.p.texts.dropParts(id);
      return true;
    });
  }

  /** The edge stored a stream's body (its upload is complete): an ended job's live output of it is not needed. */
  streamStored(id: string): void {
    if (this.p.rows.get(id)?.ended_at != null) this.dropStoredLive(id);
  }

  /** Live output of streams whose artifact is stored is not needed any more (R2 serves them). */
  private dropStoredLive(id: string): void {
    const complete = STREAMS.filter((s) => this.p.streams.row(id, s)?.state === 'complete');
    if (complete.length) this.p.live.drop(id, complete);
  }

  /**
   * Whether a job's live output still has to be kept (live-output.ts asks before writing a young
   * job's): while it runs, and after its end for a stream whose artifact did not arrive (yet).
   */
  liveNeeded(id: string): boolean {
    const row = this.p.rows.get(id);
    if (!row) return false;
    if (row.ended_at === null) return true;
    const exit = row.exit ? (JSON.parse(row.exit) as JobExit) : null;
    if (!exit) return true;
    return STREAMS.some((s) => exit.streams[s].bytes > 0 && this.streamArtifact(row, exit, s).state !== 'complete');
  }

  /** Ended jobs with an upload still running (their agent owes a report), oldest first. */
  uploading(): Readonly<JobRow>[] {
    return this.p.streams
      .uploading()
      .map((id) => this.p.rows.get(id))
      .filter((r): r is Readonly<JobRow> => r !== null && r.ended_at !== null)
      .sort((a, b) => a.seq - b.seq);
  }

  /** The agent of an ended job is gone for good: its open uploads will never report. */
  failUploads(id: string): void {
    this.p.streams.failUploads(id);
    this.p.rows.markUploadOrphaned(id, null);
  }

  /** The full exit of a finished job (inline output reassembled), or null. */
  result(id: string): JobExit | null {
    const row = this.p.rows.get(id);
    if (!row?.exit) return null;
    const { outputInline, ...exit } = JSON.parse(row.exit) as StoredExit;
    // Uploads that followed the exit: once all are stored, the result says so.
    const pending = exit.pendingArtifacts ?? [];
    const uploaded = exit.artifactsUploaded || (pending.length > 0 && pending.every((s) => this.p.streams.row(id, s)?.state === 'complete'));
    if (outputInline) return { ...exit, artifactsUploaded: uploaded };
    return { ...exit, artifactsUploaded: uploaded, ...this.p.texts.output(id) };
  }

  /**
   * One stream's artifact as clients see it: stored whole, uploading, or — when it never arrived
   * (failed upload, lost agent) — `partial` with the live bytes the edge kept, else `failed`.
   */
  private streamArtifact(row: JobRow, exit: JobExit | null, stream: StreamName): StreamArtifact {
    const live = () => this.p.live.relayed(row.id, stream);
    if (row.ended_at === null) return { state: 'none', bytes: live() };
    if (exit && exit.streams[stream].bytes === 0) return { state: 'none', bytes: 0 };
    const a = this.p.streams.row(row.id, stream);
    if (a?.state === 'complete') return { state: 'complete', bytes: a.bytes };
    if (a?.state === 'uploading') return { state: 'uploading', bytes: live() };
    // A stream the exit holds whole was never uploaded: its artifact is the exit's text (artifact-index.ts).
    if (!a && exit && exitHoldsStream(exit, stream)) return { state: 'complete', bytes: exit.streams[stream].bytes };
    // An agent that uploaded before reporting its exit (no row: nothing was needed) said how it went.
    if (!a && exit?.artifactsUploaded) return { state: 'complete', bytes: exit.streams[stream].bytes };
    const kept = live();
    if (kept > 0) return { state: 'partial', bytes: kept };
    return { state: exit ? 'failed' : 'none', bytes: 0 };
  }

  view(row: JobRow): JobView {
    const exit = row.exit ? (JSON.parse(row.exit) as JobExit) : null;
    const error = row.error_code ? { code: row.error_code, message: row.error_message ?? '' } : null;
    const artifacts = { stdout: this.streamArtifact(row, exit, 'stdout'), stderr: this.streamArtifact(row, exit, 'stderr') };
    return {
      job_id: row.id,
      state: row.state,
      tool: row.tool,
      subject: row.subject,
      background: row.background === 1,
      agent_id: row.agent,
      sandbox: row.sandbox,
      created_at: row.created_at,
      started_at: row.started_at,
      ended_at: row.ended_at,
      exit_code: exit?.exitCode ?? null,
      signal: exit?.signal ?? null,
      timed_out: exit?.timedOut ?? false,
      duration_ms: exit?.durationMs ?? (row.ended_at && row.started_at ? row.ended_at - row.started_at : null),
      error,
      artifact_handle: row.artifact_handle,
      artifact_state: jobArtifactState(artifacts.stdout.state, artifacts.stderr.state),
      artifacts,
      stdout_bytes: exit?.streams.stdout.bytes ?? this.p.live.relayed(row.id, 'stdout'),
      stderr_bytes: exit?.streams.stderr.bytes ?? this.p.live.relayed(row.id, 'stderr'),
    };
  }

  /**
   * Drops the oldest day of jobs when every one of them ended before `before`, with everything stored
   * for them; returns their ids, or null when no day is due.
   */
  prune(before: number): string[] | null {
    const day = this.p.rows.dayEndedBefore(before);
    if (!day) return null;
    this.p.texts.drop(day.ids);
    this.p.live.forget(day.ids);
    this.p.streams.forget(day.ids);
    this.p.rows.dropDay(day);
    return day.ids;
  }
}

/** The job's artifact from its streams': any upload running → uploading; all stored → complete; some kept → partial. */
function jobArtifactState(...streams: ArtifactState[]): ArtifactState {
  const s = streams.filter((x) => x !== 'none');
  if (s.length === 0) return 'none';
  if (s.includes('uploading')) return 'uploading';
  if (s.every((x) => x === 'complete')) return 'complete';
  if (s.some((x) => x === 'complete' || x === 'partial')) return 'partial';
  return 'failed';
}
