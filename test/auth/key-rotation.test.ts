/**
 * Rotating the signing key refuses no token (src/auth/config.ts): the gateway verifies with its signing
 * key and the verify-only key (the next one, then the previous one) and publishes both; it signs with one. Hono `app.request()`
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
/** The teams' objects as admission needs them (nothing revoked, no stored policy, not suspended); e2e tests run the real ones. */
const fakeTeams = {
  idFromName: (team: string) => team,
  get: () => ({ admit: async () => ({ revoked: false, policy: { version: null, updatedAt: null }, suspended: null }) }),
} as unknown as Env['TEAM_DISPATCHER'];

let oldKey: string;
let newKey: string;

const envWith = (vars: Partial<Env>): Env => ({ TEAM_DISPATCHER: fakeTeams, GATEHOUSE_ISSUER: ORIGIN, GATEHOUSE_AUDIENCE: `${ORIGIN}/mcp`, ...vars }) as Env;

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
  it('goes through every step, with instances of two versions serving at once, without refusing a token of either key until the old one is retired', async () => {
    const old = await tokenOf(oldKey);
    const fresh = await tokenOf(newKey);
    expect(decodeProtectedHeader(fresh).kid).toBe(kidOf(newKey));
    const before = envWith({ GATEHOUSE_SIGNING_KEY: oldKey });
    expect(await status(before, old)).toBe(200);
    expect(await kids(before)).toEqual([kidOf(oldKey)]);
    // Step 1: every instance trusts the new key (public half only is enough) before any signs with it.
    const step1 = envWith({ GATEHOUSE_SIGNING_KEY: oldKey, GATEHOUSE_VERIFY_KEY: JSON.stringify(publicJwk(newKey)) });
    // Step 2, one version: signs with the new key, still verifies the old one.
    const step2 = envWith({ GATEHOUSE_SIGNING_KEY: newKey, GATEHOUSE_VERIFY_KEY: JSON.stringify(publicJwk(oldKey)) });
    // While instances of the old and the new version serve side by side, a token of either key passes either.
    for (const env of [step1, step2]) expect([await status(env, old), await status(env, fresh)]).toEqual([200, 200]);
    expect(await kids(step1)).toEqual([kidOf(oldKey), kidOf(newKey)]);
    expect(await kids(step2)).toEqual([kidOf(newKey), kidOf(oldKey)]);
    const published = await (await app().request(new Request(`${ORIGIN}/.well-known/jwks.json`), undefined, step2)).text();
    expect(published).not.toContain('"d"');
    // The same key as both is one key.
    expect(await kids(envWith({ GATEHOUSE_SIGNING_KEY: oldKey, GATEHOUSE_VERIFY_KEY: oldKey }))).toEqual([kidOf(oldKey)]);
    // Step 3: retired. The old key's tokens are refused, naming why.
    const retired = envWith({ GATEHOUSE_SIGNING_KEY: newKey });
    expect(await status(retired, fresh)).toBe(200);
    const r = await app().request(new Request(`${ORIGIN}/admin/x`, { headers: { Authorization: `Bearer ${old}` } }), undefined, retired);
    expect(r.status).toBe(401);
    expect(((await r.json()) as { error: { message: string } }).error.message).toContain('unknown signing key');
  });

  it('refuses a verify key that cannot be told apart from the signing key, or one without a signing key', async () => {
    const sameKid = JSON.stringify({ ...JSON.parse(newKey), kid: kidOf(oldKey) });
    for (const [vars, message] of [
      [{ GATEHOUSE_SIGNING_KEY: oldKey, GATEHOUSE_VERIFY_KEY: sameKid }, 'need different "kid"s'],
      [{ GATEHOUSE_VERIFY_KEY: oldKey }, 'GATEHOUSE_VERIFY_KEY is set without GATEHOUSE_SIGNING_KEY'],
      [{ GATEHOUSE_SIGNING_KEY: newKey, GATEHOUSE_VERIFY_KEY: '{"kty":"RSA"}' }, 'GATEHOUSE_VERIFY_KEY must be an EC P-256 JWK'],
    ] as const) {
      const r = await app().request(new Request(`${ORIGIN}/admin/x`), undefined, envWith(vars));
      expect(r.status).toBe(500);
      expect(((await r.json()) as { error: { message: string } }).error.message).toContain(message);
    }
  });
});
