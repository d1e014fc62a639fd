/**
 * How the team's audit log (audit-log.ts) is stored: its columns, the migrations of the table from before
 * days, and the table a day of rows goes to (segments.ts).
 */
import { AUDIT_JOB_TOOLS } from '../store/audit.ts';
import type { Migration } from './capability-host.ts';
import { segmentsTable } from './segments.ts';

export const COLUMNS = `at, subject, token_id, tool, command, cwd, decision, reason, job_id, exit_status, duration_ms, bytes, parent_job_id, approval_id`;

export const MIGRATIONS: readonly Migration[] = [
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
    // A row's id grows with its time: a time is found from the ids, and every call spares the index's row written.
    id: '2-audit-no-at-index',
    sql: [`DROP INDEX IF EXISTS audit_at`],
  },
  {
    // A job's row is found through the job's own row (`jobs.audit_id`, the `JobAudit` port): every call spares this index's row written.
    id: '3-audit-no-job-index',
    sql: [`DROP INDEX IF EXISTS audit_job_row`],
  },
  {
    // New rows go to a table per day (DAY_TABLE), which retention drops whole; this one keeps the rows written before.
    id: '4-audit-by-day',
    sql: [segmentsTable('audit')],
  },
];

/** One day's rows: the id is the rowid, so a row writes one row and nothing else. */
export const DAY_TABLE = (t: string) => [
  `CREATE TABLE ${t} (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, subject TEXT NOT NULL, token_id TEXT, tool TEXT NOT NULL,
    command TEXT, cwd TEXT, decision TEXT NOT NULL, reason TEXT, job_id TEXT, exit_status TEXT, duration_ms INTEGER, bytes INTEGER,
    parent_job_id TEXT, approval_id TEXT)`,
];
