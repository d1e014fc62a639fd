/** Hand-made tokens for the rejection tests: any claims, any key, any algorithm (even "none"). */
import { SignJWT, base64url, importJWK, type JWTPayload } from 'jose';
import { generateSigningKey } from '../../src/auth/mint.ts';
import type { Gateway } from '../e2e/harness.ts';

export interface ForgeOptions {
  /** Claims removed from the defaults (e.g. ['exp']). */
  omit?: string[];
  /** Private JWK JSON to sign with (default: the gateway's signing key). */
  key?: string;
  /** HS256 with this secret instead of ES256. */
  hsSecret?: string;
  kid?: string;
}

/** A token like the gateway would mint (team acme, execute+admin), with `claims` overriding. */
export async function forge(gw: Gateway, claims: Record<string, unknown> = {}, o: ForgeOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const full: Record<string, unknown> = {
    iss: gw.issuer,
    aud: gw.audience,
    sub: 'forger',
    team: 'acme',
    scope: 'execute admin',
    iat: now,
    exp: now + 600,
    jti: crypto.randomUUID(),
    ...claims,
  };
  for (const k of o.omit ?? []) delete full[k];
  if (o.hsSecret) {
    return new SignJWT(full as JWTPayload).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(o.hsSecret));
  }
  const jwk = JSON.parse(o.key ?? gw.signingKey);
  const key = await importJWK(jwk, 'ES256');
  return new SignJWT(full as JWTPayload).setProtectedHeader({ alg: 'ES256', kid: o.kid ?? jwk.kid, typ: 'JWT' }).sign(key);
}

/** An unsigned token (`alg: none`). */
export function unsigned(gw: Gateway, claims: Record<string, unknown> = {}): string {
  const now = Math.floor(Date.now() / 1000);
  const enc = (v: unknown) => base64url.encode(JSON.stringify(v));
  const payload = {
    iss: gw.issuer,
    aud: gw.audience,
    sub: 'forger',
    team: 'acme',
    scope: 'admin',
    iat: now,
    exp: now + 600,
    jti: crypto.randomUUID(),
    ...claims,
  };
  return `${enc({ alg: 'none', typ: 'JWT' })}.${enc(payload)}.`;
}

export const otherKey = () => generateSigningKey();

/** GET a protected admin path with an optional bearer token. */
export function get(gw: Gateway, path: string, token?: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}${path}`, { headers: { ...(token !== undefined ? { Authorization: `Bearer ${token}` } : {}), ...headers } });
}

export async function errorOf(r: Response): Promise<{ code: string; message: string }> {
  const body = (await r.json()) as { error: { code: string; message: string } };
  return body.error;
}
