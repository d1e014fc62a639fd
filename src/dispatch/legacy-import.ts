/**
 * Moving a team's history out of the shared D1, where an older deployment kept it, into the team's
 * own object: its audit rows (with their D1 ids, so the log reads in call order: audit-log.ts), the
 * team's rows of the old jobs index dropped (a copy of what this object keeps itself), then its
 * approvals, tasks and network log, taken by their capabilities (`importRecords`). Each step
 * copies a page, commits it here, then deletes that page from D1 — a move interrupted anywhere goes
 * on where it stopped, and a page copied twice is kept once. Nothing is dropped from D1 before it is
 * stored here.
 *
 * It starts with the team's first request after the upgrade and goes on from the alarm, a few pages
 * per invocation (within its D1 query budget); a reader of the history (the audit log, the
 * overview) first moves what is left, up to a bound, so an upgraded team sees its history at once.
 */
import type { Env } from '../env.ts';
import type { AuditRow } from '../store/audit.ts';
import { dropLegacyAudit, dropLegacyJobsIndex, dropLegacyRows, LEGACY_TABLES, legacyAuditPage, legacyRowsPage, type LegacyTable } from '../store/legacy.ts';
import type { TeamRecordsImport } from './team-records-client.ts';
import { migrate, type DispatchHost, type Migration, type Wakes } from './capability-host.ts';

/** Rows per D1 page, and pages per invocation: 2 queries a page, far below every plan's per-invocation D1 budget. */
const PAGE_ROWS = 500;
const PAGES_PER_RUN = 10;
/** A move that stopped at its page budget goes on this soon (its own invocation). */
const AGAIN_AFTER_MS = 100;
/** After a D1 failure, the next try. */
const RETRY_AFTER_MS = 30_000;

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-legacy-import',
    sql: [`CREATE TABLE IF NOT EXISTS legacy_import (step TEXT PRIMARY KEY, cursor INTEGER NOT NULL, done INTEGER NOT NULL)`],
  },
];

type Step = 'audit' | 'jobs' | LegacyTable;
const STEPS: readonly Step[] = ['audit', 'jobs', ...LEGACY_TABLES];

export interface LegacyD1 {
  auditPage(env: Env, team: string, afterId: number, limit: number): Promise<AuditRow[]>;
  dropAudit(env: Env, team: string, throughId: number): Promise<void>;
  dropJobsIndex(env: Env, team: string, limit: number): Promise<number>;
  rowsPage(env: Env, table: LegacyTable, team: string, afterRowid: number, limit: number): Promise<Record<string, unknown>[]>;
  dropRows(env: Env, table: LegacyTable, team: string, throughRowid: number): Promise<void>;
}

const D1: LegacyD1 = {
  auditPage: legacyAuditPage,
  dropAudit: dropLegacyAudit,
  dropJobsIndex: dropLegacyJobsIndex,
  rowsPage: legacyRowsPage,
  dropRows: dropLegacyRows,
};

/** Which key of the team's records import each old table's rows go to (`importRecords`, capabilities.ts). */
const RECORDS_KEY: Record<LegacyTable, keyof TeamRecordsImport> = {
  approvals: 'approvals',
  tasks: 'tasks',
  egress_connections: 'egressConnections',
  egress_jobs: 'egressJobs',
};

export class LegacyImport implements Wakes {
  private readonly host: Pick<DispatchHost, 'sql' | 'transactionSync' | 'env' | 'team' | 'wake'>;
  private readonly audit: { importRows(rows: readonly AuditRow[]): number };
  private readonly records: (r: TeamRecordsImport) => void;
  private readonly d1: LegacyD1;
  private running: Promise<boolean> | null = null;
  /** Steps done, once read. */
  private doneSteps: Set<Step> | null = null;
  private retryAt = 0;
  private more = false;

