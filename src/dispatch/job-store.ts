/**
 * The team's jobs in the Durable Object's own SQLite storage: one row per job from submit to its
 * terminal state, the job spec and inline results as chunked blobs (a row is capped at 2 MB), the
 * live output tail, and each stream's artifact upload state. Memory holds only copies of what is
 * stored here (to spare repeated reads: see `JobStore`), so a restarted object reads everything back.
 *
 * Exactly-once: a job leaves `queued`/`running` through one conditional UPDATE; whoever changes
 * the row first wins, every later attempt sees zero rows written.
 */
import type { JobExit, JobSpec, SandboxKind, StreamName } from '../contracts/agent-protocol.ts';
import { LIVE_OUTPUT_MAX_BYTES, STORED_CHUNK_CHARS, STORED_OUTPUT_CHUNK_BYTES, splitText } from '../contracts/limits.ts';
import type { ArtifactState, JobState, JobView, StreamArtifact } from '../contracts/jobs.ts';
import { SQLITE_BOUND_PARAMETERS_MAX } from '../platform/limits.ts';
import { migrate, type Migration, type SqlHost } from './host.ts';

export interface NewJob {
  spec: JobSpec;
  tool: string;
  subject: string;
  tokenId: string;
  cancelKey: string;
  runtime?: string;
  sandboxMinimum?: SandboxKind;
  selAgent?: string;
  selLabels?: string[];
  background: boolean;
  maxConcurrent: number;
  deadline: number;
  now: number;
}

export interface JobRow {
  id: string;
  seq: number;
  tool: string;
  subject: string;
  token_id: string;
  cancel_key: string;
  runtime: string | null;
  sandbox_min: SandboxKind | null;
  sel_agent: string | null;
  sel_labels: string | null;
  background: number;
  artifact_handle: string;
  state: JobState;
  agent: string | null;
  agent_subject: string | null;
  sandbox: SandboxKind | null;
  created_at: number;
  deadline: number;
  started_at: number | null;
  ended_at: number | null;
  orphaned_at: number | null;
  timeout_ms: number;
  max_concurrent: number;
  exit: string | null;
  error_code: string | null;
  error_message: string | null;
}

/** The tables of jobs (`jobs`, `job_blobs`, `job_output`, `job_artifacts`): this store's only. */
const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-jobs',
    // IF NOT EXISTS: an object whose tables predate the migration ledger keeps them and their rows.
    sql: [
      `CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, tool TEXT NOT NULL, subject TEXT NOT NULL, token_id TEXT NOT NULL,
    cancel_key TEXT NOT NULL, runtime TEXT, sandbox_min TEXT, sel_agent TEXT, sel_labels TEXT,
    background INTEGER NOT NULL, artifact_handle TEXT NOT NULL, state TEXT NOT NULL, agent TEXT, agent_subject TEXT,
    sandbox TEXT, created_at INTEGER NOT NULL, deadline INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER,
    orphaned_at INTEGER, timeout_ms INTEGER NOT NULL, max_concurrent INTEGER NOT NULL, exit TEXT,
    error_code TEXT, error_message TEXT, audit_id INTEGER, synced INTEGER NOT NULL DEFAULT 0,
    d1_created INTEGER NOT NULL DEFAULT 1)`,
      `CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, seq)`,
      `CREATE INDEX IF NOT EXISTS jobs_seq ON jobs (seq)`,
      `CREATE INDEX IF NOT EXISTS jobs_cancel ON jobs (cancel_key)`,
      // Large texts (spec, inline stdout/stderr, exit parts) split below the row limit.
      `CREATE TABLE IF NOT EXISTS job_blobs (job_id TEXT NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (job_id, kind, seq))`,
      // Live output relayed while the job runs (a BLOB per row; rows written before output went binary hold text), keyed by byte offset.
      `CREATE TABLE IF NOT EXISTS job_output (job_id TEXT NOT NULL, stream TEXT NOT NULL, offset INTEGER NOT NULL, bytes INTEGER NOT NULL,
    data TEXT NOT NULL, PRIMARY KEY (job_id, stream, offset))`,
      `CREATE TABLE IF NOT EXISTS job_artifacts (job_id TEXT NOT NULL, stream TEXT NOT NULL, state TEXT NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (job_id, stream))`,
    ],
  },
  {
    // Tables created before a job's first D1 copy wrote its rows itself: those rows exist already.
    id: '2-jobs-d1-created',
    sql: [`ALTER TABLE jobs ADD COLUMN d1_created INTEGER NOT NULL DEFAULT 1`],
  },
  {
    // The jobs' D1 copy is gone (the index and the audit log live here): its index would be kept up for nothing.
    id: '3-jobs-no-d1-copy',
    sql: [`DROP INDEX IF EXISTS jobs_unsynced`, `DELETE FROM job_blobs WHERE kind = 'audit'`],
  },
];

