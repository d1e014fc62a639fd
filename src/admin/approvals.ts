/**
 * Admin: the team's approvals of `ask` decisions. List them, look at one, approve or deny a
 * pending one. Every decision leaves an audit row carrying the approval id, so the ask, the
 * decision and the run that used it read as one story (GET /admin/v1/audit?approval=ID).
 */
import { Hono, type Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { APPROVAL_ID_PATTERN, ApprovalDecisionBody, ApprovalStatus } from '../contracts/approvals.ts';
import { describeIssues } from '../contracts/errors.ts';
import { teamPolicyOf } from '../store/policy-cache.ts';
import { approvalView } from '../approval/record.ts';
import { decideApproval, getApproval, listApprovals } from '../dispatch/team-records-client.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { apiError, readJson } from './http.ts';

export const approvalRoutes = new Hono<AppEnv>();

const LIST_PARAMS = ['status', 'limit'];

approvalRoutes.get('/', async (c) => {
  const q = new URL(c.req.url).searchParams;
  for (const k of q.keys())
    if (!LIST_PARAMS.includes(k)) return apiError(c, 'invalid_argument', `unknown query parameter "${k}"; allowed: ${LIST_PARAMS.join(', ')}`);
  const status = q.get('status');
  if (status !== null && !ApprovalStatus.safeParse(status).success) {
    return apiError(c, 'invalid_argument', `status must be one of ${ApprovalStatus.options.join(', ')}, got "${status.slice(0, 40)}"`);
  }
  const limit = q.get('limit');
  if (limit !== null && (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > 200)) {
    return apiError(c, 'invalid_argument', `limit must be an integer from 1 to 200, got "${limit.slice(0, 40)}"`);
  }
  const now = Date.now();
  const rows = await listApprovals(c.env, c.get('principal').team, {
    status: (status ?? undefined) as ApprovalStatus | undefined,
    limit: limit === null ? 50 : Number(limit),
    now,
  });
  return c.json({ approvals: rows.map((r) => approvalView(r, now)) });
});

approvalRoutes.get('/:id', async (c) => {
  const id = c.req.param('id');
  if (!APPROVAL_ID_PATTERN.test(id)) return malformed(c, id);
  const row = await getApproval(c.env, c.get('principal').team, id);
  if (!row) return apiError(c, 'not_found', `approval "${id}" not found in this team`);
  return c.json({ approval: approvalView(row, Date.now()) });
});

approvalRoutes.post('/:id/approve', (c) => decide(c, true));
approvalRoutes.post('/:id/deny', (c) => decide(c, false));

async function decide(c: Context<AppEnv>, approve: boolean): Promise<Response> {
  const p = c.get('principal');
  const id = c.req.param('id') ?? '';
  if (!APPROVAL_ID_PATTERN.test(id)) return malformed(c, id);
  let note: string | undefined;
  if ((await c.req.raw.clone().text()).trim() !== '') {
    const body = await readJson(c);
    if (!body.ok) return body.response;
    const parsed = ApprovalDecisionBody.safeParse(body.value);
    if (!parsed.success) return apiError(c, 'invalid_argument', `${describeIssues(parsed.error.issues)} (the body is optional: {"note": "why"})`);
    note = parsed.data.note;
  }
  const { policy } = await teamPolicyOf(c.env, p);
  const r = await decideApproval(c.env, p.team, id, { approve, by: p.subject, note, ttlMs: policy.approvals.ttlSeconds * 1000, now: Date.now() });
  await recordAudit(c.env, {
    team: p.team,
    subject: p.subject,
    tokenId: p.tokenId,
    tool: approve ? 'admin.approval_approve' : 'admin.approval_deny',
    command: r.ok ? { approval_id: id, request: r.row.summary, asked_by: r.row.subject } : { approval_id: id },
    decision: r.ok ? 'allowed' : 'failed',
    reason: r.ok ? `${approve ? 'approved' : 'denied'} by ${p.subject}${note ? `: ${note}` : ''}` : `${r.refusal.code}: ${r.refusal.message}`,
    approvalId: id,
  });
  if (!r.ok)
    return apiError(
      c,
      r.refusal.code === 'approval_not_found' ? 'not_found' : 'invalid_argument',
      r.refusal.message,
      r.refusal.code === 'approval_not_found' ? 404 : 409,
    );
  return c.json({ approval: approvalView(r.row, Date.now()) });
}

function malformed(c: Context<AppEnv>, id: string): Response {
  return apiError(
    c,
    'invalid_argument',
    `malformed approval id "${id.slice(0, 60)}": an approval id looks like "ap_" followed by 22 letters, digits, "_" or "-"`,
  );
}