  constructor(
    host: Pick<DispatchHost, 'sql' | 'transactionSync' | 'env' | 'team' | 'wake'>,
    parts: { audit: { importRows(rows: readonly AuditRow[]): number }; records: (r: TeamRecordsImport) => void },
    d1: LegacyD1 = D1,
  ) {
    this.host = host;
    this.audit = parts.audit;
    this.records = parts.records;
    this.d1 = d1;
    migrate(host, 'legacy-import', MIGRATIONS);
  }

  private done(): Set<Step> {
    this.doneSteps ??= new Set(
      this.host.sql
        .exec<{ step: Step }>(`SELECT step FROM legacy_import WHERE done = 1`)
        .toArray()
        .map((r) => r.step),
    );
    return this.doneSteps;
  }

  get finished(): boolean {
    return this.done().size === STEPS.length;
  }

  private cursor(step: Step): number {
    return this.host.sql.exec<{ cursor: number }>(`SELECT cursor FROM legacy_import WHERE step = ?`, step).toArray()[0]?.cursor ?? 0;
  }

  private mark(step: Step, cursor: number, done: boolean): void {
    this.host.sql.exec(
      `INSERT INTO legacy_import (step, cursor, done) VALUES (?, ?, ?) ON CONFLICT (step) DO UPDATE SET cursor = excluded.cursor, done = excluded.done`,
      step,
      cursor,
      done ? 1 : 0,
    );
    if (done) this.done().add(step);
  }

  /** The alarm's part: the next pages, while any are left. */
  onAlarm(): Promise<boolean> {
    return this.catchUp();
  }

  /** Moves up to `pages` pages; true when nothing is left. Runs once at a time; a D1 failure is logged and retried later. */
  catchUp(pages = PAGES_PER_RUN): Promise<boolean> {
    if (this.finished) return Promise.resolve(true);
    this.running ??= this.run(pages)
      .catch((e: Error) => {
        console.error(`moving the team's history out of D1 stopped: ${e.message}; retried in ${RETRY_AFTER_MS / 1000} s`);
        this.retryAt = Date.now() + RETRY_AFTER_MS;
        return false;
      })
      .finally(() => {
        this.running = null;
      });
    return this.running.then(async (finished) => {
      this.more = !finished;
      if (!finished) await this.host.wake();
      return finished;
    });
  }

  private async run(pages: number): Promise<boolean> {
    const team = await this.host.team();
    const env = this.host.env;
    for (let n = 0; n < pages; n++) {
      const step = STEPS.find((s) => !this.done().has(s));
      if (!step) return true;
      if (step === 'audit') {
        const after = this.cursor('audit');
        const rows = await this.d1.auditPage(env, team, after, PAGE_ROWS);
        if (rows.length === 0) {
          // A page whose deletion failed after it was stored here is deleted now (deleting is idempotent).
          if (after > 0) await this.d1.dropAudit(env, team, after);
          this.mark('audit', after, true);
          continue;
        }
        const last = rows[rows.length - 1].id;
        this.host.transactionSync(() => {
          this.audit.importRows(rows);
          this.mark('audit', last, false);
        });
        await this.d1.dropAudit(env, team, last);
      } else if (step === 'jobs') {
        const dropped = await this.d1.dropJobsIndex(env, team, PAGE_ROWS);
        if (dropped < PAGE_ROWS) this.mark('jobs', 0, true);
      } else {
        const after = this.cursor(step);
        const rows = await this.d1.rowsPage(env, step, team, after, PAGE_ROWS);
        if (rows.length === 0) {
          if (after > 0) await this.d1.dropRows(env, step, team, after);
          this.mark(step, after, true);
          continue;
        }
        const last = Number(rows[rows.length - 1]._rowid);
        this.host.transactionSync(() => {
          // A row the capability finds malformed is counted as refused there, and not kept: it could not be read back either.
          this.records({ [RECORDS_KEY[step]]: rows });
          this.mark(step, last, false);
        });
        await this.d1.dropRows(env, step, team, last);
      }
    }
    return this.finished;
  }

  nextWake(now: number): number | null {
    if (this.finished || !this.more) return null;
    return Math.max(now + AGAIN_AFTER_MS, this.retryAt);
  }
}
