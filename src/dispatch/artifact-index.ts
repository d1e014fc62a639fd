/**
 * The team's artifact index: one row per stored stream of a job's output (or of a script's), with
 * where its body is — in R2 (a large body), in this object's SQLite (a small one, in chunks below
 * the row limit), or in the job's own exit when that already holds every byte of it (stored once,
 * not twice) — and when it expires. Every read of an artifact (query_output, MCP resources, the
 * admin API, job_output) asks the team's object, so another team's handle is simply not here.
 *
 * Retention is this capability's timed work: `nextWake` is the soonest expiry, and `onAlarm`
 * deletes expired rows, their chunks and — in batches R2 takes in one call — their R2 bodies and
 * search indexes. The bucket's lifecycle rule (docs/deploy.md, "Artifacts") is the backstop.
 */
import type { StreamName } from '../contracts/agent-protocol.ts';
import { JOB_RETENTION_MS } from '../contracts/job-view.ts';
import { exitHoldsStream } from '../contracts/inline-result.ts';
import { ARTIFACT_DEFAULT_HOURS } from '../contracts/policy.ts';
import { SQLITE_BOUND_PARAMETERS_MAX, SQLITE_ROW_MAX_BYTES } from '../platform/limits.ts';
import { jobIdOfHandle, searchIndexKey } from '../store/artifacts.ts';
import type { DispatchHost, Migration, Wakes } from './capability-host.ts';
import { migrate } from './capability-host.ts';
import type { JobRecords } from './job-records.ts';
import type { JobRows } from './job-rows.ts';

/** Where a stream's body is kept. */
export type BodyPlace = 'r2' | 'do' | 'exit';

/** One stream of an artifact as the index records it (what every reader gets). */
export interface ArtifactRow {
  handle: string;
  jobId: string;
  stream: StreamName;
  place: BodyPlace;
  /** The R2 key of the body (place `r2`), else null. */
  r2Key: string | null;
  bytes: number;
  lines: number;
  truncated: boolean;
  createdAt: number;
  expiresAt: number;
}

/** What the edge records for a stream it stored (an R2 key) or hands over whole (a small body). */
export interface StoredArtifact {
  handle: string;
  jobId: string;
  stream: StreamName;
  /** Set when the body is in R2; null: the body comes with the call and stays in the object. */
  r2Key: string | null;
  bytes: number;
  lines: number;
  truncated: boolean;
  retentionHours: number;
}

// ---- storage (where a body goes: body-place.ts) ----

/** Bytes of one chunk row: far below the 2 MB row limit (a small body is one chunk). */
const CHUNK_BYTES = Math.min(1024 * 1024, SQLITE_ROW_MAX_BYTES / 2);
/**
 * Keys one R2 `delete` takes: "up to 1000 keys" (Workers R2 API, `delete`:
 * https://developers.cloudflare.com/r2/api/workers/workers-api-reference/#bucket-method-definitions).
 * Each expired R2 row has two (its body and its search index).
 */
const R2_DELETE_MAX_KEYS = 1000;
const SWEEP_BATCH_ROWS = R2_DELETE_MAX_KEYS / 2;
/** Batches one alarm sweeps at most (one R2 call each); more expired rows wake the alarm again at once. */
const SWEEP_MAX_BATCHES = 10;
/**
 * How long after the soonest expiry the sweep runs: a busy team's artifacts expire one after another, and
 * one alarm a quarter hour sweeps them all where an alarm per expiry would wake the object per call.
 * Readers never see an expired artifact meanwhile (every read checks `expires_at`).
 */
