/**
 * Audit rows copied from an older deployment's shared D1 (legacy-import.ts) go to the audit log's
 * table from before days (`audit`), with their D1 ids, which are below every id the team's object
 * gives: the log reads them as its oldest day. The caller's transaction holds a page and its cursor.
 */
import type { AuditRow } from '../store/audit.ts';

/** The table as the audit log's first migration made it; made again here if retention had dropped it. */
const LEGACY_TABLE = `CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, subject TEXT NOT NULL, token_id TEXT,
  tool TEXT NOT NULL, command TEXT, cwd TEXT, decision TEXT NOT NULL, reason TEXT, job_id TEXT, exit_status TEXT, duration_ms INTEGER,
  bytes INTEGER, parent_job_id TEXT, approval_id TEXT)`;

/** Writes the rows (idempotent: a row sent again is skipped); returns how many were new. `columns`: the log's, after `id`. */
export function importLegacyRows(sql: SqlStorage, columns: string, rows: readonly AuditRow[]): number {
  if (rows.length === 0) return 0;
  sql.exec(LEGACY_TABLE);
  let n = 0;
  for (const r of rows) {
    const w = sql.exec(
      `INSERT INTO audit (id, ${columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id`,
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
