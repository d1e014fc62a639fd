/**
 * The signed-in session of a person who came through the OpenID Connect sign-in: an encrypted JWT
 * (jose, `dir` + A256GCM, so it is both secret and tamper-evident) in a cookie that lives 8 hours,
 * HttpOnly, SameSite=Lax, scoped to /dashboard and the consent page /authorize (one cookie per path),
 * and Secure except on a loopback development gateway
 * served over http (where a Secure cookie would never come back). The key is derived (HKDF) from the
 * gateway's signing key, so no second secret is needed. A session names the person only: their
 * teams and roles are read from D1 on every request, and so is the stamp that ends all of a
 * person's sessions at once (removal from a team, a lowered role: src/store/members.ts).
 */
import { EncryptJWT, jwtDecrypt, base64url } from 'jose';
import type { Context } from 'hono';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import type { AppEnv } from '../env.ts';
import { sessionEnded, type Identity } from '../store/members.ts';

export const SESSION_COOKIE = 'gh_session';
export const SESSION_PATH = '/dashboard';
/** Where the session cookie goes: the dashboard and the OAuth consent page. */
const SESSION_PATHS = [SESSION_PATH, '/authorize'] as const;
const SESSION_TTL_SECONDS = 8 * 3600;
const MAX_COOKIE_CHARS = 4096;

export interface Session {
  identity: Identity;
  /** The session's CSRF token: every state-changing request carries it (header or form field). */
  csrf: string;
}

const keys = new Map<string, Promise<Uint8Array>>();

/** A 256-bit key for `purpose`, derived from the signing key's private part. */
function derivedKey(signingKey: string, purpose: string): Promise<Uint8Array> {
  const id = `${purpose}\n${signingKey}`;
  let k = keys.get(id);
  if (!k) {
    k = (async () => {
      const jwk = JSON.parse(signingKey) as { d?: string };
      if (!jwk.d) throw new Error('GATEHOUSE_SIGNING_KEY has no private part (d): sessions need it');
      const ikm = await crypto.subtle.importKey('raw', base64url.decode(jwk.d), 'HKDF', false, ['deriveBits']);
      const bits = await crypto.subtle.deriveBits(
        { name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0), info: new TextEncoder().encode(`gatehouse ${purpose}`) },
        ikm,
        256,
      );
      return new Uint8Array(bits);
    })();
    keys.set(id, k);
  }
  return k;
}

/** Seals `claims` for `purpose` (session, sign-in transaction) until `ttlSeconds` from now. */
export async function seal(
  signingKey: string,
  purpose: string,
  claims: Record<string, unknown>,
  ttlSeconds: number,
  now = Math.floor(Date.now() / 1000),
): Promise<string> {
  return new EncryptJWT(claims)
    .setProtectedHeader({ alg: 'dir', enc: 'A256GCM' })
    .setIssuedAt(now)
    .setExpirationTime(now + ttlSeconds)
    .setAudience(`gatehouse:${purpose}`)
    .encrypt(await derivedKey(signingKey, purpose));
}

/** The claims sealed for `purpose`, or null: forged, tampered, expired or for another purpose. */
export async function unseal(signingKey: string, purpose: string, sealed: string): Promise<Record<string, unknown> | null> {
  if (sealed.length > MAX_COOKIE_CHARS) return null;
  try {
    const { payload } = await jwtDecrypt(sealed, await derivedKey(signingKey, purpose), {
      audience: `gatehouse:${purpose}`,
      keyManagementAlgorithms: ['dir'],
      contentEncryptionAlgorithms: ['A256GCM'],
    });
    return payload as Record<string, unknown>;
  } catch {
    return null;
  }
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** Secure, except over plain http on a loopback host (a development gateway). */
export function secureCookies(c: Context<AppEnv>): boolean {
  const u = new URL(c.req.url);
  return !(u.protocol === 'http:' && LOOPBACK.has(u.hostname));
}

export function cookieOptions(c: Context<AppEnv>, path: string, maxAge: number) {
  return { path, httpOnly: true, secure: secureCookies(c), sameSite: 'Lax' as const, maxAge };
}

export async function startSession(c: Context<AppEnv>, identity: Identity): Promise<Session> {
  const csrf = base64url.encode(crypto.getRandomValues(new Uint8Array(24)));
  // The issue time in ms (the JWT's iat is whole seconds): a session ended in the same second stays ended, a later one starts anew.
  const sealed = await seal(c.env.GATEHOUSE_SIGNING_KEY!, 'session', { idn: identity, csrf, iatMs: Date.now() }, SESSION_TTL_SECONDS);
  for (const path of SESSION_PATHS) setCookie(c, SESSION_COOKIE, sealed, cookieOptions(c, path, SESSION_TTL_SECONDS));
  return { identity, csrf };
}

export function endSession(c: Context<AppEnv>): void {
  for (const path of SESSION_PATHS) deleteCookie(c, SESSION_COOKIE, { path, secure: secureCookies(c) });
}

/** The session the request carries, or null (none, one that is not valid, or one that was ended). */
export async function readSession(c: Context<AppEnv>): Promise<Session | null> {
  const raw = getCookie(c, SESSION_COOKIE);
  if (!raw || !c.env.GATEHOUSE_SIGNING_KEY) return null;
  const p = await unseal(c.env.GATEHOUSE_SIGNING_KEY, 'session', raw);
  const idn = p?.idn as Identity | undefined;
  if (!p || typeof p.csrf !== 'string' || !idn || typeof idn.issuer !== 'string' || typeof idn.subject !== 'string') return null;
  const issuedAt = typeof p.iatMs === 'number' ? p.iatMs : Number(p.iat) * 1000;
  if (await sessionEnded(c.env, idn.issuer, idn.subject, issuedAt)) return null;
  return { identity: idn, csrf: p.csrf };
}
