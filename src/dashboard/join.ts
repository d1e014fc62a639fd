/**
 * The invitation link's page (/dashboard/join?invitation=…): a signed-in person sees which team and
 * role the link offers and takes it with one form post, which must come from this page (Origin).
 * The link works once, only for the address it was sent to, and only until it expires.
 */
import { Hono, type Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { AppEnv } from '../env.ts';
import { STATUS } from '../admin/http.ts';
import type { GatehouseErrorShape } from '../contracts/errors.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { acceptInvitation, memberSubject, peekInvitation } from '../store/members.ts';
import { crossSiteRefusal, signedInIdentity } from '../members/auth.ts';
import { accessConfig } from '../members/access.ts';
import { oidcConfig } from '../members/oidc.ts';

const JOIN_PATH = '/dashboard/join';
const MAX_SECRET_CHARS = 200;

const esc = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

function htmlPage(c: Context<AppEnv>, title: string, body: string, status: ContentfulStatusCode = 200): Response {
  return c.html(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)} · Gatehouse</title>` +
      `<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="stylesheet" href="/dashboard/assets/style.css"></head>` +
      `<body><main class="join"><h1>${esc(title)}</h1>${body}</main></body></html>`,
    status,
  );
}

const errorPage = (c: Context<AppEnv>, e: GatehouseErrorShape, title = 'Invitation not accepted') =>
  htmlPage(c, title, `<p role="alert" data-code="${esc(e.code)}">${esc(e.message)}</p>`, STATUS[e.code] ?? 400);

/** Why nobody is signed in: how this gateway signs people in, or that it does not. */
function signInNeeded(c: Context<AppEnv>): Response {
  const access = accessConfig(c.env);
  const oidc = oidcConfig(c.env);
  const back = `${JOIN_PATH}?invitation=${encodeURIComponent((c.req.query('invitation') ?? '').slice(0, MAX_SECRET_CHARS))}`;
  const how =
    oidc.ok && oidc.value
      ? `<a href="/dashboard/auth/login?next=${esc(encodeURIComponent(back))}">Sign in with ${esc(oidc.value.issuer.host)}</a> to accept the invitation.`
      : access.ok && access.value
        ? `Open this link through Cloudflare Access (${esc(access.value.teamDomain)}), which signs you in.`
        : 'This gateway has no identity provider configured (docs/members.md: OIDC_ISSUER, or CF_ACCESS_TEAM_DOMAIN and CF_ACCESS_AUD), so nobody can sign in to accept an invitation yet.';
  return htmlPage(c, 'Sign in to accept the invitation', `<p role="alert" data-code="unauthenticated">${how}</p>`, 401);
}

export const joinRoutes = new Hono<AppEnv>();

joinRoutes.get('/', async (c) => {
  const secret = (c.req.query('invitation') ?? '').slice(0, MAX_SECRET_CHARS);
  if (!secret) return errorPage(c, { code: 'invalid_argument', message: 'this page needs the whole invitation link (…/dashboard/join?invitation=…)' });
  const who = await signedInIdentity(c);
  if (!who.ok) return errorPage(c, who.error);
  if (!who.value) return signInNeeded(c);
  const inv = await peekInvitation(c.env, secret);
  if (!inv.ok) return errorPage(c, inv.error);
  const i = inv.value;
  return htmlPage(
    c,
    `Join team ${i.team}`,
    `<p>This invitation makes <strong>${esc(i.email)}</strong> a <strong data-role>${esc(i.role)}</strong> of team <strong data-team>${esc(i.team)}</strong>; it works once, until ${esc(new Date(i.expiresAt).toISOString())}.</p>` +
      `<p>You are signed in as ${esc(who.value.identity.email ?? who.value.identity.subject)}.</p>` +
      `<form method="post" action="${JOIN_PATH}"><input type="hidden" name="invitation" value="${esc(secret)}">` +
      (who.value.csrf ? `<input type="hidden" name="csrf" value="${esc(who.value.csrf)}">` : '') +
      `<button type="submit">Join ${esc(i.team)}</button></form>`,
  );
});

joinRoutes.post('/', async (c) => {
  const who = await signedInIdentity(c);
  if (!who.ok) return errorPage(c, who.error);
  if (!who.value) return signInNeeded(c);
  const form = await c.req.parseBody();
  const csrf = crossSiteRefusal(c, who.value, typeof form.csrf === 'string' ? form.csrf : undefined);
  if (csrf) return errorPage(c, csrf);
  const secret = typeof form.invitation === 'string' ? form.invitation.slice(0, MAX_SECRET_CHARS) : '';
  if (!secret) return errorPage(c, { code: 'invalid_argument', message: 'the form carries no invitation: open the invitation link again' });
  const r = await acceptInvitation(c.env, secret, who.value.identity);
  if (!r.ok) return errorPage(c, r.error);
  const { member, invitation, joined } = r.value;
  await recordAudit(c.env, {
    team: member.team,
    subject: memberSubject(member),
    tokenId: memberSubject(member),
    tool: 'member.join',
    decision: 'allowed',
    command: { invitationId: invitation.invitationId, memberId: member.memberId, email: member.email, role: member.role, issuer: member.issuer, joined },
  });
  const what = joined
    ? `You joined team ${member.team} as ${member.role}.`
    : `You were already a member of team ${member.team} (${member.role}); the invitation is used up.`;
  return htmlPage(
    c,
    `Team ${member.team}`,
    `<p role="status" data-member="${esc(member.memberId)}">${esc(what)}</p><p><a href="/dashboard">Open the dashboard</a></p>`,
  );
});