/**
 * Inline output (stdout + stderr characters) kept in the job row's `exit` JSON itself; above it
 * each stream goes to `job_blobs` in chunks. The default inline cap (40,000 bytes) fits, so most
 * results are one row; 64 Ki characters (≤ 192 KiB of UTF-8) keep the row far below the 2 MB limit.
 */
export const EXIT_ROW_INLINE_CHARS = 64 * 1024;

/** The `exit` column: the job's exit, with its inline output when `outputInline` (else in `job_blobs`; rows written before that flag existed too). */
type StoredExit = JobExit & { outputInline?: true };

type ArtifactRow = { state: 'uploading' | 'complete' | 'failed'; bytes: number };

/** A new job's spec stays in memory until it starts, for at most this many jobs, each at most this long; others are read back. */
const FRESH_TEXTS_MAX = 64;
const FRESH_TEXT_MAX_CHARS = 64 * 1024;

const isOpen = (r: JobRow) => r.state === 'queued' || r.state === 'running';
const bySeq = (a: JobRow, b: JobRow) => a.seq - b.seq;

const enc = new TextEncoder();

/**
 * The job tables, with copies in memory of what one call would otherwise read several times (each
 * read is a statement, billed and timed: submit, placement, exit, the D1 copy and the alarm's
 * wake-up look at the same rows). Only this store writes its tables, and each write keeps the
 * copies right: a write to a job row hands back the row it wrote (RETURNING). A fresh instance
 * starts empty and reads what it needs once; a transaction that throws drops every copy, since
 * its writes were rolled back.
 */
export class JobStore {
  private readonly host: SqlHost;
  /** Job rows by id as last read or written, frozen. */
  private readonly rows = new Map<string, Readonly<JobRow>>();
  /** The queued and running jobs (placement, liveness and wake-ups look at all of them), once read. */
  private open: Map<string, Readonly<JobRow>> | null = null;
  /** Each job's `job_artifacts` rows by stream (a new job has none). */
  private readonly artifacts = new Map<string, Map<StreamName, ArtifactRow>>();
  /** The end of each stream's kept live output (a new job's is 0). */
  private readonly liveEnds = new Map<string, Partial<Record<StreamName, number>>>();
  /** Jobs created by this instance with no exit parts stored: their end has none to delete. */
  private readonly partless = new Set<string>();
  /** New jobs' spec until they start (bounded: FRESH_TEXTS_MAX). */
  private readonly fresh = new Map<string, { spec: string }>();

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'jobs', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  private transaction<T>(f: () => T): T {
    try {
      return this.host.transactionSync(f);
    } catch (e) {
      this.rows.clear();
      this.open = null;
      this.artifacts.clear();
      this.liveEnds.clear();
      this.partless.clear();
      this.fresh.clear();
      throw e;
    }
  }

  /** Keeps a job row storage returned (read or just written) in every copy it belongs to. */
  private keep(row: JobRow): Readonly<JobRow> {
    const r = Object.freeze(row);
    this.rows.set(r.id, r);
    if (isOpen(r)) this.open?.set(r.id, r);
    else this.open?.delete(r.id);
    return r;
  }

