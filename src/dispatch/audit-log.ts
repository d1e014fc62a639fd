/**
 * The team's audit log, in the team's Durable Object: one row per tool call — allowed, denied,
 * asked or failed — written in the call the object already gets (a job's row with the job, a
 * denial's through `record`), so a call costs the shared D1 nothing. Commands and reasons are
 * redacted before storage (src/store/audit.ts); reads are newest first with an opaque id cursor.
 *
 * Ids only grow. Rows copied from the shared D1 of an older deployment keep their D1 ids (all
 * below LEGACY_ID_CEILING), and rows written here start above it, so the log reads in call order
 * whichever arrived first (docs/upgrading.md, "Team data moves to the team").
 *
 * Rows are kept a day per table (segments.ts): a call writes one row, retention exports a whole day
 * and drops its table (no row written), and reads run over the days newest or oldest first. The
 * table from before days (`audit`) is read as the oldest day and holds the rows copied from D1.
 */
import type { JobView } from '../contracts/job-view.ts';
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
import { migrate, type SqlHost } from './capability-host.ts';
import { Segments, type Segment } from './segments.ts';
import { COLUMNS, DAY_TABLE, MIGRATIONS } from './audit-schema.ts';
import { importLegacyRows } from './audit-import.ts';
import { SQLITE_BOUND_PARAMETERS_MAX } from '../platform/limits.ts';

/** D1's audit ids are below this (2^40: 35 years of 1,000 calls a second); the team's own rows count on from it. */
export const LEGACY_ID_CEILING = 2 ** 40;

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
/** Rows whose day `AuditLog` remembers (the newest written): more than the jobs one object has open at once. */
const WRITTEN_KEPT = 4096;
const DAY_MS = 24 * 3600_000;
/**
 * How much older than its day a row's time may be: a row goes to the day it is written on, and its time
 * is its call's start, which the submit follows by the call's own work (seconds). Reads by time look
 * this far into the next days.
 */
const LATE_MS = DAY_MS;

export class AuditLog {
  private readonly host: SqlHost;
  private readonly jobs: JobAudit;
  private readonly days: Segments;
  /** The highest id written, once read (ids only grow, and only this object writes its rows): `nextId` reads nothing after. */
  private hi: number | null = null;
  /** The day of each row this instance wrote lately (until retention drops rows), by id: a job's row is completed there without a lookup. */
  private readonly written = new Map<number, string>();

