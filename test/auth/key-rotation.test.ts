/**
 * Rotating the signing key refuses no token (src/auth/config.ts): the gateway verifies with the current
 * key and the previous one and publishes both; it signs with the current one only. Hono `app.request()`
 * in Node with the real middleware and JWKS route; the admission query answers from a stand-in D1
 * (nothing is revoked), as in middleware.test.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { decodeProtectedHeader } from 'jose';
import type { AppEnv, Env } from '../../src/env.ts';
import { configGuard, requireAuth, wellKnownRoutes } from '../../src/auth/index.ts';
import { generateSigningKey, mintToken, publicJwk } from '../../src/auth/mint.ts';

const ORIGIN = 'http://gw.test';
const fakeDb = {
  prepare: () => ({ bind: () => ({ first: async () => ({ revoked: 0, version: null, updated_at: null }) }) }),
} as unknown as D1Database;

let oldKey: string;
let newKey: string;

const envWith = (vars: Partial<Env>): Env => ({ DB: fakeDb, GATEHOUSE_ISSUER: ORIGIN, GATEHOUSE_AUDIENCE: `${ORIGIN}/mcp`, ...vars }) as Env;

function app() {
  const a = new Hono<AppEnv>();
  a.use('*', configGuard());
  a.route('/', wellKnownRoutes);
  a.use('/admin/*', requireAuth({ scopes: ['admin'] }));
  a.get('/admin/x', (c) => c.json({ ok: true }));
  return a;
}

const tokenOf = async (key: string) =>
  (
    await mintToken({
      privateJwk: key,
      issuer: ORIGIN,
      audience: `${ORIGIN}/mcp`,
      team: 'acme',
      subject: 'ci',
      scopes: ['admin'],
      ttlSeconds: 600,
      minter: { kind: 'bootstrap' },
    })
  ).token;

const status = async (env: Env, token: string) =>
  (await app().request(new Request(`${ORIGIN}/admin/x`, { headers: { Authorization: `Bearer ${token}` } }), undefined, env)).status;
const kids = async (env: Env) =>
  ((await (await app().request(new Request(`${ORIGIN}/.well-known/jwks.json`), undefined, env)).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);
const kidOf = (key: string) => (JSON.parse(key) as { kid: string }).kid;

beforeAll(async () => {
  oldKey = await generateSigningKey();
  newKey = await generateSigningKey();
});

describe('signing key rotation', () => {
  it('goes through every step without refusing a token of either key until the previous one is retired', async () => {
    const old = await tokenOf(oldKey);
    // Before, and step 1 (the previous key set to the current one): one key, nothing changes.
    for (const env of [envWith({ GATEHOUSE_SIGNING_KEY: oldKey }), envWith({ GATEHOUSE_SIGNING_KEY: oldKey, GATEHOUSE_SIGNING_KEY_PREVIOUS: oldKey })]) {
      expect(await status(env, old)).toBe(200);
      expect(await kids(env)).toEqual([kidOf(oldKey)]);
    }
    // Step 2: the new key signs; both verify and both are published (the previous one as its public half only).
    const both = envWith({ GATEHOUSE_SIGNING_KEY: newKey, GATEHOUSE_SIGNING_KEY_PREVIOUS: oldKey });
    const fresh = await tokenOf(newKey);
    expect(decodeProtectedHeader(fresh).kid).toBe(kidOf(newKey));
    expect([await status(both, old), await status(both, fresh)]).toEqual([200, 200]);
    expect(await kids(both)).toEqual([kidOf(newKey), kidOf(oldKey)]);
    const published = await (await app().request(new Request(`${ORIGIN}/.well-known/jwks.json`), undefined, both)).text();
    expect(published).not.toContain('"d"');
    // The previous key may be given as its public half alone.
    const publicOnly = envWith({ GATEHOUSE_SIGNING_KEY: newKey, GATEHOUSE_SIGNING_KEY_PREVIOUS: JSON.stringify(publicJwk(oldKey)) });
    expect(await status(publicOnly, old)).toBe(200);
    // Step 3: retired. The old key's tokens are refused, naming why.
    const retired = envWith({ GATEHOUSE_SIGNING_KEY: newKey });
    expect(await status(retired, fresh)).toBe(200);
    const r = await app().request(new Request(`${ORIGIN}/admin/x`, { headers: { Authorization: `Bearer ${old}` } }), undefined, retired);
    expect(r.status).toBe(401);
    expect(((await r.json()) as { error: { message: string } }).error.message).toContain('unknown signing key');
  });

  it('refuses a previous key that cannot be told apart from the current one, or one without a current key', async () => {
    const sameKid = JSON.stringify({ ...JSON.parse(newKey), kid: kidOf(oldKey) });
    for (const [vars, message] of [
      [{ GATEHOUSE_SIGNING_KEY: oldKey, GATEHOUSE_SIGNING_KEY_PREVIOUS: sameKid }, 'need different "kid"s'],
      [{ GATEHOUSE_SIGNING_KEY_PREVIOUS: oldKey }, 'GATEHOUSE_SIGNING_KEY_PREVIOUS is set without GATEHOUSE_SIGNING_KEY'],
      [{ GATEHOUSE_SIGNING_KEY: newKey, GATEHOUSE_SIGNING_KEY_PREVIOUS: '{"kty":"RSA"}' }, 'GATEHOUSE_SIGNING_KEY_PREVIOUS must be an EC P-256 JWK'],
    ] as const) {
      const r = await app().request(new Request(`${ORIGIN}/admin/x`), undefined, envWith(vars));
      expect(r.status).toBe(500);
      expect(((await r.json()) as { error: { message: string } }).error.message).toContain(message);
    }
  });
});
