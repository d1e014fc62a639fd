/**
 * Cloudflare Access as the identity provider: Access signs every request it lets through with a
 * JWT in `Cf-Access-Jwt-Assertion`, verified here against the team domain's keys
 * (`<team domain>/cdn-cgi/access/certs`), the application's audience tag (CF_ACCESS_AUD), RS256
 * and its expiry. The person is then `issuer` = the team domain, `subject` = the Access user id.
 */
import { createRemoteJWKSet, jwtVerify, errors as joseErrors, type JWTVerifyGetKey } from 'jose';
import type { Env } from '../env.ts';
import type { GatehouseErrorShape, Result } from '../contracts/errors.ts';
import type { Identity } from '../store/members.ts';

export const ACCESS_HEADER = 'Cf-Access-Jwt-Assertion';
const CLOCK_TOLERANCE_S = 30;
const MAX_ASSERTION_BYTES = 8 * 1024;

export interface AccessConfig {
  /** e.g. https://acme.cloudflareaccess.com (the `iss` of Access's tokens). */
  teamDomain: string;
  audience: string;
  certsUrl: string;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** The Access configuration, null when not configured, or what is wrong with it. */
export function accessConfig(env: Env): Result<AccessConfig | null> {
  const domain = env.CF_ACCESS_TEAM_DOMAIN?.trim();
  const audience = env.CF_ACCESS_AUD?.trim();
  if (!domain && !audience) return { ok: true, value: null };
  if (!domain || !audience) {
    return {
      ok: false,
      error: {
        code: 'config_error',
        message: "Cloudflare Access needs both CF_ACCESS_TEAM_DOMAIN (https://<team>.cloudflareaccess.com) and CF_ACCESS_AUD (the application's audience tag)",
      },
    };
  }
  let u: URL;
  try {
    u = new URL(domain.includes('://') ? domain : `https://${domain}`);
  } catch {
    return { ok: false, error: { code: 'config_error', message: `CF_ACCESS_TEAM_DOMAIN "${domain.slice(0, 100)}" is not a host name or URL` } };
  }
  // Plain http only for a loopback stand-in (tests, local development).
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && LOOPBACK.has(u.hostname))) {
    return { ok: false, error: { code: 'config_error', message: `CF_ACCESS_TEAM_DOMAIN must be https (got ${u.protocol.replace(':', '')})` } };
  }
  return { ok: true, value: { teamDomain: u.origin, audience, certsUrl: `${u.origin}/cdn-cgi/access/certs` } };
}

const keySets = new Map<string, JWTVerifyGetKey>();
function keysOf(url: string): JWTVerifyGetKey {
  let k = keySets.get(url);
  if (!k) keySets.set(url, (k = createRemoteJWKSet(new URL(url), { timeoutDuration: 5000, cooldownDuration: 30_000 })));
  return k;
}

const unauthenticated = (message: string): { ok: false; error: GatehouseErrorShape } => ({ ok: false, error: { code: 'unauthenticated', message } });

/** The person an Access assertion names, or why it is not accepted. */
export async function verifyAccessAssertion(cfg: AccessConfig, assertion: string): Promise<Result<Identity>> {
  if (assertion.length > MAX_ASSERTION_BYTES) return unauthenticated(`${ACCESS_HEADER} is longer than ${MAX_ASSERTION_BYTES} bytes`);
  try {
    const { payload } = await jwtVerify(assertion, keysOf(cfg.certsUrl), {
      issuer: cfg.teamDomain,
      audience: cfg.audience,
      algorithms: ['RS256'],
      clockTolerance: CLOCK_TOLERANCE_S,
      requiredClaims: ['exp', 'iat'],
    });
    const sub = typeof payload.sub === 'string' ? payload.sub : '';
    const email = typeof payload.email === 'string' ? payload.email : null;
    // A service token's assertion has no user: automation uses an API token instead.
    if (!sub || !email)
      return unauthenticated(
        'this Cloudflare Access assertion names no person (a service token?): people sign in through Access; automation uses an API token',
      );
    return {
      ok: true,
      value: { issuer: cfg.teamDomain, subject: sub, email, emailVerified: true, name: typeof payload.name === 'string' ? payload.name : null },
    };
  } catch (e) {
    if (e instanceof joseErrors.JWTExpired) return unauthenticated(`the Cloudflare Access assertion expired; sign in through Access again`);
    if (e instanceof joseErrors.JWTClaimValidationFailed)
      return unauthenticated(
        `the Cloudflare Access assertion is not for this application: ${e.message} (expected issuer ${cfg.teamDomain}, audience CF_ACCESS_AUD)`,
      );
    if (e instanceof joseErrors.JOSEError) return unauthenticated(`the Cloudflare Access assertion is not valid: ${e.message}`);
    return { ok: false, error: { code: 'upstream_error', message: `could not check the Cloudflare Access assertion: ${(e as Error).message}` } };
  }
}
