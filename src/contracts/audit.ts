/**
 * An audit row as the admin API answers it (`GET /admin/v1/audit`, the export): written by the edge
 * (src/store/audit.ts), read by the CLI (cli/audit.ts).
 */
export interface AuditRow {
  id: number;
  at: number;
  subject: string;
  tokenId: string | null;
  tool: string;
  command: unknown;
  cwd: string | null;
  decision: string;
  reason: string | null;
  jobId: string | null;
  exitStatus: string | null;
  durationMs: number | null;
  bytes: number | null;
  parentJobId: string | null;
  approvalId: string | null;
}

/** What an admin sees of the team's storage and what retention drops next (`GET /admin/v1/audit/storage`, the CLI, the dashboard). */
export interface StorageView {
  bytes: number;
  maxBytes: number;
  auditDays: number;
  oldestAuditAt: number | null;
  /** When the oldest audit rows are due (exported, then dropped). */
  nextDropAt: number | null;
  exported: { batches: number; rows: number; lastId: number | null };
  lastError: string | null;
}
