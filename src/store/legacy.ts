/**
 * Reading (and then removing) a team's rows an older deployment kept in the shared D1, for the
 * team's Durable Object to take over (src/dispatch/legacy-import.ts): one page per query, oldest
 * first, so each step fits one invocation's D1 budget and an interrupted move goes on where it stopped.
 */
import type { Env } from '../env.ts';
import { auditRowOf, type AuditRow, type StoredAuditRow } from './audit.ts';

/** The team's D1 audit rows after `afterId`, oldest first. */
export async function legacyAuditPage(env: Env, team: string, afterId: number, limit: number): Promise<AuditRow[]> {
  const r = await env.DB.prepare(
    `SELECT id, at, subject, token_id, tool, command, cwd, decision, reason, job_id, exit_status, duration_ms, bytes, parent_job_id, approval_id
     FROM audit WHERE team = ? AND id > ? ORDER BY id LIMIT ?`,
  )
    .bind(team, afterId, limit)
    .all<StoredAuditRow>();
  return r.results.map(auditRowOf);
}

/**
 * Removes the team's D1 rows the team's object has taken: its audit rows up to `throughId`, and its
 * rows of the jobs index (a copy of what the object itself keeps; nothing reads it any more).
 */
export async function dropLegacyAudit(env: Env, team: string, throughId: number): Promise<void> {
  await env.DB.prepare(`DELETE FROM audit WHERE team = ? AND id <= ?`).bind(team, throughId).run();
}

export async function dropLegacyJobsIndex(env: Env, team: string, limit: number): Promise<number> {
  const r = await env.DB.prepare(`DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs WHERE team = ? LIMIT ?)`).bind(team, limit).run();
  return r.meta.changes ?? 0;
}

/** The team's other per-call tables an older deployment kept in D1, moved as they are (the team's object parses each row). */
export const LEGACY_TABLES = ['approvals', 'tasks', 'egress_connections', 'egress_jobs'] as const;
export type LegacyTable = (typeof LEGACY_TABLES)[number];

/** A page of the team's rows of `table` after `afterRowid`, oldest first, each with its rowid. */
export async function legacyRowsPage(env: Env, table: LegacyTable, team: string, afterRowid: number, limit: number): Promise<Record<string, unknown>[]> {
  const r = await env.DB.prepare(`SELECT rowid AS _rowid, * FROM ${table} WHERE team = ? AND rowid > ? ORDER BY rowid LIMIT ?`)
    .bind(team, afterRowid, limit)
    .all<Record<string, unknown>>();
  return r.results;
}

export async function dropLegacyRows(env: Env, table: LegacyTable, team: string, throughRowid: number): Promise<void> {
  await env.DB.prepare(`DELETE FROM ${table} WHERE team = ? AND rowid <= ?`).bind(team, throughRowid).run();
}
