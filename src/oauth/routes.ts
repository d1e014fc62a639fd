/**
 * OAuth routes: /authorize (our consent page) and the library's endpoints — RFC 8414 metadata at
 * /.well-known/oauth-authorization-server, token/revocation at /oauth/token, registration at
 * /oauth/register.
 */
import { Hono, type Context } from 'hono';
import { AuthorizationError, CimdFetchError, authorizationErrorRedirect, type AuthRequest } from '@cloudflare/workers-oauth-provider';
import type { AppEnv } from '../env.ts';
import { authenticate } from '../auth/verify.ts';
import { authorizationServer, CODE_REPLAYED_HEADER, hasOAuthStore, REFRESH_TOKEN_TTL_S, TOKEN_PATH, type OAuthGrantProps } from './server.ts';
import { forgetGrants } from './grants.ts';
import { OAUTH_SCOPES } from '../contracts/scopes.ts';
import {
  GRANT_ID_RE,
  grantIdOf,
  isClientBlocked,
  noteCodeExchanged,
  oauthAdmissionOf,
  recordGrant,
  revokeGrantRow,
  teamOfGrant,
} from '../store/oauth-grants.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { consentPage, errorPage, type ConsentView } from './consent.ts';
import { ROLE_SCOPES, crossSiteRefusal, pickMembership, signedInIdentity } from '../members/auth.ts';
import { oidcConfig } from '../members/oidc.ts';
import { memberSubject, membershipsOf } from '../store/members.ts';
import { refuseClientUrl, withClientFetchGuard } from './client-metadata.ts';

export const oauthRoutes = new Hono<AppEnv>();

const notConfigured = (c: Context<AppEnv>) =>
  c.json(
    {
      error: {
        code: 'config_error',
        message: 'OAuth is not configured on this gateway: bind a KV namespace as OAUTH_KV (see docs/operations.md, "OAuth for interactive MCP clients")',
      },
    },
    501,
  );

/** Protocol endpoints: the library answers them (its fetches of client metadata documents checked). */
const protocol = (c: Context<AppEnv>) => {
  const env = c.env;
  if (!hasOAuthStore(env)) return notConfigured(c);
  return withClientFetchGuard(() => authorizationServer(c.req.raw, env).fetch(c.req.raw, env, c.executionCtx as never));
};
oauthRoutes.all('/.well-known/oauth-authorization-server', protocol);
oauthRoutes.all('/.well-known/oauth-authorization-server/*', protocol);
oauthRoutes.post(TOKEN_PATH, async (c) => {
  if (!hasOAuthStore(c.env)) return notConfigured(c);
  const refused = await refreshRefusal(c);
  if (refused) return refused;
  const code = await codeGrantOf(c);
  const res = await protocol(c);
  return code ? noteCodeOutcome(c, code, res) : res;
});
oauthRoutes.all('/oauth/*', protocol);

/**
 * A refresh token of an ended grant mints nothing: its grant is checked against D1 before the library
 * sees the request (the library alone would honour it until its KV cleanup has run).
 */
async function refreshRefusal(c: Context<AppEnv>): Promise<Response | null> {
  let form: FormData;
  try {
    form = await c.req.raw.clone().formData();
  } catch {
    return null; // not a form: the library answers invalid_request
  }
  if (form.get('grant_type') !== 'refresh_token') return null;
  const grantId = grantIdOf(String(form.get('refresh_token') ?? ''));
  if (!GRANT_ID_RE.test(grantId)) return null;
  const team = await teamOfGrant(c.env, grantId);
  const admission = team ? await oauthAdmissionOf(c.env, team, grantId) : null;
  if (admission?.ok) return null;
  if (admission?.key) await forgetGrants(c.req.raw, c.env, [admission.key]);
  const description = admission ? admission.message : `OAuth grant ${grantId} is not on record: authorize again`;
  return c.json({ error: 'invalid_grant', error_description: description }, 400, { 'Cache-Control': 'no-store' });
}

/** The grant id of an authorization-code exchange, null for any other token request. */
async function codeGrantOf(c: Context<AppEnv>): Promise<string | null> {
  const form = await c.req.raw
    .clone()
    .formData()
    .catch(() => null);
  if (form?.get('grant_type') !== 'authorization_code') return null;
  const grantId = grantIdOf(String(form.get('code') ?? ''));
  return GRANT_ID_RE.test(grantId) ? grantId : null;
}

/**
 * The grant's row follows what the exchange did: a code exchanged makes it active; a code presented a
 * second time (a replay: someone else may hold it) ends the grant and its tokens, and the row says so.
 */
async function noteCodeOutcome(c: Context<AppEnv>, grantId: string, res: Response): Promise<Response> {
  if (res.ok) {
    await noteCodeExchanged(c.env, grantId);
    return res;
  }
  if (!res.headers.has(CODE_REPLAYED_HEADER)) return res;
  const team = await teamOfGrant(c.env, grantId);
  if (team) await revokeGrantRow(c.env, team, grantId, 'its authorization code was presented a second time (a replay); its tokens were ended');
  const headers = new Headers(res.headers);
  headers.delete(CODE_REPLAYED_HEADER);
  return new Response(res.body, { status: res.status, headers });
}

