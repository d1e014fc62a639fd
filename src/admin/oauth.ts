/**
 * Admin: the team's OAuth grants as credentials — listed (client, who consented, scopes, created,
 * last used), revoked one by one, and a client cut off for the team (all its grants end, and it cannot
 * be granted again until unblocked). Every change is audited; an id the team does not have is 404.
 */
import { Hono, type Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { CLIENT_ID_RE, GRANT_ID_RE, OAUTH_TOKEN_PREFIX, blockClient, listGrants, revokeGrantRow, unblockClient } from '../store/oauth-grants.ts';
import { forgetGrants } from '../oauth/grants.ts';
import { apiError } from './http.ts';
import { auditAdmin } from './audit-action.ts';

export const oauthAdminRoutes = new Hono<AppEnv>();

oauthAdminRoutes.get('/grants', async (c) => {
  const p = c.get('principal');
  const grants = (await listGrants(c.env, p.team)).map((g) => ({ ...g, tokenId: `${OAUTH_TOKEN_PREFIX}${g.grantId}` }));
  return c.json({ grants });
});

/** Revokes one grant: its access and refresh tokens stop working on their next request. */
export async function revokeOAuthGrant(c: Context<AppEnv>, grantId: string): Promise<Response> {
  const p = c.get('principal');
  const r = await revokeGrantRow(c.env, p.team, grantId, `revoked by ${p.subject}`);
  await auditAdmin(c, 'admin.oauth_grant_revoke', { command: { grantId }, ok: r.ok, reason: r.ok ? undefined : r.error.message });
  if (!r.ok) return apiError(c, 'not_found', r.error.message);
  await forgetGrants(c.req.raw, c.env, [r.value.key]);
  return c.json({ grantId, tokenId: `${OAUTH_TOKEN_PREFIX}${grantId}`, revokedAt: r.value.grant.revokedAt });
}

oauthAdminRoutes.delete('/grants/:grantId', async (c) => {
  const grantId = c.req.param('grantId');
  if (!GRANT_ID_RE.test(grantId)) return apiError(c, 'invalid_argument', `malformed grant id "${grantId.slice(0, 60)}" (letters, digits, "-" and "_")`);
  return revokeOAuthGrant(c, grantId);
});

function clientIdParam(c: Context<AppEnv>): { ok: true; value: string } | { ok: false; response: Response } {
  const id = c.req.param('clientId') ?? '';
  if (!CLIENT_ID_RE.test(id))
    return { ok: false, response: apiError(c, 'invalid_argument', `malformed client id "${id.slice(0, 60)}" (printable ASCII, URL-encoded in the path)`) };
  return { ok: true, value: id };
}

/** Cuts a client off for the team: every grant of it ends, and consent to it is refused until unblocked. */
oauthAdminRoutes.delete('/clients/:clientId', async (c) => {
  const id = clientIdParam(c);
  if (!id.ok) return id.response;
  const p = c.get('principal');
  const r = await blockClient(c.env, p.team, id.value);
  const reason = r.known ? undefined : `no grant of client "${id.value}" in team "${p.team}"`;
  await auditAdmin(c, 'admin.oauth_client_revoke', { command: { clientId: id.value, grantsEnded: r.ended.map((g) => g.grantId) }, ok: r.known, reason });
  if (!r.known) return apiError(c, 'not_found', `${reason} (see GET /admin/v1/oauth/grants)`);
  await forgetGrants(c.req.raw, c.env, r.ended);
  return c.json({ clientId: id.value, blocked: true, grantsEnded: r.ended.map((g) => g.grantId) });
});

oauthAdminRoutes.delete('/clients/:clientId/block', async (c) => {
  const id = clientIdParam(c);
  if (!id.ok) return id.response;
  const was = await unblockClient(c.env, c.get('principal').team, id.value);
  await auditAdmin(c, 'admin.oauth_client_unblock', { command: { clientId: id.value }, ok: was, reason: was ? undefined : 'not blocked' });
  if (!was) return apiError(c, 'not_found', `client "${id.value}" is not blocked in this team`);
  return c.json({ clientId: id.value, blocked: false });
});