  /** A write to job rows; returns the rows it wrote, as they are now. */
  private writeJobs(statement: string, ...params: SqlStorageValue[]): Readonly<JobRow>[] {
    return this.sql
      .exec<JobRow & Record<string, SqlStorageValue>>(`${statement} RETURNING *`, ...params)
      .toArray()
      .map((r) => this.keep(r));
  }

  /** The job is gone from storage: so are its copies. */
  private forget(id: string): void {
    this.rows.delete(id);
    this.open?.delete(id);
    this.artifacts.delete(id);
    this.liveEnds.delete(id);
    this.partless.delete(id);
    this.fresh.delete(id);
  }

  /** Records a new job, queued; null when a job with its id exists already (its submit sent again). */
  create(j: NewJob): Readonly<JobRow> | null {
    const id = j.spec.jobId;
    return this.transaction(() => {
      const [row] = this.writeJobs(
        `INSERT INTO jobs (id, seq, tool, subject, token_id, cancel_key, runtime, sandbox_min, sel_agent, sel_labels, background,
          artifact_handle, state, created_at, deadline, timeout_ms, max_concurrent)
         VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)
         ON CONFLICT (id) DO NOTHING`,
        id,
        j.tool,
        j.subject,
        j.tokenId,
        j.cancelKey,
        j.runtime ?? null,
        j.sandboxMinimum ?? null,
        j.selAgent ?? null,
        j.selLabels?.length ? JSON.stringify(j.selLabels) : null,
        j.background ? 1 : 0,
        j.spec.artifactHandle,
        j.now,
        j.deadline,
        j.spec.timeoutMs,
        j.maxConcurrent,
      );
      if (!row) return null;
      const texts = { spec: JSON.stringify(j.spec) };
      this.insertTexts(id, Object.entries(texts));
      // Nothing else is stored for a new job yet.
      this.artifacts.set(id, new Map());
      this.liveEnds.set(id, { stdout: 0, stderr: 0 });
      this.partless.add(id);
      if (this.fresh.size < FRESH_TEXTS_MAX && texts.spec.length <= FRESH_TEXT_MAX_CHARS) this.fresh.set(id, texts);
      return row;
    });
  }

  get(id: string): Readonly<JobRow> | null {
    const hit = this.rows.get(id);
    if (hit) return hit;
    const row = this.sql.exec<JobRow & Record<string, SqlStorageValue>>(`SELECT * FROM jobs WHERE id = ?`, id).toArray()[0];
    return row ? this.keep(row) : null;
  }

  spec(id: string): JobSpec | null {
    const t = this.fresh.get(id)?.spec ?? this.getText(id, 'spec');
    return t === null ? null : (JSON.parse(t) as JobSpec);
  }

  /** Oldest first. */
  queued(): Readonly<JobRow>[] {
    return this.openJobs('queued');
  }

  /** Oldest first. */
  running(): Readonly<JobRow>[] {
    return this.openJobs('running');
  }

  private openJobs(state: 'queued' | 'running'): Readonly<JobRow>[] {
    if (!this.open) {
      this.open = new Map();
      for (const r of this.sql.exec<JobRow & Record<string, SqlStorageValue>>(`SELECT * FROM jobs WHERE state IN ('queued', 'running')`).toArray()) {
        this.keep(r);
      }
    }
    return [...this.open.values()].filter((r) => r.state === state).sort(bySeq);
  }

  byCancelKey(key: string): JobRow | null {
    return (
      this.sql
        .exec<JobRow & Record<string, SqlStorageValue>>(
          `SELECT * FROM jobs WHERE cancel_key = ? AND state IN ('queued', 'running') ORDER BY seq DESC LIMIT 1`,
          key,
        )
        .toArray()[0] ?? null
    );
  }

  /** queued → running on `agent`. False when the job is no longer queued. */
  assign(id: string, agent: { id: string; subject: string; sandbox: SandboxKind }, now: number): boolean {
    return (
      this.writeJobs(
        `UPDATE jobs SET state = 'running', agent = ?, agent_subject = ?, sandbox = ?, started_at = ?, orphaned_at = NULL
       WHERE id = ? AND state = 'queued'`,
        agent.id,
        agent.subject,
        agent.sandbox,
        now,
        id,
      ).length > 0
    );
  }

