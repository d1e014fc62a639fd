/**
 * A signed-in person's own things in one of their teams, whatever their role: the jobs they ran, the
 * OAuth grants they consented to (what their MCP clients hold), and revoking one of those grants. At
 * /dashboard/me/teams/:team/… (the session cookie's path); the team must be one of theirs, and a
 * change carries the session's CSRF token from this origin. An API token has no "me": it uses the
 * admin API.
 *
 * ```ts
 * dashboardRoutes.route('/me', meRoutes);
 * ```
 */
import { Hono, type MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';
import { apiError } from '../admin/http.ts';
import { rateLimit } from '../edge/rate-limit.ts';
import { crossSiteRefusal, memberPrincipal, pickMembership, signedInIdentity } from '../members/auth.ts';
import { membershipsOf, touchMember } from '../store/members.ts';
import { listJobs } from '../dispatch/client.ts';
import { GRANT_ID_RE, listGrants, revokeGrantRow } from '../store/oauth-grants.ts';
import { forgetGrants } from '../oauth/grants.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { jobCalls } from '../admin/job-calls.ts';

const JOBS_SHOWN = 50;

export const meRoutes = new Hono<AppEnv>();

const signedInMember: MiddlewareHandler<AppEnv> = async (c, next) => {
  const who = await signedInIdentity(c);
  if (!who.ok) return apiError(c, who.error.code, who.error.message);
  if (!who.value) {
    return apiError(c, 'unauthenticated', 'sign in with your identity provider first: this page shows a signed-in person their own jobs and connected clients');
  }
  const csrf = crossSiteRefusal(c, who.value);
  if (csrf) return apiError(c, csrf.code, csrf.message);
  const person = who.value.identity;
  const m = pickMembership(await membershipsOf(c.env, person.issuer, person.subject), c.req.param('team'), person);
  if (!m.ok) return apiError(c, m.error.code, m.error.message);
  c.set('principal', memberPrincipal(m.value));
  c.executionCtx.waitUntil(touchMember(c.env, m.value.memberId).catch(() => undefined));
  await next();
};
meRoutes.use('/teams/:team/*', signedInMember, rateLimit('admin'));

/** My newest jobs in the team (those my clients started, audited under my subject). */
meRoutes.get('/teams/:team/jobs', async (c) => {
  const p = c.get('principal');
  const page = await listJobs(c.env, p.team, { subject: p.subject, limit: JOBS_SHOWN });
  const calls = await jobCalls(
    c.env,
    p.team,
    page.jobs.map((j) => j.job_id),
  );
  return c.json({ jobs: page.jobs.map((j) => ({ ...j, call: calls.get(j.job_id) ?? null })) });
});

/** The OAuth grants I consented to in the team, newest first, ended ones too (with why). */
meRoutes.get('/teams/:team/grants', async (c) => {
  const p = c.get('principal');
  return c.json({ grants: (await listGrants(c.env, p.team)).filter((g) => g.consentTokenId === p.subject) });
});

/** Ends one of my grants: its client's tokens stop working on their next request. */
meRoutes.delete('/teams/:team/grants/:grantId', async (c) => {
  const p = c.get('principal');
  const grantId = c.req.param('grantId');
  if (!GRANT_ID_RE.test(grantId)) return apiError(c, 'invalid_argument', `malformed grant id "${grantId.slice(0, 60)}" (letters, digits, "-" and "_")`);
  // Another person's grant is "not found", as another team's is.
  const mine = (await listGrants(c.env, p.team)).find((g) => g.grantId === grantId && g.consentTokenId === p.subject);
  const r = mine ? await revokeGrantRow(c.env, p.team, grantId, `revoked by ${p.subject}, who consented to it`) : null;
  await recordAudit(c.env, {
    team: p.team,
    subject: p.subject,
    tokenId: p.tokenId,
    tool: 'member.oauth_grant_revoke',
    command: { grantId },
    decision: r?.ok ? 'allowed' : 'failed',
    reason: r?.ok ? undefined : 'not one of your grants',
  });
  if (!r?.ok) return apiError(c, 'not_found', `OAuth grant "${grantId}" is not one of the grants you consented to in team "${p.team}"`);
  await forgetGrants(c.req.raw, c.env, [r.value.key]);
  return c.json({ grantId, revokedAt: r.value.grant.revokedAt });
});

meRoutes.all('*', (c) =>
  apiError(
    c,
    'not_found',
    `no route ${c.req.method} ${new URL(c.req.url).pathname}; a signed-in person's own routes are /dashboard/me/teams/<team>/{jobs,grants,grants/<id>}`,
  ),
);