/** The page's headers: no framing, no script, forms only to us and (after approval) the client's redirect. */
function pageHeaders(c: Context<AppEnv>, redirectUri?: string): void {
  let redirectOrigin = '';
  try {
    if (redirectUri) redirectOrigin = ` ${new URL(redirectUri).origin}`;
  } catch {
    /* a private-use scheme: no origin to add */
  }
  // form-action also governs where the form's POST may redirect: the client's validated redirect URI.
  c.header(
    'Content-Security-Policy',
    `default-src 'none'; style-src 'unsafe-inline'; form-action 'self'${redirectOrigin}; frame-ancestors 'none'; base-uri 'none'`,
  );
  c.header('X-Frame-Options', 'DENY');
  c.header('Cache-Control', 'no-store');
  c.header('Referrer-Policy', 'no-referrer');
  c.header('X-Content-Type-Options', 'nosniff');
}

/** Parses (and so validates) the authorization request from the URL's query, for GET and POST alike. */
async function parse(c: Context<AppEnv>): Promise<{ ok: true; request: AuthRequest } | { ok: false; response: Response }> {
  const asGet = new Request(c.req.url, { method: 'GET', headers: c.req.raw.headers });
  try {
    return {
      ok: true,
      request: await withClientFetchGuard(() =>
        authorizationServer(c.req.raw, c.env)
          .getOAuthApi(c.env as never)
          .parseAuthRequest(asGet),
      ),
    };
  } catch (e) {
    if (e instanceof AuthorizationError && e.redirectTo) return { ok: false, response: c.redirect(e.redirectTo, 302) };
    if (e instanceof AuthorizationError || e instanceof CimdFetchError) {
      pageHeaders(c);
      return { ok: false, response: await c.html(errorPage(refusalMessage(e, new URL(c.req.url).searchParams)), 400) };
    }
    throw e;
  }
}

/** The library's refusal with what the person at the browser needs to know about the client's URLs. */
function refusalMessage(e: AuthorizationError | CimdFetchError, query: URLSearchParams): string {
  if (e instanceof CimdFetchError) return `the app's client metadata document ${e.metadataUrl} cannot be used: ${e.detail}`;
  const clientId = query.get('client_id') ?? '';
  const isUrl = /^[a-z][a-z0-9+.-]*:\/\//i.test(clientId);
  if (e.description === 'Invalid client_id' && isUrl) {
    const refusal = refuseClientUrl(clientId);
    return `client_id ${clientId} is not a registered client nor a usable client metadata document URL${refusal ? `: ${refusal.message}` : ' (an https URL with a path)'}`;
  }
  if (e.description === 'Invalid redirect URI') {
    const where = isUrl ? `the redirect_uris of the client's metadata document ${clientId}` : 'the redirect URIs the client registered';
    return `redirect_uri ${query.get('redirect_uri') ?? '(none)'} is not one of ${where}`;
  }
  return e.description;
}

/** The signed-in person's part of the page: their teams (member form), or where to sign in. */
async function memberView(c: Context<AppEnv>): Promise<Pick<ConsentView, 'member' | 'signInUrl' | 'error'>> {
  const who = await signedInIdentity(c);
  if (who.ok && who.value) {
    const { identity, csrf } = who.value;
    const teams = (await membershipsOf(c.env, identity.issuer, identity.subject)).map((m) => ({ team: m.team, role: m.role }));
    const name = identity.email ?? identity.subject;
    if (teams.length) return { member: { name, teams, csrf } };
    return { error: `${name} is signed in but not a member of any team: ask a team admin for an invitation, or use an admin token` };
  }
  const oidc = oidcConfig(c.env);
  if (oidc.ok && oidc.value) {
    const here = new URL(c.req.url);
    return { signInUrl: `/dashboard/auth/login?next=${encodeURIComponent(here.pathname + here.search)}` };
  }
  return who.ok ? {} : { error: who.error.message };
}

oauthRoutes.get('/authorize', async (c) => {
  if (!hasOAuthStore(c.env)) return notConfigured(c);
  const p = await parse(c);
  if (!p.ok) return p.response;
  const details = await withClientFetchGuard(() =>
    authorizationServer(c.req.raw, c.env)
      .getOAuthApi(c.env as never)
      .describeConsent(p.request),
  );
  pageHeaders(c, p.request.redirectUri);
  return c.html(consentPage({ details, grantable: OAUTH_SCOPES, ...(await memberView(c)) }));
});