  /** running → queued (the agent refused it for capacity, or never received it). */
  requeue(id: string): boolean {
    return (
      this.writeJobs(
        `UPDATE jobs SET state = 'queued', agent = NULL, agent_subject = NULL, sandbox = NULL, started_at = NULL, orphaned_at = NULL
       WHERE id = ? AND state = 'running'`,
        id,
      ).length > 0
    );
  }

  setOrphaned(ids: string[], now: number): void {
    for (const id of ids) this.writeJobs(`UPDATE jobs SET orphaned_at = ? WHERE id = ? AND state = 'running' AND orphaned_at IS NULL`, now, id);
  }

  clearOrphaned(ids: string[]): void {
    for (const id of ids) this.writeJobs(`UPDATE jobs SET orphaned_at = NULL WHERE id = ? AND state = 'running'`, id);
  }

  /**
   * Moves an open job to its terminal state, once. With an `exit`, the inline output is stored
   * in chunks and the rest of the exit as JSON. Returns false when the job was already closed.
   */
  finish(id: string, state: JobState, now: number, o: { exit?: JobExit; error?: { code: string; message: string }; fromAgent?: string } = {}): boolean {
    return this.transaction(() => {
      const { exit } = o;
      // Output up to EXIT_ROW_INLINE_CHARS stays in the row (no blob rows to write, delete and read back).
      const inline = exit !== undefined && exit.stdout.length + exit.stderr.length <= EXIT_ROW_INLINE_CHARS;
      const stored = exit ? JSON.stringify(inline ? { ...exit, outputInline: true } : { ...exit, stdout: '', stderr: '' }) : null;
      const agentCheck = o.fromAgent !== undefined ? ` AND state = 'running' AND agent = ?` : ` AND state IN ('queued', 'running')`;
      const params: SqlStorageValue[] = [state, now, stored, o.error?.code ?? exit?.error?.code ?? null, o.error?.message ?? exit?.error?.message ?? null, id];
      if (o.fromAgent !== undefined) params.push(o.fromAgent);
      const written = this.writeJobs(
        `UPDATE jobs SET state = ?, ended_at = ?, exit = ?, error_code = ?, error_message = ?, orphaned_at = NULL WHERE id = ?${agentCheck}`,
        ...params,
      );
      if (written.length === 0) return false;
      this.fresh.delete(id);
      if (exit && !inline) {
        this.putText(id, 'stdout', exit.stdout);
        this.putText(id, 'stderr', exit.stderr);
      }
      // Uploads the agent still runs (it said so in the exit) stay open; any other unfinished one never will finish.
      const pending = exit?.pendingArtifacts ?? [];
      const arts = this.artifactsOf(id);
      for (const stream of pending) {
        if (!arts.has(stream))
          this.writeArtifacts(id, `INSERT OR IGNORE INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'uploading', 0)`, id, stream);
      }
      if ([...arts].some(([stream, a]) => a.state === 'uploading' && !pending.includes(stream))) {
        this.writeArtifacts(
          id,
          `UPDATE job_artifacts SET state = 'failed' WHERE job_id = ? AND state = 'uploading' AND stream NOT IN (${pending.map(() => '?').join(', ') || `''`})`,
          id,
          ...pending,
        );
      }
      this.dropStoredLive(id);
      if (!this.partless.has(id)) this.sql.exec(`DELETE FROM job_blobs WHERE job_id = ? AND kind LIKE 'part:%'`, id);
      return true;
    });
  }

  /** The full exit of a finished job (inline output reassembled), or null. */
  result(id: string): JobExit | null {
    const row = this.get(id);
    if (!row?.exit) return null;
    const { outputInline, ...exit } = JSON.parse(row.exit) as StoredExit;
    // Uploads that followed the exit: once all are stored, the result says so.
    const pending = exit.pendingArtifacts ?? [];
    const uploaded = exit.artifactsUploaded || (pending.length > 0 && pending.every((s) => this.artifactRow(id, s)?.state === 'complete'));
    if (outputInline) return { ...exit, artifactsUploaded: uploaded };
    return { ...exit, artifactsUploaded: uploaded, stdout: this.getText(id, 'stdout') ?? '', stderr: this.getText(id, 'stderr') ?? '' };
  }