export const SWEEP_DELAY_MS = 15 * 60_000;
/** When R2 refused a delete, the rows stay and the sweep is tried again this much later. */
const SWEEP_RETRY_MS = 60_000;
const HOUR_MS = 3_600_000;

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-artifacts',
    sql: [
      `CREATE TABLE IF NOT EXISTS artifacts (handle TEXT NOT NULL, stream TEXT NOT NULL, job_id TEXT NOT NULL, place TEXT NOT NULL, r2_key TEXT,
    bytes INTEGER NOT NULL, lines INTEGER NOT NULL, truncated INTEGER NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    PRIMARY KEY (handle, stream))`,
      `CREATE INDEX IF NOT EXISTS artifacts_expiry ON artifacts (expires_at)`,
      `CREATE INDEX IF NOT EXISTS artifacts_created ON artifacts (created_at)`,
      `CREATE TABLE IF NOT EXISTS artifact_chunks (handle TEXT NOT NULL, stream TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (handle, stream, seq))`,
    ],
  },
  {
    // Rows are billed per row and per index entry written: keyed by (handle, stream) itself (WITHOUT ROWID) with no
    // index on the times, an artifact writes one row where it wrote four. The sweep and the newest-first list scan
    // the artifacts kept (one alarm's or an admin's read, not a call's); the soonest expiry is kept in memory.
    id: '2-artifacts-keyed',
    sql: [
      `CREATE TABLE artifacts_keyed (handle TEXT NOT NULL, stream TEXT NOT NULL, job_id TEXT NOT NULL, place TEXT NOT NULL, r2_key TEXT,
    bytes INTEGER NOT NULL, lines INTEGER NOT NULL, truncated INTEGER NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    PRIMARY KEY (handle, stream)) WITHOUT ROWID`,
      `INSERT INTO artifacts_keyed SELECT handle, stream, job_id, place, r2_key, bytes, lines, truncated, created_at, expires_at FROM artifacts`,
      `DROP TABLE artifacts`,
      `ALTER TABLE artifacts_keyed RENAME TO artifacts`,
    ],
  },
];

interface DbRow {
  handle: string;
  stream: string;
  job_id: string;
  place: string;
  r2_key: string | null;
  bytes: number;
  lines: number;
  truncated: number;
  created_at: number;
  expires_at: number;
}

const COLUMNS = 'handle, stream, job_id, place, r2_key, bytes, lines, truncated, created_at, expires_at';

function fromDb(r: DbRow): ArtifactRow {
  return {
    handle: r.handle,
    jobId: r.job_id,
    stream: r.stream as StreamName,
    place: r.place as BodyPlace,
    r2Key: r.r2_key,
    bytes: r.bytes,
    lines: r.lines,
    truncated: r.truncated !== 0,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
  };
}

/** What the index needs of the jobs: a job's row and its exit (whose inline output may be a body already), the newest jobs. */
export type ExitSource = Pick<JobRows, 'get' | 'list'> & Pick<JobRecords, 'result'>;

const enc = new TextEncoder();

export class ArtifactIndex implements Wakes {
  private readonly host: Pick<DispatchHost, 'sql' | 'transactionSync' | 'env' | 'now'>;
  private readonly jobs: ExitSource;
  /** The soonest expiry (null: none), read once per instance and kept right by every write; undefined until read. */
  private soonest: number | null | undefined;
  private retryAt = 0;

  /** The team's hours for a job that has none of its own (submitted before jobs carried them). */
  private readonly teamHours: () => number;

