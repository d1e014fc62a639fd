/**
 * The edge's side of the team's audit log (kept in the team's Durable Object: audit-log.ts): every
 * face that records a call — MCP tools, the admin API, OAuth, the dashboard, scripts — writes its
 * row here, and the admin API reads the log here. One DO call each; the shared D1 is not touched.
 */
import type { Env } from '../env.ts';
import type { AuditEntry, AuditFilter, AuditRow } from '../store/audit.ts';
import { teamStub } from './client.ts';
import type { AuditExportPage } from './events.ts';
import type { StorageView } from '../contracts/audit.ts';

/** Records one row in the team's audit log; returns its id (null: a governed job's row that existed). */
export async function recordAudit(env: Env, e: AuditEntry): Promise<number | null> {
  return await teamStub(env, e.team).recordAudit(e);
}

export async function queryAuditLog(env: Env, team: string, f: AuditFilter): Promise<{ entries: AuditRow[]; nextCursor: string | null }> {
  return await teamStub(env, team).queryAudit(f);
}

/** The governed jobs' audit rows by job id: what each job ran, where, and why it was allowed. */
export async function auditRowsOfJobs(env: Env, team: string, jobIds: readonly string[]): Promise<AuditRow[]> {
  if (jobIds.length === 0) return [];
  return await teamStub(env, team).auditRowsOfJobs([...jobIds]);
}

export async function auditExportPage(env: Env, team: string, q: { after: number | null; since: number | null; limit: number }): Promise<AuditExportPage> {
  return await teamStub(env, team).auditExportPage(q);
}

export async function teamStorage(env: Env, team: string): Promise<StorageView> {
  return await teamStub(env, team).storage();
}