  // ---- exit parts: inline output too large for one agent message arrives first in parts ----

  putPart(id: string, stream: StreamName, seq: number, data: string): void {
    this.partless.delete(id);
    this.sql.exec(`INSERT OR REPLACE INTO job_blobs (job_id, kind, seq, data) VALUES (?, ?, ?, ?)`, id, `part:${stream}`, seq, data);
  }

  partsText(id: string, stream: StreamName, count: number): string | null {
    const rows = this.sql
      .exec<{ seq: number; data: string }>(`SELECT seq, data FROM job_blobs WHERE job_id = ? AND kind = ? ORDER BY seq`, id, `part:${stream}`)
      .toArray();
    if (rows.length !== count || rows.some((r, i) => r.seq !== i)) return null;
    return rows.map((r) => r.data).join('');
  }

  // ---- live output ----

  /**
   * Keeps relayed output by byte offset, up to LIVE_OUTPUT_MAX_BYTES per stream, as one
   * contiguous prefix: bytes already kept are skipped (a frame sent again), and a frame that starts
   * past the end (one went missing on a dropped socket) is ignored, so every kept byte sits at its
   * true offset. Stored as BLOB rows below the SQLite row limit. Returns the bytes kept.
   */
  appendOutput(id: string, stream: StreamName, offset: number, data: Uint8Array): number {
    let end = this.relayed(id, stream);
    if (offset > end) return 0;
    const fresh = data.subarray(Math.min(data.byteLength, end - offset));
    const b = fresh.subarray(0, Math.max(0, LIVE_OUTPUT_MAX_BYTES - end));
    for (let i = 0; i < b.byteLength; i += STORED_OUTPUT_CHUNK_BYTES) {
      const piece = b.subarray(i, i + STORED_OUTPUT_CHUNK_BYTES);
      // A copy of exactly these bytes: a view would hand SQLite the whole frame's buffer.
      this.sql.exec(`INSERT INTO job_output (job_id, stream, offset, bytes, data) VALUES (?, ?, ?, ?, ?)`, id, stream, end, piece.byteLength, piece.slice());
      end += piece.byteLength;
    }
    this.liveEnds.set(id, { ...this.liveEnds.get(id), [stream]: end });
    return b.byteLength;
  }

  /** Live output of streams whose artifact is stored is not needed any more (R2 serves them). */
  private dropStoredLive(id: string): void {
    const arts = this.artifacts.get(id);
    if (arts && ![...arts.values()].some((a) => a.state === 'complete')) return;
    this.sql.exec(`DELETE FROM job_output WHERE job_id = ? AND stream IN (SELECT stream FROM job_artifacts WHERE job_id = ? AND state = 'complete')`, id, id);
    if (!arts) this.liveEnds.delete(id);
    else for (const [stream, a] of arts) if (a.state === 'complete') this.liveEnds.set(id, { ...this.liveEnds.get(id), [stream]: 0 });
  }

  /** Bytes [offset, offset+max) of the relayed output, and the total relayed so far. */
  readOutput(id: string, stream: StreamName, offset: number, max: number): { data: Uint8Array; total: number } {
    const rows = this.sql
      .exec<{ offset: number; bytes: number; data: SqlStorageValue }>(
        `SELECT offset, bytes, data FROM job_output WHERE job_id = ? AND stream = ? AND offset + bytes > ? AND offset < ? ORDER BY offset`,
        id,
        stream,
        offset,
        offset + max,
      )
      .toArray();
    const total = this.sql
      .exec<{ n: number }>(`SELECT COALESCE(MAX(offset + bytes), 0) AS n FROM job_output WHERE job_id = ? AND stream = ?`, id, stream)
      .one().n;
    const parts: Uint8Array[] = [];
    let size = 0;
    for (const r of rows) {
      const b = storedBytes(r.data);
      const from = Math.max(0, offset - r.offset);
      const to = Math.min(b.byteLength, offset + max - r.offset);
      const piece = b.subarray(from, to);
      parts.push(piece);
      size += piece.byteLength;
    }
    const data = new Uint8Array(size);
    let o = 0;
    for (const p of parts) {
      data.set(p, o);
      o += p.byteLength;
    }
    return { data, total };
  }

