/**
 * The team's jobs in the Durable Object's SQLite: one row per job (`jobs`) from submit to its terminal
 * state, its spec in the row itself when it fits (a larger one is chunked by job-texts.ts), its exit as
 * JSON. Memory keeps copies of the rows it read or wrote and — once read per instance — every open
 * (queued or running) job, so placement, liveness, cancels and wake-ups read no storage; that is why the
 * table keeps no index on state or cancel key, which every job's submit, start and end would write.
 *
 * Exactly-once: a job leaves `queued`/`running` through one conditional UPDATE; whoever changes the row
 * first wins, every later attempt sees zero rows written.
 */
import type { JobExit, JobSpec, SandboxKind, StreamName } from '../contracts/agent-protocol.ts';
import type { JobState } from '../contracts/jobs.ts';
import { migrate, type Migration, type SqlHost } from './host.ts';
import { JOB_TABLES_V1 } from './job-tables-v1.ts';

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
  /** The id of the call's audit row (written with the job): its completion is found by primary key. */
  auditId?: number;
  /** Hours its output is kept, as the policy said at submit. */
  artifactHours?: number;
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
  /** The spec's JSON when it fits the row (SPEC_ROW_MAX_CHARS); null: chunked in `job_blobs` (and in rows older than the column). */
  spec: string | null;
  /** The call's audit row; null in rows written before the job knew it. */
  audit_id: number | null;
  /** Hours its output is kept (artifacts its exit holds are recorded with it); null: the team's setting. */
  artifact_hours: number | null;
}

const KEPT_COLUMNS = `id, seq, tool, subject, token_id, cancel_key, runtime, sandbox_min, sel_agent, sel_labels, background,
    artifact_handle, state, agent, agent_subject, sandbox, created_at, deadline, started_at, ended_at, orphaned_at, timeout_ms,
    max_concurrent, exit, error_code, error_message, audit_id, spec`;

const MIGRATIONS: readonly Migration[] = [
  ...JOB_TABLES_V1,
  {
    // The spec goes in the row (no chunk row per job); open jobs and cancel keys are looked up in memory, so
    // the state and cancel-key indexes only cost rows written (one per submit, two more per start and end).
    id: '4-jobs-spec-in-row',
    sql: [`ALTER TABLE jobs ADD COLUMN spec TEXT`, `DROP INDEX IF EXISTS jobs_cancel`, `DROP INDEX IF EXISTS jobs_state`],
  },
  {
    // Rows are billed per row and per index entry written: a table keyed by the job id itself (WITHOUT ROWID) writes one
    // row per insert, where the rowid table wrote three (the row, its id's index, the `seq` index). Lists order by `seq`
    // over the jobs kept (JOB_RETENTION_MS), which an admin's page reads, not a call. The D1 copy's flags go with it.
    id: '5-jobs-keyed-by-id',
    sql: [
      `CREATE TABLE jobs_keyed (id TEXT NOT NULL PRIMARY KEY, seq INTEGER NOT NULL, tool TEXT NOT NULL, subject TEXT NOT NULL,
    token_id TEXT NOT NULL, cancel_key TEXT NOT NULL, runtime TEXT, sandbox_min TEXT, sel_agent TEXT, sel_labels TEXT,
    background INTEGER NOT NULL, artifact_handle TEXT NOT NULL, state TEXT NOT NULL, agent TEXT, agent_subject TEXT,
    sandbox TEXT, created_at INTEGER NOT NULL, deadline INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER,
    orphaned_at INTEGER, timeout_ms INTEGER NOT NULL, max_concurrent INTEGER NOT NULL, exit TEXT,
    error_code TEXT, error_message TEXT, audit_id INTEGER, spec TEXT, artifact_hours REAL) WITHOUT ROWID`,
      `INSERT INTO jobs_keyed (${KEPT_COLUMNS}) SELECT ${KEPT_COLUMNS} FROM jobs`,
      `DROP TABLE jobs`,
      `ALTER TABLE jobs_keyed RENAME TO jobs`,
    ],
  },
];

