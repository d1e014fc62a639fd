/**
 * Audit log: one D1 row per tool call — allowed, denied or failed.
 * (Owner: auth/admin work; this first version only inserts.)
 */
export interface AuditEntry {
  team: string;
  subject: string;
  tokenId?: string;
  tool: string;
  /** argv, shell string or runtime request; secrets are redacted before storage. */
  command?: unknown;
  cwd?: string;
  decision: 'allowed' | 'denied' | 'failed';
  reason?: string;
  jobId?: string;
  exitStatus?: string;
  durationMs?: number;
  bytes?: number;
}

export async function writeAudit(db: D1Database, e: AuditEntry): Promise<void> {
  await db
    .prepare(
      `INSERT INTO audit (at, team, subject, token_id, tool, command, cwd, decision, reason, job_id, exit_status, duration_ms, bytes)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .bind(
      Date.now(), e.team, e.subject, e.tokenId ?? null, e.tool,
      e.command === undefined ? null : JSON.stringify(e.command), e.cwd ?? null, e.decision, e.reason ?? null,
      e.jobId ?? null, e.exitStatus ?? null, e.durationMs ?? null, e.bytes ?? null,
    )
    .run();
}
