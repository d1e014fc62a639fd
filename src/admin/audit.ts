/** Admin: query the team's audit log (kept in the team's Durable Object), newest first, with filters and an opaque cursor. */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { AUDIT_MAX_LIMIT, decodeCursor, type AuditFilter } from '../store/audit.ts';
import { AUDIT_DECISIONS, AUDIT_TOOLS } from '../contracts/audit.ts';
import { queryAuditLog } from '../dispatch/audit-client.ts';
import { apiError } from './http.ts';
import { teamConnections } from '../dispatch/team-records-client.ts';

export const auditRoutes = new Hono<AppEnv>();

const ALLOWED_PARAMS = ['limit', 'cursor', 'decision', 'tool', 'subject', 'since', 'until', 'approval'];

/** ms since the epoch, or an ISO 8601 date. */
function parseTime(s: string): number | null {
  if (/^\d{1,15}$/.test(s)) return Number(s);
  const t = Date.parse(s);
  return /^\d{4}-\d{2}-\d{2}/.test(s) && Number.isFinite(t) ? t : null;
}

function parseAuditQuery(q: URLSearchParams): { ok: true; value: AuditFilter } | { ok: false; message: string } {
  for (const k of q.keys()) {
    if (!ALLOWED_PARAMS.includes(k)) return { ok: false, message: `unknown query parameter "${k}"; allowed: ${ALLOWED_PARAMS.join(', ')}` };
  }
  const f: AuditFilter = {};
  const limit = q.get('limit');
  if (limit !== null) {
    if (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > AUDIT_MAX_LIMIT) {
      return { ok: false, message: `limit must be an integer from 1 to ${AUDIT_MAX_LIMIT}, got "${limit}"` };
    }
    f.limit = Number(limit);
  }
  const cursor = q.get('cursor');
  if (cursor !== null && cursor !== '') {
    if (decodeCursor(cursor) === null) return { ok: false, message: 'cursor is not valid; pass the nextCursor of a previous page' };
    f.cursor = cursor;
  }
  const decision = q.get('decision');
  if (decision !== null) {
    if (!(AUDIT_DECISIONS as readonly string[]).includes(decision)) {
      return { ok: false, message: `decision must be one of ${AUDIT_DECISIONS.join(', ')}, got "${decision}"` };
    }
    f.decision = decision;
  }
  const tool = q.get('tool');
  if (tool !== null) {
    if (!(AUDIT_TOOLS as readonly string[]).includes(tool)) return { ok: false, message: `tool must be one of ${AUDIT_TOOLS.join(', ')}, got "${tool}"` };
    f.tool = tool;
  }
  const subject = q.get('subject');
  if (subject !== null) f.subject = subject;
  const approval = q.get('approval');
  if (approval !== null) {
    if (!/^ap_[A-Za-z0-9_-]{1,64}$/.test(approval))
      return { ok: false, message: `approval must be an approval id like "ap_…", got "${approval.slice(0, 70)}"` };
    f.approvalId = approval;
  }
  for (const k of ['since', 'until'] as const) {
    const v = q.get(k);
    if (v === null) continue;
    const t = parseTime(v);
    if (t === null) return { ok: false, message: `${k} must be milliseconds since the epoch or an ISO 8601 date, got "${v}"` };
    f[k] = t;
  }
  return { ok: true, value: f };
}

auditRoutes.get('/', async (c) => {
  const f = parseAuditQuery(new URL(c.req.url).searchParams);
  if (!f.ok) return apiError(c, 'invalid_argument', f.message);
  return c.json(await queryAuditLog(c.env, c.get('principal').team, f.value));
});

/** The team's latest network connections (docs/network.md), newest first: `?refused=1` for refused ones only, `?limit=` up to 200. */
auditRoutes.get('/egress', async (c) => {
  const q = new URL(c.req.url).searchParams;
  for (const k of q.keys())
    if (k !== 'refused' && k !== 'limit') return apiError(c, 'invalid_argument', `unknown query parameter "${k}"; allowed: refused, limit`);
  const limit = q.get('limit');
  if (limit !== null && (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > 200)) {
    return apiError(c, 'invalid_argument', `limit must be an integer from 1 to 200, got "${limit.slice(0, 40)}"`);
  }
  const refused = q.get('refused');
  if (refused !== null && refused !== '1' && refused !== '0') return apiError(c, 'invalid_argument', `refused must be 1 or 0, got "${refused.slice(0, 40)}"`);
  const connections = await teamConnections(c.env, c.get('principal').team, { limit: limit === null ? 50 : Number(limit), refusedOnly: refused === '1' });
  return c.json({ connections });
});
