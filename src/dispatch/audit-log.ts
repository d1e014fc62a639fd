/**
 * The team's audit log, in the team's Durable Object: one row per tool call — allowed, denied,
 * asked or failed — written in the call the object already gets (a job's row with the job, a
 * denial's through `record`), so a call costs the shared D1 nothing. Commands and reasons are
 * redacted before storage (src/store/audit.ts); reads are newest first with an opaque id cursor.
 *
 * Ids only grow. Rows copied from the shared D1 of an older deployment keep their D1 ids (all
 * below LEGACY_ID_CEILING), and rows written here start above it, so the log reads in call order
 * whichever arrived first (docs/upgrading.md, "Team data moves to the team").
 */
import type { JobView } from '../contracts/jobs.ts';
import {
  auditColumns,
  AUDIT_DEFAULT_LIMIT,
  AUDIT_MAX_LIMIT,
  AUDIT_JOB_TOOLS,
  isJobTool,
  decodeCursor,
  encodeCursor,
  redactString,
  type AuditEntry,
  type AuditFilter,
  auditRowOf,
  type AuditRow,
  type StoredAuditRow,
} from '../store/audit.ts';
import { migrate, type Migration, type SqlHost } from './host.ts';

/** D1's audit ids are below this (2^40: 35 years of 1,000 calls a second); the team's own rows count on from it. */
export const LEGACY_ID_CEILING = 2 ** 40;

const COLUMNS = `at, subject, token_id, tool, command, cwd, decision, reason, job_id, exit_status, duration_ms, bytes, parent_job_id, approval_id`;

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-audit',
    sql: [
      `CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, subject TEXT NOT NULL, token_id TEXT, tool TEXT NOT NULL,
        command TEXT, cwd TEXT, decision TEXT NOT NULL, reason TEXT, job_id TEXT, exit_status TEXT, duration_ms INTEGER, bytes INTEGER,
        parent_job_id TEXT, approval_id TEXT)`,
      // One row per governed job, found by its job id (its completion, the job list's `call`).
      `CREATE UNIQUE INDEX IF NOT EXISTS audit_job_row ON audit (job_id) WHERE job_id IS NOT NULL AND tool IN ${AUDIT_JOB_TOOLS}`,
      `CREATE INDEX IF NOT EXISTS audit_approval ON audit (approval_id) WHERE approval_id IS NOT NULL`,
      `CREATE INDEX IF NOT EXISTS audit_at ON audit (at)`,
    ],
  },
  {
    // A row's id grows with its time: a time is found by a search over ids (idAtOrAfter), and every call spares the index's row written.
    id: '2-audit-no-at-index',
    sql: [`DROP INDEX IF EXISTS audit_at`],
  },
  {
    // A job's row is found through the job's own row (`jobs.audit_id`, the `JobAudit` port): every call spares this index's row written.
    id: '3-audit-no-job-index',
    sql: [`DROP INDEX IF EXISTS audit_job_row`],
  },
];

/** Where a job's audit row is: the job's row holds its id (null for a job the object no longer keeps, or kept from before it did). */
export interface JobAudit {
  auditIdOf(jobId: string): number | null;
  /** The state of a job still queued or running (its row shows the state it was written with). */
  openStateOf(jobId: string): string | null;
}

/** How a job ended, as the audit log shows it. */
function exitStatusOf(v: Pick<JobView, 'state' | 'exit_code' | 'signal'>): string {
  if (v.state === 'exited') return `exit ${v.exit_code}`;
  if (v.state === 'signaled') return `signal ${v.signal}`;
  return v.state;
}

const FAILED_STATES = new Set(['lost', 'failed_to_start', 'refused']);

export class AuditLog {
  private readonly host: SqlHost;
  private readonly jobs: JobAudit;

  constructor(host: SqlHost, jobs: JobAudit) {
    this.host = host;
    this.jobs = jobs;
    migrate(host, 'audit', MIGRATIONS);
  }