/** A spec's JSON up to this many characters (≤ 192 KiB of UTF-8) is kept in the job's row, far below the 2 MB row limit. */
export const SPEC_ROW_MAX_CHARS = 64 * 1024;

const isOpen = (r: JobRow) => r.state === 'queued' || r.state === 'running';
const bySeq = (a: JobRow, b: JobRow) => a.seq - b.seq;

type Stored = JobRow & Record<string, SqlStorageValue>;

export class JobRows {
  private readonly host: SqlHost;
  /** Job rows by id as last read or written, frozen. */
  private readonly rows = new Map<string, Readonly<JobRow>>();
  /** The queued and running jobs, once read. */
  private open: Map<string, Readonly<JobRow>> | null = null;
  /** The newest job's `seq`, once read (no index on it: one scan per instance instead of an index entry per job). */
  private lastSeq: number | null = null;

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'jobs', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /** The streams each row's exit left uploading (parsed once per row). */
  private readonly pending = new WeakMap<JobRow, readonly StreamName[]>();

  /** Drops every copy (a transaction that wrote rows was rolled back). */
  reset(): void {
    this.rows.clear();
    this.open = null;
    this.lastSeq = null;
  }

  private keep(row: JobRow): Readonly<JobRow> {
    const r = Object.freeze(row);
    this.rows.set(r.id, r);
    if (isOpen(r)) this.open?.set(r.id, r);
    else this.open?.delete(r.id);
    return r;
  }

  /** A write to job rows; returns the rows it wrote, as they are now. */
  private write(statement: string, ...params: SqlStorageValue[]): Readonly<JobRow>[] {
    return this.sql
      .exec<Stored>(`${statement} RETURNING *`, ...params)
      .toArray()
      .map((r) => this.keep(r));
  }

  /** Records a new job, queued, with `spec` (its JSON, or null when it is kept elsewhere); null when its id exists already. */
  create(j: NewJob, spec: string | null): Readonly<JobRow> | null {
    this.lastSeq ??= this.sql.exec<{ seq: number }>(`SELECT COALESCE(MAX(seq), 0) AS seq FROM jobs`).one().seq;
    const [row] = this.write(
      `INSERT INTO jobs (id, seq, tool, subject, token_id, cancel_key, runtime, sandbox_min, sel_agent, sel_labels, background,
          artifact_handle, state, created_at, deadline, timeout_ms, max_concurrent, spec, audit_id, artifact_hours)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO NOTHING`,
      j.spec.jobId,
      this.lastSeq + 1,
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
      spec,
      j.auditId ?? null,
      j.artifactHours ?? null,
    );
    if (row) this.lastSeq = row.seq;
    return row ?? null;
  }

  get(id: string): Readonly<JobRow> | null {
    const hit = this.rows.get(id);
    if (hit) return hit;
    const row = this.sql.exec<Stored>(`SELECT * FROM jobs WHERE id = ?`, id).toArray()[0];
    return row ? this.keep(row) : null;
  }

  /** Oldest first. */
  queued(): Readonly<JobRow>[] {
    return this.openJobs().filter((r) => r.state === 'queued');
  }

  /** Oldest first. */
  running(): Readonly<JobRow>[] {
    return this.openJobs().filter((r) => r.state === 'running');
  }

  private openJobs(): Readonly<JobRow>[] {
    if (!this.open) {
      this.open = new Map();
      for (const r of this.sql.exec<Stored>(`SELECT * FROM jobs WHERE state IN ('queued', 'running')`).toArray()) this.keep(r);
    }
    return [...this.open.values()].sort(bySeq);
  }

  /** The newest open job with this cancel key (only open jobs can be cancelled). */
  byCancelKey(key: string): Readonly<JobRow> | null {
    return this.openJobs().findLast((r) => r.cancel_key === key) ?? null;
  }

