/**
 * Sign-in with an upstream OpenID Connect provider (oauth4webapi): discovery of the issuer, the
 * authorization code flow with PKCE (S256), `state` and `nonce`, the ID token checked against the
 * provider's keys (issuer, audience, expiry, nonce). Configured per deployment: OIDC_ISSUER,
 * OIDC_CLIENT_ID and the secret OIDC_CLIENT_SECRET. The sign-in's state, nonce and PKCE verifier
 * travel in a sealed 10-minute cookie on /dashboard/auth only.
 */
import * as oauth from 'oauth4webapi';
import type { Context } from 'hono';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import type { AppEnv, Env } from '../env.ts';
import type { GatehouseErrorShape, Result } from '../contracts/errors.ts';
import type { Identity } from '../store/members.ts';
import { cookieOptions, secureCookies, seal, unseal } from './session.ts';

const AUTH_PATH = '/dashboard/auth';
const CALLBACK_PATH = `${AUTH_PATH}/callback`;
const TX_COOKIE = 'gh_signin';
const TX_TTL_SECONDS = 600;

export interface OidcConfig {
  issuer: URL;
  client: oauth.Client;
  auth: oauth.ClientAuth;
  /** Plain http only for a loopback provider (tests, local development). */
  insecure: boolean;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
const configError = (message: string): { ok: false; error: GatehouseErrorShape } => ({ ok: false, error: { code: 'config_error', message } });

/** The OpenID Connect configuration, null when not configured, or what is wrong with it. */
export function oidcConfig(env: Env): Result<OidcConfig | null> {
  const issuer = env.OIDC_ISSUER?.trim();
  const clientId = env.OIDC_CLIENT_ID?.trim();
  const secret = env.OIDC_CLIENT_SECRET;
  if (!issuer && !clientId) return { ok: true, value: null };
  if (!issuer || !clientId || !secret) return configError('OpenID Connect sign-in needs OIDC_ISSUER, OIDC_CLIENT_ID and the secret OIDC_CLIENT_SECRET');
  let u: URL;
  try {
    u = new URL(issuer);
  } catch {
    return configError(`OIDC_ISSUER "${issuer.slice(0, 100)}" is not a URL`);
  }
  const insecure = u.protocol === 'http:' && LOOPBACK.has(u.hostname);
  if (u.protocol !== 'https:' && !insecure) return configError(`OIDC_ISSUER must be https (got ${u.protocol.replace(':', '')})`);
  return { ok: true, value: { issuer: u, client: { client_id: clientId }, auth: oauth.ClientSecretBasic(secret), insecure } };
}

const servers = new Map<string, Promise<oauth.AuthorizationServer>>();

/** The provider's metadata by discovery, once per isolate (a failed discovery is retried next time). */
function authServer(cfg: OidcConfig): Promise<oauth.AuthorizationServer> {
  let s = servers.get(cfg.issuer.href);
  if (!s) {
    s = oauth
      .discoveryRequest(cfg.issuer, { algorithm: 'oidc', [oauth.allowInsecureRequests]: cfg.insecure, signal: AbortSignal.timeout(10_000) })
      .then((r) => oauth.processDiscoveryResponse(cfg.issuer, r));
    s.catch(() => servers.delete(cfg.issuer.href));
    servers.set(cfg.issuer.href, s);
  }
  return s;
}

const redirectUri = (c: Context<AppEnv>) => `${new URL(c.req.url).origin}${CALLBACK_PATH}`;

/** Only the dashboard or the consent page of this gateway is a place to return to after sign-in. */
const safeNext = (next: string | undefined): string => (next && /^\/(dashboard(\/|\?|#|$)|authorize\?)/.test(next) ? next : '/dashboard');

/** The redirect to the provider's authorization endpoint, with the sign-in's secrets sealed in a cookie. */
export async function beginSignIn(c: Context<AppEnv>, cfg: OidcConfig, next: string): Promise<Response> {
  const as = await authServer(cfg);
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();
  const url = new URL(as.authorization_endpoint!);
  url.search = new URLSearchParams({
    client_id: cfg.client.client_id,
    redirect_uri: redirectUri(c),
    response_type: 'code',
    scope: 'openid email profile',
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  }).toString();
  setCookie(
    c,
    TX_COOKIE,
    await seal(c.env.GATEHOUSE_SIGNING_KEY!, 'signin', { verifier, state, nonce, next: safeNext(next) }, TX_TTL_SECONDS),
    cookieOptions(c, AUTH_PATH, TX_TTL_SECONDS),
  );
  return c.redirect(url.href, 302);
}

const refused = (message: string): { ok: false; error: GatehouseErrorShape } => ({ ok: false, error: { code: 'unauthenticated', message } });

/** The callback: checks state, trades the code (PKCE), checks the ID token and its nonce; the person and where to go. */
export async function finishSignIn(c: Context<AppEnv>, cfg: OidcConfig): Promise<Result<{ identity: Identity; next: string }>> {
  const raw = getCookie(c, TX_COOKIE);
  // The sign-in's secrets are single-use: gone after this callback whatever it brings.
  deleteCookie(c, TX_COOKIE, { path: AUTH_PATH, secure: secureCookies(c) });
  const tx = raw ? await unseal(c.env.GATEHOUSE_SIGNING_KEY!, 'signin', raw) : null;
  if (!tx || typeof tx.state !== 'string' || typeof tx.nonce !== 'string' || typeof tx.verifier !== 'string') {
    return refused('this sign-in has no pending request in this browser (expired after 10 minutes, used already, or started elsewhere): sign in again');
  }
  const as = await authServer(cfg);
  try {
    const params = oauth.validateAuthResponse(as, cfg.client, new URL(c.req.url), tx.state);
    const response = await oauth.authorizationCodeGrantRequest(as, cfg.client, cfg.auth, params, redirectUri(c), tx.verifier, {
      [oauth.allowInsecureRequests]: cfg.insecure,
      signal: AbortSignal.timeout(10_000),
    });
    const result = await oauth.processAuthorizationCodeResponse(as, cfg.client, response, { expectedNonce: tx.nonce, requireIdToken: true });
    const idt = oauth.getValidatedIdTokenClaims(result)!;
    // A provider may keep email and name out of the ID token (OpenID Connect Core 5.4): ask userinfo then.
    let claims: Record<string, unknown> = idt;
    if (typeof idt.email !== 'string' && as.userinfo_endpoint) {
      const info = await oauth.userInfoRequest(as, cfg.client, result.access_token, {
        [oauth.allowInsecureRequests]: cfg.insecure,
        signal: AbortSignal.timeout(10_000),
      });
      claims = { ...(await oauth.processUserInfoResponse(as, cfg.client, idt.sub, info)), ...idt };
    }
    const email = typeof claims.email === 'string' ? claims.email : null;
    return {
      ok: true,
      value: {
        identity: {
          issuer: idt.iss,
          subject: idt.sub,
          email,
          emailVerified: claims.email_verified === true,
          name: typeof claims.name === 'string' ? claims.name : null,
        },
        next: safeNext(typeof tx.next === 'string' ? tx.next : undefined),
      },
    };
  } catch (e) {
    if (e instanceof oauth.AuthorizationResponseError)
      return refused(`the identity provider refused the sign-in: ${e.error}${e.error_description ? ` (${e.error_description})` : ''}`);
    if (e instanceof oauth.ResponseBodyError)
      return refused(`the identity provider refused the code: ${e.error}${e.error_description ? ` (${e.error_description})` : ''}`);
    if (e instanceof oauth.OperationProcessingError) return refused(`the sign-in response is not valid: ${e.message}`);
    return { ok: false, error: { code: 'upstream_error', message: `could not complete the sign-in with ${cfg.issuer.origin}: ${(e as Error).message}` } };
  }
}