oauthRoutes.post('/authorize', async (c) => {
  if (!hasOAuthStore(c.env)) return notConfigured(c);
  const p = await parse(c);
  if (!p.ok) return p.response;
  const request = p.request;
  const api = authorizationServer(c.req.raw, c.env).getOAuthApi(c.env as never);
  const form = await c.req.formData();
  if (form.get('decision') !== 'approve') {
    return c.redirect(authorizationErrorRedirect(request, 'access_denied', 'the team admin denied access'), 302);
  }
  const team = String(form.get('team') ?? '').trim();
  const scopes = form.getAll('scope').map(String);
  const asMember = form.get('as') === 'member';
  const again = async (error: string) => {
    pageHeaders(c, request.redirectUri);
    const view = asMember ? await memberView(c) : {};
    return c.html(
      consentPage({ details: await withClientFetchGuard(() => api.describeConsent(request)), grantable: OAUTH_SCOPES, team, checked: scopes, ...view, error }),
      400,
    );
  };
  const unknown = scopes.filter((s) => !(OAUTH_SCOPES as readonly string[]).includes(s));
  if (unknown.length) return again(`scope ${unknown.join(', ')} cannot be granted to an OAuth client; allowed: ${OAUTH_SCOPES.join(', ')}`);
  if (!scopes.length) return again(`choose at least one scope (${OAUTH_SCOPES.join(', ')})`);
  if (asMember) {
    // A signed-in member grants as themselves: their membership and role in the team they picked.
    const who = await signedInIdentity(c);
    if (!who.ok) return again(who.error.message);
    if (!who.value) return again('you are no longer signed in: sign in again');
    const csrf = crossSiteRefusal(c, who.value, String(form.get('csrf') ?? '') || undefined);
    if (csrf) return again(csrf.message);
    const m = pickMembership(await membershipsOf(c.env, who.value.identity.issuer, who.value.identity.subject), team, who.value.identity);
    if (!m.ok) return again(m.error.message);
    const beyond = scopes.filter((s) => !(ROLE_SCOPES[m.value.role] as string[]).includes(s));
    if (beyond.length) return again(`your role in team "${team}" (${m.value.role}) cannot grant ${beyond.join(', ')}`);
    if (await isClientBlocked(c.env, team, request.clientId)) {
      return again(`this client was revoked for team "${team}"; an admin must unblock it first (DELETE /admin/v1/oauth/clients/<id>/block)`);
    }
    const subject = memberSubject(m.value);
    return grant(c, request, { team, subject, tokenId: subject, propsSubject: subject, scopes });
  }
  // The admin token is checked exactly as the admin API checks it (signature, audience, expiry, revocation, scope).
  const token = String(form.get('admin_token') ?? '').trim();
  const asAdmin = new Request(c.req.url, { headers: { Authorization: `Bearer ${token}` } });
  const who = await authenticate(asAdmin, c.env, { scopes: ['admin'] });
  if (!who.ok) return again(`the admin token was refused: ${who.error.message}`);
  if (who.value.tokenId.startsWith('oauth-')) return again('sign in with an admin API token, not an OAuth access token');
  if (team !== who.value.team) return again(`the admin token is for team "${who.value.team}"; it cannot grant team "${team}"`);
  if (await isClientBlocked(c.env, team, request.clientId)) {
    return again(`this client was revoked for team "${team}"; an admin must unblock it first (DELETE /admin/v1/oauth/clients/<id>/block)`);
  }
  return grant(c, request, { team, subject: who.value.subject, tokenId: who.value.tokenId, propsSubject: `oauth:${who.value.subject}`, scopes });
});

/**
 * Completes a consent: the code for the client, the grant recorded in D1 (admitted by `tokenId`, the
 * admin token or the member who consented) and audited. `propsSubject` is who the client's calls are audited as.
 */
async function grant(
  c: Context<AppEnv>,
  request: AuthRequest,
  g: { team: string; subject: string; tokenId: string; propsSubject: string; scopes: string[] },
): Promise<Response> {
  const api = authorizationServer(c.req.raw, c.env).getOAuthApi(c.env as never);
  const { team, scopes } = g;
  const props: OAuthGrantProps = { team, subject: g.propsSubject, scopes };
  // The library's user id may not contain ':' (it separates token parts).
  const userId = encodeURIComponent(`${team}/${g.subject}`);
  const { redirectTo } = await withClientFetchGuard(() =>
    api.completeAuthorization({
      request,
      userId,
      metadata: { grantedBy: g.subject, tokenId: g.tokenId },
      scope: scopes,
      props,
    }),
  );
  // The grant id in the code is what every later request is admitted by.
  const grantId = grantIdOf(new URL(redirectTo).searchParams.get('code') ?? '');
  const now = Date.now();
  const client = await withClientFetchGuard(() => api.lookupClient(request.clientId)).catch(() => null);
  const replaced = await recordGrant(c.env, {
    grantId,
    team,
    userId,
    clientId: request.clientId,
    clientName: client?.clientName ?? null,
    subject: g.subject,
    consentTokenId: g.tokenId,
    scopes,
    createdAt: now,
    expiresAt: now + REFRESH_TOKEN_TTL_S * 1000,
  });
  await forgetGrants(c.req.raw, c.env, replaced);
  await recordAudit(c.env, {
    team,
    subject: g.subject,
    tokenId: g.tokenId,
    tool: 'oauth.grant_create',
    decision: 'allowed',
    command: { grantId, clientId: request.clientId, clientName: client?.clientName ?? null, scopes, replaced: replaced.map((r) => r.grantId) },
  });
  return c.redirect(redirectTo, 302);
}
