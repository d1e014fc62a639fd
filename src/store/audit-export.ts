/**
 * The audit log's export: NDJSON batches in R2, one object per batch of rows the team's object
 * exported before its retention dropped them (src/dispatch/retention.ts). Keys sit under the team's
 * prefix, so a team's deletion removes them with its artifacts; the operator may keep them longer
 * with a bucket lifecycle rule (docs/retention.md).
 */
import type { Env } from '../env.ts';
import type { AuditRow } from './audit.ts';

function auditExportKey(team: string, firstId: number, lastId: number): string {
  return `t/${team}/audit/${String(firstId).padStart(16, '0')}-${String(lastId).padStart(16, '0')}.ndjson`;
}

/** One row per line, oldest first; the rows are already redacted (as stored). */
export function toNdjson(rows: readonly AuditRow[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');
}

/** Writes a batch; returns its key and size. An R2 failure throws: the caller keeps the rows. */
export async function putAuditBatch(env: Env, team: string, rows: readonly AuditRow[]): Promise<{ key: string; bytes: number }> {
  const key = auditExportKey(team, rows[0].id, rows[rows.length - 1].id);
  const body = new TextEncoder().encode(toNdjson(rows));
  await env.ARTIFACTS.put(key, body, { httpMetadata: { contentType: 'application/x-ndjson' } });
  return { key, bytes: body.byteLength };
}

/** The rows of a stored batch, or null when the object is gone (deleted by a lifecycle rule). */
export async function readAuditBatch(env: Env, key: string): Promise<AuditRow[] | null> {
  const o = await env.ARTIFACTS.get(key);
  if (!o) return null;
  return (await o.text())
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as AuditRow);
}
