/**
 * The team's jobs in the Durable Object's SQLite: one row per job from submit to its terminal state,
 * its spec in the row itself when it fits (a larger one is chunked by job-texts.ts), its exit as JSON.
 * Rows go to one table per day (segments.ts, schema in job-row-schema.ts), keyed by job id with no other
 * index, so a job writes one row when submitted (already running when an agent takes it at once), one
 * when it starts otherwise and one when it ends, and retention drops a whole day (no row written) —
 * where one table wrote three rows a submit (the row and two indexes) and one per delete.
 * Memory keeps copies of the rows it read or wrote, the table each is in, and — once read per instance —
 * every open (queued or running) job, so placement, liveness, cancels and wake-ups read no storage.
 *
 * Exactly-once: a job leaves `queued`/`running` through one conditional UPDATE; whoever changes the row
 * first wins, every later attempt sees zero rows written.
 */
import type { JobExit, SandboxKind, StreamName } from '../contracts/agent-protocol.ts';
import type { JobState } from '../contracts/job-view.ts';
import { migrate, type SqlHost } from './capability-host.ts';
import { COLUMNS, DAY_TABLE, MIGRATIONS, NO_ROW, type JobRow, type NewJob } from './job-row-schema.ts';
import { Segments } from './segments.ts';

export type { JobRow, NewJob } from './job-row-schema.ts';

/** A spec's JSON up to this many characters (≤ 192 KiB of UTF-8) is kept in the job's row, far below the 2 MB row limit. */
export const SPEC_ROW_MAX_CHARS = 64 * 1024;

/** Day tables one lookup by id reads in one statement (a compound SELECT; a week of days is kept, JOB_RETENTION_MS). */
const DAYS_PER_LOOKUP = 100;

/** `seq` values a millisecond: room for more jobs a millisecond than one object takes, within 2^53 for centuries. */
const SEQ_PER_MS = 1024;

const isOpen = (r: JobRow) => r.state === 'queued' || r.state === 'running';
const bySeq = (a: JobRow, b: JobRow) => a.seq - b.seq;

type Stored = JobRow & Record<string, SqlStorageValue>;

