/**
 * Retention of the team's history in its Durable Object, bounded by time and by size (the policy's
 * `retention`): audit rows older than `auditDays`, or the oldest ones while the object's storage is
 * over `maxBytes`, are first exported to R2 as NDJSON batches (src/store/audit-export.ts; read back
 * with `GET /admin/v1/audit/export`), and only then dropped, oldest first; ended jobs go after
 * JOB_RETENTION_MS. Nothing is dropped that was not exported: when R2 refuses a batch the rows stay,
 * and a team over its storage bound then refuses new jobs with an error naming the setting
 * (`admitJob`) rather than lose audit rows.
 *
 * Its own alarm time (`nextWake`) is the oldest row's due time; it reads that once per instance.
 */
import type { StorageView } from '../contracts/audit.ts';
import { JOB_RETENTION_MS } from '../contracts/job-view.ts';
import type { RetentionPolicy } from '../contracts/policy.ts';
import type { ErrorCode } from '../contracts/errors.ts';
import { DO_STORAGE_MAX_BYTES } from '../platform/limits.ts';
import { putAuditBatch } from '../store/audit-export.ts';
import type { AuditRow } from '../store/audit.ts';
import type { AuditLog } from './audit-log.ts';
import { migrate, type DispatchHost, type Migration, type Wakes } from './capability-host.ts';
import type { JobRecords } from './job-records.ts';
import type { JobRows } from './job-rows.ts';

const DAY_MS = 24 * 3600_000;
/** Rows per exported batch (one R2 PUT each: ~1 MB of NDJSON at ~500 bytes a row). */
export const EXPORT_BATCH_ROWS = 2000;
/** Batches one run exports at most (its own invocation's time); a run that stopped there goes on soon. */
const BATCHES_PER_RUN = 5;
const AGAIN_AFTER_MS = 100;
/** After an export R2 refused, the next try. */
const RETRY_AFTER_MS = 60_000;
/** A size-bound run drops until the object is this far below its bound, so it does not run again at the next row. */
const SIZE_LOW_WATER = 0.9;
/** A due time is read again at most this often while there is nothing (an empty table has no oldest row). */
const REREAD_EMPTY_MS = 60_000;

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-audit-exports',
    sql: [
      `CREATE TABLE IF NOT EXISTS audit_exports (first_id INTEGER PRIMARY KEY, last_id INTEGER NOT NULL, first_at INTEGER NOT NULL,
        last_at INTEGER NOT NULL, rows INTEGER NOT NULL, bytes INTEGER NOT NULL, key TEXT NOT NULL, created_at INTEGER NOT NULL)`,
    ],
  },
];

export interface AuditExportBatch {
  firstId: number;
  lastId: number;
  firstAt: number;
  lastAt: number;
  rows: number;
  bytes: number;
  key: string;
}

export interface RetentionParts {
  settings(): RetentionPolicy;
  audit: Pick<AuditLog, 'oldest' | 'oldestAt' | 'oldestDayLastAt' | 'wholeDaysThrough' | 'dropThrough'>;
  jobs: Pick<JobRecords, 'prune'> & Pick<JobRows, 'oldestDayEnded'>;
  /** Ended jobs dropped: whoever keeps something per job forgets them. */
  onJobsPruned(ids: string[]): void;
  /** Stores an exported batch (R2); throws when it was not stored. */
  putBatch?: (team: string, rows: readonly AuditRow[]) => Promise<{ key: string; bytes: number }>;
}

export type RetentionHost = Pick<DispatchHost, 'sql' | 'transactionSync' | 'env' | 'team' | 'now'> & {
  /** The object's storage in bytes (`ctx.storage.sql.databaseSize`). */
  storageBytes(): number;
};

export class Retention implements Wakes {
  private readonly host: RetentionHost;
  private readonly p: RetentionParts;
  private readonly putBatch: (team: string, rows: readonly AuditRow[]) => Promise<{ key: string; bytes: number }>;
  private oldestAudit: { at: number | null; readAt: number } | null = null;
  private oldestJob: { at: number | null; readAt: number } | null = null;
  private more = false;
  private retryAt = 0;
  private lastError: string | null = null;
  /** The storage size after the last size-bound run: only growth past the bound again starts another. */
  private sizeAfterRun = 0;
  private running: Promise<void> | null = null;
  /** The last size-bound run found no audit row left to drop and the object still over its bound. */
  private exhausted = false;

