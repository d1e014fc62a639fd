/**
 * OAuth-issued access tokens as one more trusted issuer of the gateway: the hook `authenticate`
 * calls before JWT verification. The library's tokens are opaque `user:grant:secret` strings
 * (never JWTs), valid only for this gateway's MCP URL; a valid one becomes the same Principal an
 * API token with the grant's team and scopes would.
 */
import type { Env } from '../env.ts';
import type { Principal } from '../auth/principal.ts';
import { canonicalMcpUrl, gatehouseIssuer } from '../auth/config.ts';
import type { OAuthGrantProps } from './server.ts';
import { OAUTH_TOKEN_PREFIX, grantIdOf } from '../store/oauth-grants.ts';
import { OAUTH_SCOPES } from '../contracts/scopes.ts';

const OAUTH_BEARER = /^Bearer[ ]+([A-Za-z0-9_.~%-]{1,300}:[A-Za-z0-9_-]{1,100}:[A-Za-z0-9_-]{1,200})\s*$/i;
const TEAM_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export type OAuthVerdict = { ok: true; value: Principal } | { ok: false; message: string };

/** null: the request does not carry an OAuth-issued token (the JWT path decides). */
export async function verifyOAuthBearer(req: Request, env: Env): Promise<OAuthVerdict | null> {
  const header = req.headers.get('Authorization');
  const m = header ? OAUTH_BEARER.exec(header) : null;
  if (!m) return null;
  // Loaded only for OAuth-shaped tokens: the library needs the Workers runtime (`cloudflare:` modules),
  // and JWT verification must not depend on it.
  const { authorizationServer, hasOAuthStore } = await import('./server.ts');
  if (!hasOAuthStore(env)) return { ok: false, message: 'OAuth access tokens are not accepted here: the gateway has no OAUTH_KV binding' };
  const resource = canonicalMcpUrl(req, env);
  const v = await authorizationServer(req, env).validateToken<OAuthGrantProps>(resource, m[1], env);
  if (!v)
    return { ok: false, message: 'OAuth access token is invalid, expired or revoked: authorize again (your MCP client refreshes or restarts the sign-in)' };
  const p = v.props;
  if (!p || typeof p.team !== 'string' || !TEAM_RE.test(p.team) || typeof p.subject !== 'string' || !p.subject) {
    return { ok: false, message: 'OAuth grant is malformed (no team or subject): authorize again' };
  }
  // Only what the grant holds and OAuth may grant, whatever else a stored record says.
  const scopes = v.scope.filter((s) => (OAUTH_SCOPES as readonly string[]).includes(s) && p.scopes.includes(s));
  const grantId = grantIdOf(m[1]);
  return { ok: true, value: { team: p.team, subject: p.subject, scopes, tokenId: `${OAUTH_TOKEN_PREFIX}${grantId}`, issuer: gatehouseIssuer(req, env) } };
}
