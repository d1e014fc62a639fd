/**
 * Admin: the team's full audit trail as NDJSON, from a cursor — the batches retention exported to R2
 * before it dropped them, then the rows the team's object still holds — so a SIEM keeps every row
 * whatever the retention. `GET /admin/v1/audit/export?since=…|after=…&limit=…`: one page per call;
 * the `Gatehouse-Next-After` header is where the next page starts and `Gatehouse-Export-Complete`
 * says whether this page reached the newest row. `GET /admin/v1/audit/storage`: the team's storage
 * and what retention drops next.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { auditExportPage, teamStorage } from '../dispatch/audit-client.ts';
import { readAuditBatch, toNdjson } from '../store/audit-export.ts';
import type { AuditRow } from '../store/audit.ts';
import { apiError } from './http.ts';

export const auditExportRoutes = new Hono<AppEnv>();

const AUDIT_EXPORT_MAX_LIMIT = 10_000;
const AUDIT_EXPORT_DEFAULT_LIMIT = 5000;
const ALLOWED = ['after', 'since', 'limit'];

function parseTime(s: string): number | null {
  if (/^\d{1,15}$/.test(s)) return Number(s);
  const t = Date.parse(s);
  return /^\d{4}-\d{2}-\d{2}/.test(s) && Number.isFinite(t) ? t : null;
}

auditExportRoutes.get('/export', async (c) => {
  const q = new URL(c.req.url).searchParams;
  for (const k of q.keys())
    if (!ALLOWED.includes(k)) return apiError(c, 'invalid_argument', `unknown query parameter "${k.slice(0, 40)}"; allowed: ${ALLOWED.join(', ')}`);
  const afterRaw = q.get('after');
  const sinceRaw = q.get('since');
  const limitRaw = q.get('limit');
  if (afterRaw !== null && sinceRaw !== null)
    return apiError(c, 'invalid_argument', 'pass either after (a cursor from Gatehouse-Next-After) or since (a time), not both');
  if (afterRaw !== null && !/^\d{1,16}$/.test(afterRaw)) {
    return apiError(c, 'invalid_argument', `after must be the Gatehouse-Next-After value of a previous page (digits), got "${afterRaw.slice(0, 40)}"`);
  }
  const since = sinceRaw === null ? null : parseTime(sinceRaw);
  if (sinceRaw !== null && since === null) {
    return apiError(c, 'invalid_argument', `since must be milliseconds since the epoch or an ISO 8601 date, got "${sinceRaw.slice(0, 40)}"`);
  }
  if (limitRaw !== null && (!/^\d+$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > AUDIT_EXPORT_MAX_LIMIT)) {
    return apiError(c, 'invalid_argument', `limit must be an integer from 1 to ${AUDIT_EXPORT_MAX_LIMIT}, got "${limitRaw.slice(0, 40)}"`);
  }
  const limit = limitRaw === null ? AUDIT_EXPORT_DEFAULT_LIMIT : Number(limitRaw);
  const team = c.get('principal').team;
  const page = await auditExportPage(c.env, team, { after: afterRaw === null ? null : Number(afterRaw), since, limit });
  let rows: AuditRow[] = [];
  let complete = false;
  if (page.batches.length) {
    for (const b of page.batches) {
      const batch = await readAuditBatch(c.env, b.key);
      if (batch === null) {
        return apiError(
          c,
          'upstream_error',
          `the exported batch of rows ${b.firstId}–${b.lastId} is missing from R2 (${b.key}); continue after it with after=${b.lastId}`,
        );
      }
      rows.push(...batch.filter((r) => r.id > page.after && (since === null || r.at >= since)));
      if (rows.length >= limit) break;
    }
    rows = rows.slice(0, limit);
  } else {
    rows = page.rows;
    complete = rows.length < limit;
  }
  const next = rows.length ? rows[rows.length - 1].id : page.after;
  return c.body(toNdjson(rows), 200, {
    'Content-Type': 'application/x-ndjson',
    'Gatehouse-Next-After': String(next),
    'Gatehouse-Export-Complete': String(complete),
  });
});

auditExportRoutes.get('/storage', async (c) => c.json(await teamStorage(c.env, c.get('principal').team)));