  constructor(host: RetentionHost, parts: RetentionParts) {
    this.host = host;
    this.p = parts;
    this.putBatch = parts.putBatch ?? ((team, rows) => putAuditBatch(host.env, team, rows));
    migrate(host, 'retention', MIGRATIONS);
  }

  private auditDue(now: number): number | null {
    if (!this.oldestAudit || (this.oldestAudit.at === null && now - this.oldestAudit.readAt > REREAD_EMPTY_MS)) {
      this.oldestAudit = { at: this.p.audit.oldestDayLastAt(), readAt: now };
    }
    // The oldest day goes once its last row is past auditDays.
    return this.oldestAudit.at === null ? null : this.oldestAudit.at + this.p.settings().auditDays * DAY_MS;
  }

  private jobsDue(now: number): number | null {
    if (!this.oldestJob || (this.oldestJob.at === null && now - this.oldestJob.readAt > REREAD_EMPTY_MS)) {
      this.oldestJob = { at: this.p.jobs.oldestDayEnded(), readAt: now };
    }
    return this.oldestJob.at === null ? null : this.oldestJob.at + JOB_RETENTION_MS;
  }

  private overBound(): boolean {
    const bytes = this.host.storageBytes();
    return bytes > this.p.settings().maxBytes && bytes > this.sizeAfterRun;
  }

  nextWake(now: number): number | null {
    if (this.more || this.overBound()) return Math.max(now + AGAIN_AFTER_MS, this.retryAt);
    const due = [this.auditDue(now), this.jobsDue(now)].filter((x): x is number => x !== null);
    return due.length ? Math.max(Math.min(...due), this.retryAt) : null;
  }