  // ---- artifacts ----

  artifactRow(id: string, stream: StreamName): Readonly<ArtifactRow> | null {
    return this.artifactsOf(id).get(stream) ?? null;
  }

  private artifactsOf(id: string): ReadonlyMap<StreamName, Readonly<ArtifactRow>> {
    let arts = this.artifacts.get(id);
    if (!arts) {
      const rows = this.sql.exec<ArtifactRow & { stream: StreamName }>(`SELECT stream, state, bytes FROM job_artifacts WHERE job_id = ?`, id).toArray();
      arts = new Map(rows.map((r) => [r.stream, { state: r.state, bytes: r.bytes }]));
      this.artifacts.set(id, arts);
    }
    return arts;
  }

  /** A write to job `id`'s artifact rows; the rows it wrote, as they are now, replace their copies. */
  private writeArtifacts(id: string, statement: string, ...params: SqlStorageValue[]): void {
    const rows = this.sql.exec<ArtifactRow & { stream: StreamName }>(`${statement} RETURNING stream, state, bytes`, ...params).toArray();
    const arts = this.artifacts.get(id);
    for (const r of rows) arts?.set(r.stream, { state: r.state, bytes: r.bytes });
  }

  /** An upload may begin unless this stream's artifact is already complete or given up (written once). */
  beginUpload(id: string, stream: StreamName): boolean {
    const cur = this.artifactRow(id, stream);
    if (cur && cur.state !== 'uploading') return false;
    if (!cur) this.writeArtifacts(id, `INSERT INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'uploading', 0)`, id, stream);
    return true;
  }

  /** The edge stored the body (R2 + index): the stream is complete. A failed attempt changes nothing (the agent retries, then reports). */
  endUpload(id: string, stream: StreamName, bytes: number): void {
    this.writeArtifacts(
      id,
      `UPDATE job_artifacts SET state = 'complete', bytes = ? WHERE job_id = ? AND stream = ? AND state = 'uploading'`,
      bytes,
      id,
      stream,
    );
    if (this.get(id)?.ended_at != null) this.dropStoredLive(id);
  }

  /**
   * The agent's last word on one stream's upload, applied once. Only a body the edge itself
   * stored counts as complete: an upload the agent calls complete that the edge never saw failed.
   */
  reportArtifact(id: string, stream: StreamName): boolean {
    const cur = this.artifactRow(id, stream);
    if (cur && cur.state !== 'uploading') return false;
    this.writeArtifacts(id, `INSERT OR REPLACE INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'failed', 0)`, id, stream);
    return true;
  }

  /** Ended jobs with an upload still running (their agent owes a report). */
  uploading(): JobRow[] {
    return this.sql
      .exec<JobRow & Record<string, SqlStorageValue>>(
        `SELECT * FROM jobs WHERE ended_at IS NOT NULL AND id IN (SELECT job_id FROM job_artifacts WHERE state = 'uploading') ORDER BY seq`,
      )
      .toArray();
  }

  hasUploading(id: string): boolean {
    return [...this.artifactsOf(id).values()].some((a) => a.state === 'uploading');
  }

  /** Marks (or clears) when an uploading job's agent went away; reuses the job's orphan mark, unused once it ended. */
  markUploadOrphaned(id: string, at: number | null): void {
    this.writeJobs(`UPDATE jobs SET orphaned_at = ? WHERE id = ? AND ended_at IS NOT NULL`, at, id);
  }

  /** The agent of an ended job is gone for good: its open uploads will never report. */
  failUploads(id: string): void {
    this.writeArtifacts(id, `UPDATE job_artifacts SET state = 'failed' WHERE job_id = ? AND state = 'uploading'`, id);
    this.markUploadOrphaned(id, null);
  }