  /** queued → running on `agent`. False when the job is no longer queued. */
  assign(id: string, agent: { id: string; subject: string; sandbox: SandboxKind }, now: number): boolean {
    return (
      this.write(
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
      this.write(
        `UPDATE jobs SET state = 'queued', agent = NULL, agent_subject = NULL, sandbox = NULL, started_at = NULL, orphaned_at = NULL
       WHERE id = ? AND state = 'running'`,
        id,
      ).length > 0
    );
  }

  setOrphaned(ids: string[], now: number): void {
    for (const id of ids) this.write(`UPDATE jobs SET orphaned_at = ? WHERE id = ? AND state = 'running' AND orphaned_at IS NULL`, now, id);
  }

  clearOrphaned(ids: string[]): void {
    for (const id of ids) this.write(`UPDATE jobs SET orphaned_at = NULL WHERE id = ? AND state = 'running'`, id);
  }

  /**
   * Moves an open job to its terminal state, once (with `fromAgent`: only while it runs on that agent).
   * `exit` is the stored exit's JSON. Returns the row written, or null when the job was already closed.
   */
  finish(
    id: string,
    state: JobState,
    now: number,
    o: { exit: string | null; error: { code: string; message: string } | null; fromAgent?: string },
  ): Readonly<JobRow> | null {
    const agentCheck = o.fromAgent !== undefined ? ` AND state = 'running' AND agent = ?` : ` AND state IN ('queued', 'running')`;
    const params: SqlStorageValue[] = [state, now, o.exit, o.error?.code ?? null, o.error?.message ?? null, id];
    if (o.fromAgent !== undefined) params.push(o.fromAgent);
    const [row] = this.write(
      `UPDATE jobs SET state = ?, ended_at = ?, exit = ?, error_code = ?, error_message = ?, orphaned_at = NULL WHERE id = ?${agentCheck}`,
      ...params,
    );
    return row ?? null;
  }

  /** The streams the ended job's exit left uploading (artifact uploads follow the exit); [] while it runs. */
  pendingOf(id: string): readonly StreamName[] {
    const row = this.get(id);
    if (!row?.exit || row.ended_at === null) return [];
    let p = this.pending.get(row);
    if (!p) {
      p = (JSON.parse(row.exit) as JobExit).pendingArtifacts ?? [];
      this.pending.set(row, p);
    }
    return p;
  }

  /** Every ended job whose exit left streams uploading, with those streams. */
  endedWithPending(): { id: string; pending: readonly StreamName[] }[] {
    return this.sql
      .exec<{ id: string; pending: string }>(
        `SELECT id, json_extract(exit, '$.pendingArtifacts') AS pending FROM jobs
         WHERE ended_at IS NOT NULL AND json_array_length(exit, '$.pendingArtifacts') > 0`,
      )
      .toArray()
      .map((r) => ({ id: r.id, pending: JSON.parse(r.pending) as StreamName[] }));
  }

  /** Marks (or clears) when an ended job's uploading agent went away; reuses the job's orphan mark, unused once it ended. */
  markUploadOrphaned(id: string, at: number | null): void {
    this.write(`UPDATE jobs SET orphaned_at = ? WHERE id = ? AND ended_at IS NOT NULL`, at, id);
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
      .exec<Stored>(`SELECT * FROM jobs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`, ...params, f.limit + 1)
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
      .exec<Stored>(
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

  /** Finished jobs older than `before` (at most 200 at a time): what retention drops next. */
  endedBefore(before: number): string[] {
    return this.sql
      .exec<{ id: string }>(`SELECT id FROM jobs WHERE ended_at IS NOT NULL AND ended_at < ? LIMIT 200`, before)
      .toArray()
      .map((r) => r.id);
  }

  /** Drops these jobs' rows. */
  drop(ids: readonly string[]): void {
    for (const id of ids) {
      this.rows.delete(id);
      this.open?.delete(id);
      this.sql.exec(`DELETE FROM jobs WHERE id = ?`, id);
    }
  }
}