  /** The alarm's part: whatever is due, within one run's budget. */
  onAlarm(now: number): Promise<void> {
    this.running ??= this.run(now).finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async run(now: number): Promise<void> {
    const s = this.p.settings();
    // Ended jobs past their retention (and what is kept per job).
    // A day at a time (a table dropped whole): the few due after a pause, a day's at most on a normal run.
    for (let i = 0; i < 10; i++) {
      const ids = this.p.jobs.prune(now - JOB_RETENTION_MS);
      if (ids === null) break;
      if (ids.length) this.p.onJobsPruned(ids);
    }
    this.oldestJob = null;
    let batches = 0;
    try {
      // By age: whole days whose every row is older than auditDays (a day's table is dropped whole, writing no row).
      // Rows are exported after the last one exported: a day exported in part keeps those rows until it goes whole.
      const through = this.p.audit.wholeDaysThrough(now - s.auditDays * DAY_MS);
      while (through !== null && batches < BATCHES_PER_RUN) {
        const rows = this.p.audit.oldest(this.lastExportedId(), EXPORT_BATCH_ROWS, { throughId: through });
        if (rows.length === 0) {
          // Exported already (a run stopped between two batches): only the drop is left.
          this.p.audit.dropThrough(through);
          break;
        }
        await this.exportAndDrop(rows, now, false);
        batches += 1;
      }
      // By size: the oldest rows, whatever their age, until the object is below its low-water mark — a day in part if need be.
      if (this.host.storageBytes() > s.maxBytes) {
        let freed = 0;
        const excess = this.host.storageBytes() - s.maxBytes * SIZE_LOW_WATER;
        while (batches < BATCHES_PER_RUN && freed < excess) {
          const rows = this.p.audit.oldest(this.lastExportedId(), EXPORT_BATCH_ROWS);
          if (rows.length === 0) break;
          freed += await this.exportAndDrop(rows, now, true);
          batches += 1;
        }
        // SQLite reuses freed pages rather than shrinking its file: the next run waits for growth past this size.
        this.sizeAfterRun = this.host.storageBytes();
        this.exhausted = freed < excess && batches < BATCHES_PER_RUN;
      } else {
        this.exhausted = false;
      }
      this.lastError = null;
      this.more = batches >= BATCHES_PER_RUN;
    } catch (e) {
      this.lastError = `exporting audit rows to R2 failed: ${(e as Error).message}`;
      console.error(`retention: ${this.lastError}; the rows are kept and retried in ${RETRY_AFTER_MS / 1000} s`);
      this.retryAt = now + RETRY_AFTER_MS;
      this.more = true;
    }
    this.oldestAudit = null;
  }

  /** The last audit row exported (0 with none): rows up to it may still be here, in a day not dropped yet. */
  private lastExportedId(): number {
    return this.host.sql.exec<{ id: number | null }>(`SELECT MAX(last_id) AS id FROM audit_exports`).one().id ?? 0;
  }

  /**
   * Exports one batch, then drops what it completes — whole days, or (`partial`) every row it holds; returns
   * the bytes exported (an estimate of what the rows took here).
   */
  private async exportAndDrop(rows: AuditRow[], now: number, partial: boolean): Promise<number> {
    const team = await this.host.team();
    const first = rows[0];
    const last = rows[rows.length - 1];
    const put = await this.putBatch(team, rows);
    this.host.transactionSync(() => {
      this.host.sql.exec(
        `INSERT OR REPLACE INTO audit_exports (first_id, last_id, first_at, last_at, rows, bytes, key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        first.id,
        last.id,
        first.at,
        last.at,
        rows.length,
        put.bytes,
        put.key,
        now,
      );
      this.p.audit.dropThrough(last.id, partial);
    });
    return put.bytes;
  }

  /**
   * Refuses a new job when the object is over its storage bound and retention cannot free space
   * (R2 refused the export, or nothing is left to drop): audit rows are never dropped unexported.
   */
  admitJob(): { code: ErrorCode; message: string } | null {
    const s = this.p.settings();
    const bytes = this.host.storageBytes();
    const full = bytes > DO_STORAGE_MAX_BYTES * 0.95;
    if (!full && (bytes <= s.maxBytes || (this.lastError === null && !this.exhausted))) return null;
    return {
      code: 'quota_exceeded',
      message: `the team's storage is at its bound (${bytes} bytes used; policy retention.maxBytes = ${s.maxBytes})${
        this.lastError ? ` and retention cannot free space: ${this.lastError}` : ''
      }${this.exhausted ? ' and no audit row is left to export and drop' : ''}; raise retention.maxBytes or lower retention.auditDays in the team policy`,
    };
  }

  /** Exported batches holding rows after `afterId`, oldest first (at most `limit`). */
  exportsAfter(afterId: number, limit: number): AuditExportBatch[] {
    return this.host.sql
      .exec<{ first_id: number; last_id: number; first_at: number; last_at: number; rows: number; bytes: number; key: string }>(
        `SELECT first_id, last_id, first_at, last_at, rows, bytes, key FROM audit_exports WHERE last_id > ? ORDER BY first_id LIMIT ?`,
        afterId,
        limit,
      )
      .toArray()
      .map((r) => ({ firstId: r.first_id, lastId: r.last_id, firstAt: r.first_at, lastAt: r.last_at, rows: r.rows, bytes: r.bytes, key: r.key }));
  }

  /** The first exported batch with a row at or after `at` (where an export `since` starts). */
  firstExportIdAt(at: number): number | null {
    return this.host.sql.exec<{ id: number | null }>(`SELECT MIN(first_id) AS id FROM audit_exports WHERE last_at >= ?`, at).one().id;
  }

  storage(now: number): StorageView {
    const s = this.p.settings();
    const ex = this.host.sql
      .exec<{ n: number; rows: number | null; last: number | null }>(`SELECT COUNT(*) AS n, SUM(rows) AS rows, MAX(last_id) AS last FROM audit_exports`)
      .one();
    const oldestAuditAt = this.p.audit.oldestAt();
    this.oldestAudit = null;
    const due = this.auditDue(now);
    return {
      bytes: this.host.storageBytes(),
      maxBytes: s.maxBytes,
      auditDays: s.auditDays,
      oldestAuditAt,
      nextDropAt: due,
      exported: { batches: ex.n, rows: ex.rows ?? 0, lastId: ex.last },
      lastError: this.lastError,
    };
  }
}