  constructor(host: Pick<DispatchHost, 'sql' | 'transactionSync' | 'env' | 'now'>, jobs: ExitSource, teamHours: () => number = () => ARTIFACT_DEFAULT_HOURS) {
    this.host = host;
    this.jobs = jobs;
    this.teamHours = teamHours;
    migrate(host, 'artifacts', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /**
   * Records a stored stream (replacing an earlier record of it: an upload retried). A body handed
   * over (no R2 key) is kept in chunks — unless the job's exit holds exactly these bytes and outlives
   * the artifact, then the row points at the exit. Returns where the body is.
   */
  store(a: StoredArtifact, body: Uint8Array | null): BodyPlace {
    const now = this.host.now();
    const expiresAt = now + Math.round(a.retentionHours * HOUR_MS);
    const place: BodyPlace = a.r2Key !== null ? 'r2' : body !== null && this.exitHolds(a, body, expiresAt) ? 'exit' : 'do';
    const bytes = a.r2Key !== null ? a.bytes : (body?.byteLength ?? 0);
    this.host.transactionSync(() => {
      this.sql.exec(`DELETE FROM artifact_chunks WHERE handle = ? AND stream = ?`, a.handle, a.stream);
      this.sql.exec(
        `INSERT OR REPLACE INTO artifacts (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        a.handle,
        a.stream,
        a.jobId,
        place,
        a.r2Key,
        bytes,
        Math.max(0, Math.floor(a.lines)),
        a.truncated ? 1 : 0,
        now,
        expiresAt,
      );
      if (place === 'do' && body) this.putChunks(a.handle, a.stream, body);
    });
    if (this.soonest !== undefined) this.soonest = this.soonest === null ? expiresAt : Math.min(this.soonest, expiresAt);
    return place;
  }

  /**
   * Records the streams a job's exit holds whole (agent protocol v4 uploads none of them): each
   * stream's artifact is the exit's text. A job whose handle was made from its id (`newArtifactHandle`)
   * and whose output is kept no longer than its row needs no row here at all: the handle leads to the
   * job (`exitRows`). Otherwise a row points at the exit, as an upload of the same bytes would have.
   */
  storeFromExit(jobId: string, teamHours: number): void {
    const job = this.jobs.get(jobId);
    const exit = job ? this.jobs.result(jobId) : null;
    if (!job || !exit) return;
    const hours = job.artifact_hours ?? teamHours;
    if (jobIdOfHandle(job.artifact_handle) === jobId && hours * HOUR_MS <= JOB_RETENTION_MS) return;
    for (const stream of ['stdout', 'stderr'] as const) {
      if (!exitHoldsStream(exit, stream)) continue;
      const s = exit.streams[stream];
      this.store(
        { handle: job.artifact_handle, jobId, stream, r2Key: null, bytes: s.bytes, lines: s.lines, truncated: false, retentionHours: hours },
        enc.encode(exit[stream]),
      );
    }
  }

  /** The streams a job's exit holds for a handle made from its id, unexpired (no row: `storeFromExit`). */
  private exitRows(handle: string, now: number, jobId = jobIdOfHandle(handle)): ArtifactRow[] {
    const job = jobId ? this.jobs.get(jobId) : null;
    if (!job || job.artifact_handle !== handle || job.ended_at === null) return [];
    const exit = this.jobs.result(job.id);
    const expiresAt = job.ended_at + Math.round((job.artifact_hours ?? this.teamHours()) * HOUR_MS);
    if (!exit || expiresAt <= now || expiresAt > job.ended_at + JOB_RETENTION_MS) return [];
    return (['stdout', 'stderr'] as const)
      .filter((stream) => exitHoldsStream(exit, stream))
      .map((stream) => ({
        handle,
        jobId: job.id,
        stream,
        place: 'exit' as const,
        r2Key: null,
        bytes: exit.streams[stream].bytes,
        lines: exit.streams[stream].lines,
        truncated: false,
        createdAt: job.ended_at ?? now,
        expiresAt,
      }));
  }

  /** The handle's unexpired streams, stdout first; [] when the team has no such artifact. */
  rows(handle: string, now: number = this.host.now()): ArtifactRow[] {
    const kept = this.sql
      .exec<DbRow & Record<string, SqlStorageValue>>(
        `SELECT ${COLUMNS} FROM artifacts WHERE handle = ? AND expires_at > ? ORDER BY CASE stream WHEN 'stdout' THEN 0 ELSE 1 END`,
        handle,
        now,
      )
      .toArray()
      .map(fromDb);
    return kept.length ? kept : this.exitRows(handle, now);
  }

  /** The team's newest unexpired streams, newest first. */
  recent(limit: number, now: number = this.host.now()): ArtifactRow[] {
    const n = Math.max(0, Math.floor(limit));
    const kept = this.sql
      .exec<DbRow & Record<string, SqlStorageValue>>(`SELECT ${COLUMNS} FROM artifacts WHERE expires_at > ? ORDER BY created_at DESC LIMIT ?`, now, n)
      .toArray()
      .map(fromDb);
    // The newest jobs' outputs kept in their exits (no row here), merged in by time.
    const inExits = n ? this.jobs.list({ limit: n }).rows.flatMap((j) => this.exitRows(j.artifact_handle, now, j.id)) : [];
    return [...kept, ...inExits].sort((a, b) => b.createdAt - a.createdAt).slice(0, n);
  }

  /**
   * Bytes [offset, offset+length) of a body kept in the object (place `do` or `exit`), or null when
   * there is none: unknown or expired, in R2 (the edge reads those itself), or its job's exit is gone.
   */
  read(handle: string, stream: StreamName, offset = 0, length = Number.MAX_SAFE_INTEGER, now: number = this.host.now()): Uint8Array | null {
    const row = this.rows(handle, now).find((r) => r.stream === stream);
    if (!row || row.place === 'r2') return null;
    const whole = row.place === 'exit' ? this.exitBytes(row.jobId, stream) : this.chunks(handle, stream);
    if (!whole) return null;
    const from = Math.max(0, Math.min(Math.floor(offset), whole.byteLength));
    return whole.slice(from, Math.min(whole.byteLength, from + Math.max(0, Math.floor(length))));
  }

  nextWake(_now: number): number | null {
    if (this.soonest === undefined) {
      const r = this.sql.exec<{ at: number | null }>(`SELECT MIN(expires_at) AS at FROM artifacts`).toArray()[0];
      this.soonest = r?.at ?? null;
    }
    if (this.soonest === null) return null;
    // Past due wakes the alarm at once (the platform runs an alarm set in the past now), unless R2 just failed.
    return Math.max(this.soonest + SWEEP_DELAY_MS, this.retryAt);
  }

  /**
   * Deletes expired artifacts: R2 bodies (and search indexes) first, in calls of up to 1,000 keys,
   * then their rows and chunks. When R2 fails the rows stay (deleting a missing key is a no-op), so
   * a body is never left without the row that expires it; the sweep is tried again later.
   */
  async onAlarm(now: number): Promise<{ deleted: number }> {
    let deleted = 0;
    try {
      for (let batch = 0; batch < SWEEP_MAX_BATCHES; batch++) {
        const rows = this.sql
          .exec<{ handle: string; stream: string; place: string; r2_key: string | null }>(
            `SELECT handle, stream, place, r2_key FROM artifacts WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`,
            now,
            SWEEP_BATCH_ROWS,
          )
          .toArray();
        if (rows.length === 0) break;
        const keys = rows.flatMap((r) => (r.place === 'r2' && r.r2_key ? [r.r2_key, searchIndexKey(r.r2_key)] : []));
        if (keys.length) await this.host.env.ARTIFACTS.delete(keys);
        this.host.transactionSync(() => {
          // Two parameters a row: as many rows a statement as the bound-parameter limit allows.
          const per = Math.floor(SQLITE_BOUND_PARAMETERS_MAX / 2);
          for (let i = 0; i < rows.length; i += per) {
            const part = rows.slice(i, i + per);
            const pairs = part.map(() => '(?, ?)').join(', ');
            const params = part.flatMap((r) => [r.handle, r.stream]);
            this.sql.exec(`DELETE FROM artifact_chunks WHERE (handle, stream) IN (VALUES ${pairs})`, ...params);
            this.sql.exec(`DELETE FROM artifacts WHERE (handle, stream) IN (VALUES ${pairs})`, ...params);
          }
        });
        deleted += rows.length;
        if (rows.length < SWEEP_BATCH_ROWS) break;
      }
      this.retryAt = 0;
    } catch (e) {
      console.error(`artifact retention stopped after ${deleted} deletions, retried in ${SWEEP_RETRY_MS / 1000} s: ${(e as Error).message}`);
      this.retryAt = now + SWEEP_RETRY_MS;
    }
    this.soonest = undefined;
    return { deleted };
  }

  /** Whether the job's exit holds exactly `body` for this stream, and is kept at least as long as the artifact. */
  private exitHolds(a: StoredArtifact, body: Uint8Array, expiresAt: number): boolean {
    const job = this.jobs.get(a.jobId);
    if (!job || job.ended_at === null || job.ended_at + JOB_RETENTION_MS < expiresAt) return false;
    const held = this.exitBytes(a.jobId, a.stream);
    return held !== null && sameBytes(held, body);
  }

  private exitBytes(jobId: string, stream: StreamName): Uint8Array | null {
    const exit = this.jobs.result(jobId);
    return exit ? enc.encode(exit[stream]) : null;
  }

  private putChunks(handle: string, stream: StreamName, body: Uint8Array): void {
    for (let seq = 0, at = 0; at < body.byteLength || seq === 0; seq++, at += CHUNK_BYTES) {
      this.sql.exec(
        `INSERT INTO artifact_chunks (handle, stream, seq, data) VALUES (?, ?, ?, ?)`,
        handle,
        stream,
        seq,
        // A copy of exactly these bytes: a view would hand SQLite the whole buffer.
        body.slice(at, at + CHUNK_BYTES),
      );
    }
  }

  private chunks(handle: string, stream: StreamName): Uint8Array | null {
    const rows = this.sql
      .exec<{ data: SqlStorageValue }>(`SELECT data FROM artifact_chunks WHERE handle = ? AND stream = ? ORDER BY seq`, handle, stream)
      .toArray();
    if (rows.length === 0) return null;
    // A BLOB is an ArrayBuffer in workerd, a Uint8Array in node:sqlite.
    const parts = rows.map((r) => (r.data instanceof ArrayBuffer ? new Uint8Array(r.data) : (r.data as unknown as Uint8Array)));
    const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.byteLength;
    }
    return out;
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}