  /** The id the next row gets (ids only grow; the object runs one call at a time). */
  nextId(): number {
    return this.sql.exec<{ id: number }>(`SELECT COALESCE(MAX(id), ?) + 1 AS id FROM audit`, LEGACY_ID_CEILING).one().id;
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /**
   * Writes one row, as `id` when given; returns its id, or null when it existed. A governed job has one row: a
   * second for a job this object took (the Worker's fallback when the submit's answer was lost) is skipped.
   */
  record(e: AuditEntry, now = Date.now(), id?: number): number | null {
    if (id === undefined && e.jobId && this.jobs.auditIdOf(e.jobId) !== null && isJobTool(e.tool)) return null;
    const c = auditColumns(e, now);
    const row = this.sql
      .exec<{ id: number }>(
        `INSERT INTO audit (id, ${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id`,
        id ?? this.nextId(),
        ...c,
      )
      .toArray()[0];
    return row?.id ?? null;
  }

  /** A governed job's row as the job stands: its decision (failed for a job that never ran), exit, duration, bytes and a note on where it ran. */
  completeJob(v: JobView): void {
    const ended = v.ended_at !== null;
    const note = ended
      ? redactString(
          [v.agent_id ? `agent ${v.agent_id} (${v.sandbox})` : null, v.error ? `${v.error.code}: ${v.error.message}` : null].filter(Boolean).join('; '),
        )
      : '';
    this.sql.exec(
      `UPDATE audit SET decision = ?, exit_status = ?, duration_ms = ?, bytes = ?,
         reason = CASE WHEN ? = '' THEN reason WHEN reason IS NULL OR reason = '' THEN ? ELSE reason || '; ' || ? END
       WHERE ${this.whereJob(v.job_id)[0]}`,
      FAILED_STATES.has(v.state) ? 'failed' : 'allowed',
      ended ? exitStatusOf(v) : v.state,
      v.duration_ms === null ? null : Math.round(v.duration_ms),
      v.stdout_bytes + v.stderr_bytes,
      note,
      note,
      note,
      this.whereJob(v.job_id)[1],
    );
  }

  /** The condition and parameter that find a job's row: its id from the job's row, else (an older job) its job id, scanning. */
  private whereJob(jobId: string): [string, SqlStorageValue] {
    const id = this.jobs.auditIdOf(jobId);
    return id !== null ? ['id = ?', id] : [`job_id = ? AND job_id IS NOT NULL AND tool IN ${AUDIT_JOB_TOOLS}`, jobId];
  }

  /** A job's row shows the state it was written with; one still open shows the state it is in. */
  private live(r: AuditRow): AuditRow {
    const open = r.exitStatus === 'queued' || r.exitStatus === 'running';
    const state = open && r.jobId && isJobTool(r.tool) ? this.jobs.openStateOf(r.jobId) : null;
    return state ? { ...r, exitStatus: state } : r;
  }

  /** Newest first. The filter is validated by the admin route; an undecodable cursor is refused there. */
  query(f: AuditFilter): { entries: AuditRow[]; nextCursor: string | null } {
    const limit = Math.min(Math.max(1, Math.floor(f.limit ?? AUDIT_DEFAULT_LIMIT)), AUDIT_MAX_LIMIT);
    const where: string[] = [];
    const params: SqlStorageValue[] = [];
    const add = (clause: string, v: SqlStorageValue | undefined) => {
      if (v === undefined) return;
      where.push(clause);
      params.push(v);
    };
    add('id < ?', f.cursor === undefined ? undefined : (decodeCursor(f.cursor) ?? 0));
    add('decision = ?', f.decision);
    add('tool = ?', f.tool);
    add('subject = ?', f.subject);
    // Times become id bounds (the primary key), then are checked exactly.
    add('id >= ?', f.since === undefined ? undefined : this.idAtOrAfter(f.since));
    add('id < ?', f.until === undefined ? undefined : this.idAtOrAfter(f.until));
    add('at >= ?', f.since);
    add('at < ?', f.until);
    add('approval_id = ?', f.approvalId);
    // Every row that names the job (its own, its status reads, kills): a scan, for an admin's filter, not a call's.
    add('job_id = ?', f.jobId);
    // One extra row tells whether another page exists without a COUNT.
    const rows = this.sql
      .exec<StoredAuditRow>(
        `SELECT id, ${COLUMNS} FROM audit ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`,
        ...params,
        limit + 1,
      )
      .toArray();
    const page = rows.slice(0, limit);
    return { entries: page.map((r) => this.live(auditRowOf(r))), nextCursor: rows.length > limit ? encodeCursor(page[page.length - 1].id) : null };
  }

  /** The governed jobs' rows by job id (what each job ran and why it was allowed). */
  jobRows(jobIds: readonly string[]): AuditRow[] {
    const ids = [...new Set(jobIds)].slice(0, 500);
    const byId = ids.map((j) => this.jobs.auditIdOf(j)).filter((id): id is number => id !== null);
    const older = ids.filter((j) => this.jobs.auditIdOf(j) === null);
    const rows: StoredAuditRow[] = [];
    if (byId.length)
      rows.push(...this.sql.exec<StoredAuditRow>(`SELECT id, ${COLUMNS} FROM audit WHERE id IN (${byId.map(() => '?').join(', ')})`, ...byId).toArray());
    if (older.length) {
      rows.push(
        ...this.sql
          .exec<StoredAuditRow>(
            `SELECT id, ${COLUMNS} FROM audit WHERE job_id IN (${older.map(() => '?').join(', ')}) AND job_id IS NOT NULL AND tool IN ${AUDIT_JOB_TOOLS}`,
            ...older,
          )
          .toArray(),
      );
    }
    return rows.map((r) => this.live(auditRowOf(r)));
  }

  /** Calls since `since`: how many, how many denied, and the newest denials. */
  denials(since: number, recent: number): { calls: number; denied: number; recent: AuditRow[] } {
    const n = this.sql
      .exec<{ n: number; denied: number }>(
        `SELECT COUNT(*) AS n, COALESCE(SUM(decision = 'denied'), 0) AS denied FROM audit WHERE id >= ? AND at >= ?`,
        this.idAtOrAfter(since),
        since,
      )
      .one();
    const rows = this.sql
      .exec<StoredAuditRow>(
        `SELECT id, ${COLUMNS} FROM audit WHERE id >= ? AND at >= ? AND decision = 'denied' ORDER BY id DESC LIMIT ?`,
        this.idAtOrAfter(since),
        since,
        recent,
      )
      .toArray();
    return { calls: n.n, denied: n.denied, recent: rows.map(auditRowOf) };
  }

  /** The oldest rows after `afterId`, oldest first (what an export reads and retention drops). */
  oldest(afterId: number, limit: number, before?: number): AuditRow[] {
    const below = before === undefined ? Number.MAX_SAFE_INTEGER : this.idAtOrAfter(before);
    return this.sql
      .exec<StoredAuditRow>(`SELECT id, ${COLUMNS} FROM audit WHERE id > ? AND id < ? ORDER BY id LIMIT ?`, afterId, below, limit)
      .toArray()
      .map(auditRowOf);
  }

  /** When the oldest row kept was written, or null with none. */
  oldestAt(): number | null {
    return this.sql.exec<{ at: number }>(`SELECT at FROM audit ORDER BY id LIMIT 1`).toArray()[0]?.at ?? null;
  }

  /** The id of the first row written at or after `at`, or null with none. */
  firstIdAt(at: number): number | null {
    const id = this.idAtOrAfter(at);
    return this.sql.exec<{ id: number }>(`SELECT id FROM audit WHERE id >= ? ORDER BY id LIMIT 1`, id).toArray()[0]?.id ?? null;
  }

  /**
   * The smallest id whose row was written at or after `at` (one past the newest with none): a binary
   * search over the primary key — rows are numbered in the order they are written, so their times
   * grow with their ids — of about 2·log2(rows) indexed lookups, instead of an index on `at` that
   * every call would write a row to.
   */
  idAtOrAfter(at: number): number {
    const first = (id: number) => this.sql.exec<{ id: number; at: number }>(`SELECT id, at FROM audit WHERE id >= ? ORDER BY id LIMIT 1`, id).toArray()[0];
    const ends = this.sql.exec<{ lo: number | null; hi: number | null }>(`SELECT MIN(id) AS lo, MAX(id) AS hi FROM audit`).one();
    if (ends.lo === null || ends.hi === null) return 0;
    let lo = ends.lo;
    let hi = ends.hi + 1;
    while (lo < hi) {
      const mid = lo + Math.floor((hi - lo) / 2);
      const r = first(mid);
      if (!r) {
        hi = mid;
        continue;
      }
      // No row lies in [mid, r.id): if r is at or after `at`, so is the answer's bound `mid`.
      if (r.at >= at) hi = mid;
      else lo = r.id + 1;
    }
    return lo;
  }

  /** Drops rows up to `id` (retention, after they were exported). */
  dropThrough(id: number): void {
    this.sql.exec(`DELETE FROM audit WHERE id <= ?`, id);
  }

  /** Rows copied from an older deployment's D1, with their D1 ids (idempotent: a row sent again is skipped). */
  importRows(rows: readonly AuditRow[]): number {
    // The caller's transaction holds the page and its cursor together (legacy-import.ts).
    let n = 0;
    for (const r of rows) {
      if (r.id >= LEGACY_ID_CEILING) continue;
      const w = this.sql.exec(
        `INSERT INTO audit (id, ${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id`,
        r.id,
        r.at,
        r.subject,
        r.tokenId,
        r.tool,
        r.command === null ? null : JSON.stringify(r.command),
        r.cwd,
        r.decision,
        r.reason,
        r.jobId,
        r.exitStatus,
        r.durationMs,
        r.bytes,
        r.parentJobId,
        r.approvalId,
      );
      n += w.toArray().length;
    }
    return n;
  }
}