  constructor(host: SqlHost, jobs: JobAudit) {
    this.host = host;
    this.jobs = jobs;
    migrate(host, 'audit', MIGRATIONS);
    this.days = new Segments(host, { family: 'audit', legacy: 'audit', create: DAY_TABLE });
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /** A day's first and last id and the time of its newest row (retention's read, once a run). */
  private span(d: Segment): { lo: number | null; hi: number | null; lastAt: number | null } {
    const r = this.sql
      .exec<{ lo: number | null; hi: number | null; last: number | null }>(`SELECT MIN(id) AS lo, MAX(id) AS hi, MAX(at) AS last FROM ${d.name}`)
      .one();
    return { lo: r.lo, hi: r.hi, lastAt: r.last };
  }

  /** The id the next row gets (ids only grow; the object runs one call at a time). */
  nextId(): number {
    if (this.hi === null) {
      this.hi = LEGACY_ID_CEILING;
      for (const d of this.days.newestFirst()) {
        const hi = this.sql.exec<{ hi: number | null }>(`SELECT MAX(id) AS hi FROM ${d.name}`).one().hi;
        if (hi !== null) {
          this.hi = Math.max(hi, LEGACY_ID_CEILING);
          break;
        }
      }
    }
    return this.hi + 1;
  }

  /**
   * Writes one row, as `id` when given; returns its id, or null when it existed. A governed job has one row: a
   * second for a job this object took (the Worker's fallback when the submit's answer was lost) is skipped.
   */
  record(e: AuditEntry, now = Date.now(), id?: number): number | null {
    if (id === undefined && e.jobId && this.jobs.auditIdOf(e.jobId) !== null && isJobTool(e.tool)) return null;
    const c = auditColumns(e, now);
    const rowId = id ?? this.nextId();
    const table = this.days.writable(c[0] as number);
    const row = this.sql
      .exec<{ id: number }>(
        `INSERT INTO ${table} (id, ${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id`,
        rowId,
        ...c,
      )
      .toArray()[0];
    if (!row) return null;
    // A rolled-back write leaves `hi` ahead of storage: an id skipped, and ids still only grow.
    if (this.hi !== null && row.id > this.hi) this.hi = row.id;
    if (this.written.size >= WRITTEN_KEPT) this.written.delete(this.written.keys().next().value!);
    this.written.set(row.id, table);
    return row.id;
  }

  /** The day holding row `id`: where this instance wrote it, else looked up newest first (a job's row is in a recent one). */
  private dayOf(id: number): string | null {
    const known = this.written.get(id);
    if (known !== undefined) return known;
    for (const d of this.days.newestFirst()) {
      if (this.sql.exec(`SELECT 1 FROM ${d.name} WHERE id = ?`, id).toArray().length) return d.name;
    }
    return null;
  }

  /** A governed job's row as the job stands: its decision (failed for a job that never ran), exit, duration, bytes and a note on where it ran. */
  completeJob(v: JobView): void {
    const ended = v.ended_at !== null;
    const note = ended
      ? redactString(
          [v.agent_id ? `agent ${v.agent_id} (${v.sandbox})` : null, v.error ? `${v.error.code}: ${v.error.message}` : null].filter(Boolean).join('; '),
        )
      : '';
    const id = this.jobs.auditIdOf(v.job_id);
    // A job from before jobs held their row's id has its row in the table from before days, found by its job id.
    const table = id !== null ? this.dayOf(id) : this.days.all()[0]?.name === 'audit' ? 'audit' : null;
    if (ended && id !== null) this.written.delete(id);
    if (!table) return;
    const [where, key] = id !== null ? ['id = ?', id] : [`job_id = ? AND job_id IS NOT NULL AND tool IN ${AUDIT_JOB_TOOLS}`, v.job_id];
    this.sql.exec(
      `UPDATE ${table} SET decision = ?, exit_status = ?, duration_ms = ?, bytes = ?,
         reason = CASE WHEN ? = '' THEN reason WHEN reason IS NULL OR reason = '' THEN ? ELSE reason || '; ' || ? END
       WHERE ${where}`,
      FAILED_STATES.has(v.state) ? 'failed' : 'allowed',
      ended ? exitStatusOf(v) : v.state,
      v.duration_ms === null ? null : Math.round(v.duration_ms),
      v.stdout_bytes + v.stderr_bytes,
      note,
      note,
      note,
      key,
    );
  }

  /** A job's row shows the state it was written with; one still open shows the state it is in. */
  private live(r: AuditRow): AuditRow {
    const open = r.exitStatus === 'queued' || r.exitStatus === 'running';
    const state = open && r.jobId && isJobTool(r.tool) ? this.jobs.openStateOf(r.jobId) : null;
    return state ? { ...r, exitStatus: state } : r;
  }

  /** Days that may hold rows of times in [since, until), newest first (the table from before days always may). */
  private daysBetween(since?: number, until?: number): Segment[] {
    return this.days
      .newestFirst()
      .filter((d) => d.day === 0 || ((since === undefined || d.day + DAY_MS > since) && (until === undefined || d.day < until + LATE_MS)));
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
    add('at >= ?', f.since);
    add('at < ?', f.until);
    add('approval_id = ?', f.approvalId);
    // Every row that names the job (its own, its status reads, kills): a scan, for an admin's filter, not a call's.
    add('job_id = ?', f.jobId);
    // One extra row tells whether another page exists without a COUNT; days are read newest first until the page is full.
    const rows: StoredAuditRow[] = [];
    for (const d of this.daysBetween(f.since, f.until)) {
      if (rows.length > limit) break;
      rows.push(
        ...this.sql
          .exec<StoredAuditRow>(
            `SELECT id, ${COLUMNS} FROM ${d.name} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`,
            ...params,
            limit + 1 - rows.length,
          )
          .toArray(),
      );
    }
    const page = rows.slice(0, limit);
    return { entries: page.map((r) => this.live(auditRowOf(r))), nextCursor: rows.length > limit ? encodeCursor(page[page.length - 1].id) : null };
  }

  /**
   * The governed jobs' rows by job id (what each job ran and why it was allowed). Ids go to SQLite
   * in groups of SQLITE_BOUND_PARAMETERS_MAX: a statement with more bound parameters fails.
   */
  jobRows(jobIds: readonly string[]): AuditRow[] {
    const ids = [...new Set(jobIds)].slice(0, 500);
    const byId = ids.map((j) => this.jobs.auditIdOf(j)).filter((id): id is number => id !== null);
    const older = ids.filter((j) => this.jobs.auditIdOf(j) === null);
    const rows: StoredAuditRow[] = [];
    for (const d of this.days.newestFirst()) {
      if (rows.length >= byId.length) break;
      for (const group of groupsOf(byId, SQLITE_BOUND_PARAMETERS_MAX)) {
        rows.push(
          ...this.sql.exec<StoredAuditRow>(`SELECT id, ${COLUMNS} FROM ${d.name} WHERE id IN (${group.map(() => '?').join(', ')})`, ...group).toArray(),
        );
      }
    }
    if (older.length && this.days.all()[0]?.name === 'audit') {
      for (const group of groupsOf(older, SQLITE_BOUND_PARAMETERS_MAX)) {
        rows.push(
          ...this.sql
            .exec<StoredAuditRow>(
              `SELECT id, ${COLUMNS} FROM audit WHERE job_id IN (${group.map(() => '?').join(', ')}) AND job_id IS NOT NULL AND tool IN ${AUDIT_JOB_TOOLS}`,
              ...group,
            )
            .toArray(),
        );
      }
    }
    return rows.map((r) => this.live(auditRowOf(r)));
  }

  /** Calls since `since`: how many, how many denied, and the newest denials. */
  denials(since: number, recent: number): { calls: number; denied: number; recent: AuditRow[] } {
    let calls = 0;
    let denied = 0;
    const rows: StoredAuditRow[] = [];
    for (const d of this.daysBetween(since)) {
      const n = this.sql
        .exec<{ n: number; denied: number }>(`SELECT COUNT(*) AS n, COALESCE(SUM(decision = 'denied'), 0) AS denied FROM ${d.name} WHERE at >= ?`, since)
        .one();
      calls += n.n;
      denied += n.denied;
      if (rows.length < recent) {
        rows.push(
          ...this.sql
            .exec<StoredAuditRow>(
              `SELECT id, ${COLUMNS} FROM ${d.name} WHERE at >= ? AND decision = 'denied' ORDER BY id DESC LIMIT ?`,
              since,
              recent - rows.length,
            )
            .toArray(),
        );
      }
    }
    return { calls, denied, recent: rows.map(auditRowOf) };
  }

  /**
   * The oldest rows after `afterId`, oldest first: what an export reads and retention drops. `before`: only
   * rows written before that time; `throughId`: only rows up to that id.
   */
  oldest(afterId: number, limit: number, o: { before?: number; throughId?: number } = {}): AuditRow[] {
    const rows: StoredAuditRow[] = [];
    const through = o.throughId ?? Number.MAX_SAFE_INTEGER;
    for (const d of this.days.all()) {
      if (rows.length >= limit || (o.before !== undefined && d.day !== 0 && d.day >= o.before + LATE_MS)) break;
      rows.push(
        ...this.sql
          .exec<StoredAuditRow>(
            `SELECT id, ${COLUMNS} FROM ${d.name} WHERE id > ? AND id <= ? ${o.before !== undefined ? 'AND at < ?' : ''} ORDER BY id LIMIT ?`,
            afterId,
            through,
            ...(o.before !== undefined ? [o.before] : []),
            limit - rows.length,
          )
          .toArray(),
      );
    }
    return rows.map(auditRowOf);
  }

  /** When the oldest row kept was written, or null with none. */
  oldestAt(): number | null {
    for (const d of this.days.all()) {
      const r = this.sql.exec<{ at: number }>(`SELECT at FROM ${d.name} ORDER BY id LIMIT 1`).toArray()[0];
      if (r) return r.at;
    }
    return null;
  }

  /**
   * When the oldest rows retention may drop were written — the oldest day's last row (a day goes whole), or the
   * first row of the table from before days (its rows go one by one) — or null with none.
   */
  oldestDayLastAt(): number | null {
    for (const d of this.days.all()) {
      const s = this.span(d);
      if (s.hi === null) continue;
      return d.day === 0 ? this.sql.exec<{ at: number }>(`SELECT at FROM ${d.name} WHERE id = ?`, s.lo).one().at : s.lastAt;
    }
    return null;
  }

  /**
   * The last id retention may drop for `cutoff`: the oldest days whose every row was written before it
   * (whole days), or in the table from before days (rows copied from D1, over any span of time) its rows
   * before it; null with none.
   */
  wholeDaysThrough(cutoff: number): number | null {
    let through: number | null = null;
    for (const d of this.days.all()) {
      const s = this.span(d);
      if (s.hi === null) continue;
      if (s.lastAt !== null && s.lastAt < cutoff) {
        through = s.hi;
        continue;
      }
      if (d.day === 0) {
        const older = this.sql.exec<{ id: number | null }>(`SELECT MAX(id) AS id FROM ${d.name} WHERE at < ?`, cutoff).one().id;
        if (older !== null) through = older;
      }
      break;
    }
    return through;
  }

  /** The id of the first row written at or after `at`, or null with none. */
  firstIdAt(at: number): number | null {
    for (const d of this.days.all()) {
      if (d.day !== 0 && d.day + DAY_MS <= at) continue;
      const r = this.sql.exec<{ id: number }>(`SELECT id FROM ${d.name} WHERE at >= ? ORDER BY id LIMIT 1`, at).toArray()[0];
      if (r) return r.id;
    }
    return null;
  }

  /**
   * Drops rows up to `id` (retention, after they were exported): every day whose rows are all at or below
   * it goes whole, with no row written. `partial`: a day only partly below it loses those rows too
   * (one row written each) — for the storage bound, which cannot wait for a whole day; the table from
   * before days always does.
   */
  dropThrough(id: number, partial = false): void {
    this.written.clear();
    for (const d of this.days.all()) {
      const s = this.span(d);
      if (s.hi === null) continue;
      if (s.hi <= id) {
        this.days.drop(d.name);
        continue;
      }
      // The table from before days holds any span of time: its rows go as they age (one row written each, once).
      if ((partial || d.day === 0) && s.lo !== null && s.lo <= id) this.sql.exec(`DELETE FROM ${d.name} WHERE id <= ?`, id);
      break;
    }
  }

  /** Rows copied from an older deployment's D1, with their D1 ids (idempotent: a row sent again is skipped). */
  importRows(rows: readonly AuditRow[]): number {
    const n = importLegacyRows(
      this.sql,
      COLUMNS,
      rows.filter((r) => r.id < LEGACY_ID_CEILING),
    );
    // The table from before days is made again if retention had dropped it.
    this.days.reset();
    return n;
  }
}

/** `items` in consecutive groups of at most `size`. */
function groupsOf<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