  /**
   * One stream's artifact as clients see it: stored whole, uploading, or — when it never arrived
   * (failed upload, lost agent) — `partial` with the live bytes the edge kept, else `failed`.
   */
  streamArtifact(row: JobRow, exit: JobExit | null, stream: StreamName): StreamArtifact {
    // Read only where needed: an ended job whose stream was empty (most short jobs) costs no query.
    const live = () => this.relayed(row.id, stream);
    if (row.ended_at === null) return { state: 'none', bytes: live() };
    if (exit && exit.streams[stream].bytes === 0) return { state: 'none', bytes: 0 };
    const a = this.artifactRow(row.id, stream);
    if (a?.state === 'complete') return { state: 'complete', bytes: a.bytes };
    if (a?.state === 'uploading') return { state: 'uploading', bytes: live() };
    // An agent that uploaded before reporting its exit (no row: nothing was needed) said how it went.
    if (!a && exit?.artifactsUploaded) return { state: 'complete', bytes: exit.streams[stream].bytes };
    const kept = live();
    if (kept > 0) return { state: 'partial', bytes: kept };
    return { state: exit ? 'failed' : 'none', bytes: 0 };
  }

  // ---- views ----

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
      stdout_bytes: exit?.streams.stdout.bytes ?? this.relayed(row.id, 'stdout'),
      stderr_bytes: exit?.streams.stderr.bytes ?? this.relayed(row.id, 'stderr'),
    };
  }

  relayed(id: string, stream: StreamName): number {
    const known = this.liveEnds.get(id)?.[stream];
    if (known !== undefined) return known;
    const n = this.sql.exec<{ n: number }>(`SELECT COALESCE(MAX(offset + bytes), 0) AS n FROM job_output WHERE job_id = ? AND stream = ?`, id, stream).one().n;
    this.liveEnds.set(id, { ...this.liveEnds.get(id), [stream]: n });
    return n;
  }

  /** Newest first; the cursor is the last row's `seq`. */
  list(f: { state?: JobState; subject?: string; tool?: string; cursor?: number; limit: number }): { rows: JobRow[]; next: number | null } {
    const where: string[] = [];
    const params: SqlStorageValue[] = [];
    if (f.state) where.push('state = ?'), params.push(f.state);
    if (f.subject) where.push('subject = ?'), params.push(f.subject);
    if (f.tool) where.push('tool = ?'), params.push(f.tool);
    if (f.cursor !== undefined) where.push('seq < ?'), params.push(f.cursor);
    const rows = this.sql
      .exec<JobRow & Record<string, SqlStorageValue>>(
        `SELECT * FROM jobs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`,
        ...params,
        f.limit + 1,
      )
      .toArray();
    const more = rows.length > f.limit;
    const page = rows.slice(0, f.limit);
    return { rows: page, next: more ? page[page.length - 1].seq : null };
  }

  /** Jobs created since `since`, counted by state. */
  countByState(since: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const r of this.sql
      .exec<{ state: string; n: number }>(`SELECT state, COUNT(*) AS n FROM jobs WHERE created_at >= ? GROUP BY state`, since)
      .toArray()) {
      out[r.state] = r.n;
    }
    return out;
  }

  /**
   * Jobs created in [from, to) but those a quota refused, and the milliseconds run by jobs that ended in
   * [from, to): the team's usage, and the seed of its jobs-per-day count (quotas.ts).
   */
  usageBetween(from: number, to: number): { jobs: number; jobMs: number } {
    const r = this.sql
      .exec<{ jobs: number; job_ms: number }>(
        `SELECT (SELECT COUNT(*) FROM jobs WHERE created_at >= ? AND created_at < ? AND COALESCE(error_code, '') <> 'quota_exceeded') AS jobs,
           (SELECT COALESCE(SUM(ended_at - started_at), 0) FROM jobs WHERE ended_at >= ? AND ended_at < ? AND started_at IS NOT NULL) AS job_ms`,
        from,
        to,
        from,
        to,
      )
      .one();
    return { jobs: r.jobs, jobMs: r.job_ms };
  }

  /** The newest failed jobs created since `since`: a terminal state other than a clean exit, or an exit with a non-zero code. */
  failed(since: number, limit: number): Readonly<JobRow>[] {
    return this.sql
      .exec<JobRow & Record<string, SqlStorageValue>>(
        `SELECT * FROM jobs WHERE created_at >= ? AND (state IN ('signaled', 'timed_out', 'lost', 'failed_to_start', 'refused')
           OR (state = 'exited' AND COALESCE(json_extract(exit, '$.exitCode'), 0) <> 0)) ORDER BY seq DESC LIMIT ?`,
        since,
        limit,
      )
      .toArray();
  }

  /** When the job that ended first of those kept ended, or null with none ended. */
  oldestEndedAt(): number | null {
    return this.sql.exec<{ at: number | null }>(`SELECT MIN(ended_at) AS at FROM jobs WHERE ended_at IS NOT NULL`).one().at;
  }

  /** Drops finished jobs older than `before` with everything stored for them; returns their ids. */
  prune(before: number): string[] {
    const ids = this.sql
      .exec<{ id: string }>(`SELECT id FROM jobs WHERE ended_at IS NOT NULL AND ended_at < ? LIMIT 200`, before)
      .toArray()
      .map((r) => r.id);
    for (const id of ids) {
      this.forget(id);
      this.sql.exec(`DELETE FROM job_blobs WHERE job_id = ?`, id);
      this.sql.exec(`DELETE FROM job_output WHERE job_id = ?`, id);
      this.sql.exec(`DELETE FROM job_artifacts WHERE job_id = ?`, id);
      this.sql.exec(`DELETE FROM jobs WHERE id = ?`, id);
    }
    return ids;
  }

  // ---- chunked text ----

  private putText(id: string, kind: string, text: string): void {
    this.sql.exec(`DELETE FROM job_blobs WHERE job_id = ? AND kind = ?`, id, kind);
    this.insertTexts(id, [[kind, text]]);
  }

  /**
   * Stores texts under kinds the job has no blobs of yet (a new job: no DELETE first), in as few
   * statements as the limits allow: chunks together up to one row's worth of text, within the
   * bound-parameter limit (a new job's spec is usually one statement).
   */
  private insertTexts(id: string, texts: [kind: string, text: string][]): void {
    const rows = texts.flatMap(([kind, text]) => splitText(text, STORED_CHUNK_CHARS).map((data, seq) => [id, kind, seq, data] as const));
    const maxRows = Math.floor(SQLITE_BOUND_PARAMETERS_MAX / 4);
    let batch: (typeof rows)[number][] = [];
    let chars = 0;
    const flush = () => {
      if (batch.length) this.sql.exec(`INSERT INTO job_blobs (job_id, kind, seq, data) VALUES ${batch.map(() => '(?, ?, ?, ?)').join(', ')}`, ...batch.flat());
      batch = [];
      chars = 0;
    };
    for (const row of rows) {
      if (batch.length === maxRows || chars + row[3].length > STORED_CHUNK_CHARS) flush();
      batch.push(row);
      chars += row[3].length;
    }
    flush();
  }

  private getText(id: string, kind: string): string | null {
    return this.getTexts(id, [kind]).get(kind) ?? null;
  }

  /** Several kinds of a job's chunked text in one statement; a kind with no blobs is absent. */
  private getTexts(id: string, kinds: string[]): Map<string, string> {
    const rows = this.sql
      .exec<{ kind: string; data: string }>(
        `SELECT kind, data FROM job_blobs WHERE job_id = ? AND kind IN (${kinds.map(() => '?').join(', ')}) ORDER BY kind, seq`,
        id,
        ...kinds,
      )
      .toArray();
    const out = new Map<string, string>();
    for (const r of rows) out.set(r.kind, (out.get(r.kind) ?? '') + r.data);
    return out;
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

/** A live output row's bytes: a BLOB (ArrayBuffer in workerd, Uint8Array elsewhere), or UTF-8 text in rows stored before output went binary. */
function storedBytes(v: SqlStorageValue | Uint8Array): Uint8Array {
  if (typeof v === 'string') return enc.encode(v);
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  return new Uint8Array(0);
}