export class JobRows {
  private readonly host: SqlHost;
  private readonly days: Segments;
  /** Job rows by id as last read or written, frozen. */
  private readonly rows = new Map<string, Readonly<JobRow>>();
  /** The table each row read or written is in. */
  private readonly tableOf = new Map<string, string>();
  /** The queued and running jobs, once read. */
  private open: Map<string, Readonly<JobRow>> | null = null;
  /** The last `seq` given out by this instance. */
  private lastSeq = 0;
  /**
   * The id `get` last found in no table, until a row is kept (or the copies are dropped): a submit
   * looks its new job's id up and then creates it, and the create need not look again.
   */
  private absent: string | null = null;

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'jobs', MIGRATIONS);
    this.days = new Segments(host, { family: 'jobs', legacy: 'jobs', create: DAY_TABLE });
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /** The streams each row's exit left uploading (parsed once per row). */
  private readonly pending = new WeakMap<JobRow, readonly StreamName[]>();

  /** Drops every copy (a transaction that wrote rows was rolled back). */
  reset(): void {
    this.absent = null;
    this.rows.clear();
    this.tableOf.clear();
    this.open = null;
    this.days.reset();
  }

  private keep(row: JobRow, table: string): Readonly<JobRow> {
    if (this.absent === row.id) this.absent = null;
    const r = Object.freeze(row);
    this.rows.set(r.id, r);
    this.tableOf.set(r.id, table);
    if (isOpen(r)) this.open?.set(r.id, r);
    else this.open?.delete(r.id);
    return r;
  }

  /** Every kept job's rows, as one table to read (newest day first). */
  private everyDay(): string {
    const days = this.days.newestFirst();
    if (days.length === 0) return `(SELECT ${NO_ROW})`;
    return `(${days.map((d) => `SELECT ${COLUMNS} FROM ${d.name}`).join(' UNION ALL ')})`;
  }

  /** An update of job `id`'s row (`SET …`, then further conditions); returns the row as it is now, or null when none matched. */
  private update(id: string, set: string, where: string, ...params: SqlStorageValue[]): Readonly<JobRow> | null {
    const table = this.get(id) ? this.tableOf.get(id) : undefined;
    if (!table) return null;
    const [row] = this.sql.exec<Stored>(`UPDATE ${table} SET ${set} WHERE id = ? ${where} RETURNING ${COLUMNS}`, ...params).toArray();
    return row ? this.keep(row, table) : null;
  }

  /** Records a new job, queued (or running on `startOn`), with `spec` (its JSON, or null when it is kept elsewhere); null when its id exists already. */
  create(j: NewJob, spec: string | null): Readonly<JobRow> | null {
    if (this.absent !== j.spec.jobId && this.get(j.spec.jobId)) return null;
    // Jobs list in `seq` order: from the clock, so no read finds the last one (rows from before count from 1, far below).
    // An instance started in the millisecond of its predecessor's last job still numbers after the jobs it holds open.
    const seq = Math.max(this.lastSeq, ...this.openJobs().map((r) => r.seq)) + 1;
    const numbered = Math.max(seq, j.now * SEQ_PER_MS);
    const table = this.days.writable(j.now);
    const [row] = this.sql
      .exec<Stored>(
        `INSERT INTO ${table} (id, seq, tool, subject, token_id, cancel_key, runtime, sandbox_min, sel_agent, sel_labels, background,
          artifact_handle, state, agent, agent_subject, sandbox, started_at, created_at, deadline, timeout_ms, max_concurrent, spec,
          audit_id, artifact_hours)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO NOTHING RETURNING ${COLUMNS}`,
        j.spec.jobId,
        numbered,
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
        j.startOn ? 'running' : 'queued',
        j.startOn?.id ?? null,
        j.startOn?.subject ?? null,
        j.startOn?.sandbox ?? null,
        j.startOn ? j.now : null,
        j.now,
        j.deadline,
        j.spec.timeoutMs,
        j.maxConcurrent,
        spec,
        j.auditId ?? null,
        j.artifactHours ?? null,
      )
      .toArray();
    if (!row) return null;
    this.lastSeq = row.seq;
    return this.keep(row, table);
  }

  get(id: string): Readonly<JobRow> | null {
    const hit = this.rows.get(id);
    if (hit) return hit;
    // The days in one statement (a new job's id is looked up in all of them; SQLite takes up to 500 terms), newest
    // first; the row says its table.
    const days = this.days.newestFirst();
    for (let i = 0; i < days.length; i += DAYS_PER_LOOKUP) {
      const some = days.slice(i, i + DAYS_PER_LOOKUP);
      const row = this.sql
        .exec<Stored & { day_table: string }>(
          some.map((d) => `SELECT ${COLUMNS}, '${d.name}' AS day_table FROM ${d.name} WHERE id = ?`).join(' UNION ALL '),
          ...some.map(() => id),
        )
        .toArray()[0];
      if (row) {
        const { day_table, ...stored } = row;
        return this.keep(stored as Stored, day_table);
      }
    }
    this.absent = id;
    return null;
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
      for (const d of this.days.all()) {
        for (const r of this.sql.exec<Stored>(`SELECT ${COLUMNS} FROM ${d.name} WHERE state IN ('queued', 'running')`).toArray()) this.keep(r, d.name);
      }
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
      this.update(
        id,
        `state = 'running', agent = ?, agent_subject = ?, sandbox = ?, started_at = ?, orphaned_at = NULL`,
        `AND state = 'queued'`,
        agent.id,
        agent.subject,
        agent.sandbox,
        now,
        id,
      ) !== null
    );
  }

  /** running → queued (the agent refused it for capacity, or never received it). */
  requeue(id: string): boolean {
    return (
      this.update(
        id,
        `state = 'queued', agent = NULL, agent_subject = NULL, sandbox = NULL, started_at = NULL, orphaned_at = NULL`,
        `AND state = 'running'`,
        id,
      ) !== null
    );
  }

  setOrphaned(ids: string[], now: number): void {
    for (const id of ids) this.update(id, `orphaned_at = ?`, `AND state = 'running' AND orphaned_at IS NULL`, now, id);
  }

  clearOrphaned(ids: string[]): void {
    for (const id of ids) this.update(id, `orphaned_at = NULL`, `AND state = 'running'`, id);
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
    const agentCheck = o.fromAgent !== undefined ? `AND state = 'running' AND agent = ?` : `AND state IN ('queued', 'running')`;
    const params: SqlStorageValue[] = [state, now, o.exit, o.error?.code ?? null, o.error?.message ?? null, id];
    if (o.fromAgent !== undefined) params.push(o.fromAgent);
    return this.update(id, `state = ?, ended_at = ?, exit = ?, error_code = ?, error_message = ?, orphaned_at = NULL`, agentCheck, ...params);
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
        `SELECT id, json_extract(exit, '$.pendingArtifacts') AS pending FROM ${this.everyDay()}
         WHERE ended_at IS NOT NULL AND json_array_length(exit, '$.pendingArtifacts') > 0`,
      )
      .toArray()
      .map((r) => ({ id: r.id, pending: JSON.parse(r.pending) as StreamName[] }));
  }

  /** Marks (or clears) when an ended job's uploading agent went away; reuses the job's orphan mark, unused once it ended. */
  markUploadOrphaned(id: string, at: number | null): void {
    this.update(id, `orphaned_at = ?`, `AND ended_at IS NOT NULL`, at, id);
  }

  /** Newest first; the cursor is the last row's `seq`. An admin's read: it reads every day kept. */
  list(f: { state?: JobState; subject?: string; tool?: string; cursor?: number; limit: number }): { rows: JobRow[]; next: number | null } {
    const where: string[] = [];
    const params: SqlStorageValue[] = [];
    if (f.state) where.push('state = ?'), params.push(f.state);
    if (f.subject) where.push('subject = ?'), params.push(f.subject);
    if (f.tool) where.push('tool = ?'), params.push(f.tool);
    if (f.cursor !== undefined) where.push('seq < ?'), params.push(f.cursor);
    const rows = this.sql
      .exec<Stored>(`SELECT * FROM ${this.everyDay()} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`, ...params, f.limit + 1)
      .toArray();
    const more = rows.length > f.limit;
    const page = rows.slice(0, f.limit);
    return { rows: page, next: more ? page[page.length - 1].seq : null };
  }

  /** Jobs created since `since`, counted by state. */
  countByState(since: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const r of this.sql
      .exec<{ state: string; n: number }>(`SELECT state, COUNT(*) AS n FROM ${this.everyDay()} WHERE created_at >= ? GROUP BY state`, since)
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
    const all = this.everyDay();
    const r = this.sql
      .exec<{ jobs: number; job_ms: number }>(
        `SELECT (SELECT COUNT(*) FROM ${all} WHERE created_at >= ? AND created_at < ? AND COALESCE(error_code, '') <> 'quota_exceeded') AS jobs,
           (SELECT COALESCE(SUM(ended_at - started_at), 0) FROM ${all} WHERE ended_at >= ? AND ended_at < ? AND started_at IS NOT NULL) AS job_ms`,
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
        `SELECT * FROM ${this.everyDay()} WHERE created_at >= ? AND (state IN ('signaled', 'timed_out', 'lost', 'failed_to_start', 'refused')
           OR (state = 'exited' AND COALESCE(json_extract(exit, '$.exitCode'), 0) <> 0)) ORDER BY seq DESC LIMIT ?`,
        since,
        limit,
      )
      .toArray();
  }

  /** The oldest day with jobs in it: its open jobs and when its last one ended (an empty day, the table from before, is skipped). */
  private oldestDay(): { table: string; open: number; last: number | null } | null {
    for (const d of this.days.all()) {
      const r = this.sql
        .exec<{ n: number; open: number; last: number | null }>(
          `SELECT COUNT(*) AS n, COUNT(*) - COUNT(ended_at) AS open, MAX(ended_at) AS last FROM ${d.name}`,
        )
        .one();
      if (r.n > 0) return { table: d.name, open: r.open, last: r.last };
    }
    return null;
  }

  /** When the oldest day's last job ended — the day is dropped JOB_RETENTION_MS after; null with none, or while one of its jobs is open. */
  oldestDayEnded(): number | null {
    const d = this.oldestDay();
    return !d || d.open > 0 ? null : d.last;
  }

  /**
   * The oldest day whose jobs all ended before `before`, with their ids: what retention drops next,
   * whole; null when no day is due. Empty tables before it (the one from before days) go with it.
   */
  dayEndedBefore(before: number): { table: string; ids: string[] } | null {
    const d = this.oldestDay();
    if (!d || d.open > 0 || d.last === null || d.last >= before) return null;
    for (const e of this.days.all()) {
      if (e.name === d.table) break;
      this.days.drop(e.name);
    }
    return {
      table: d.table,
      ids: this.sql
        .exec<{ id: string }>(`SELECT id FROM ${d.table}`)
        .toArray()
        .map((x) => x.id),
    };
  }

  /** Drops a day's table (its ids from `dayEndedBefore`), writing no row. */
  dropDay(day: { table: string; ids: readonly string[] }): void {
    for (const id of day.ids) {
      this.rows.delete(id);
      this.tableOf.delete(id);
      this.open?.delete(id);
    }
    this.days.drop(day.table);
  }
}
