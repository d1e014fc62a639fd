/**
 * requireAuth / configGuard alone (Hono `app.request()` in Node, an in-memory revocation list standing in for the team's object):
 * the fast checks of the middleware contract; the full matrix runs against workerd in auth.test.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import type { AppEnv, Env } from '../../src/env.ts';
import { authenticate, configGuard, requireAuth } from '../../src/auth/index.ts';
import { generateSigningKey, mintToken } from '../../src/auth/mint.ts';

const ORIGIN = 'http://gw.test';
let key: string;
const revoked = new Set<string>();

/**
 * Just enough of the teams' Durable Objects for admission (`src/dispatch/admission.ts`, which the
 * object answers; e2e tests run the real one): revoked?, no stored policy, not suspended.
 */
const fakeTeams = {
  idFromName: (team: string) => team,
  get: (team: string) => ({
    admit: async (jti: string) => ({ revoked: revoked.has(`${team}/${jti}`), policy: { version: null, updatedAt: null }, suspended: null }),
  }),
} as unknown as Env['TEAM_DISPATCHER'];

// A public host: production configuration (issuer and audience) is required there.
const envWith = (extra: Partial<Env> = {}): Env =>
  ({ TEAM_DISPATCHER: fakeTeams, GATEHOUSE_SIGNING_KEY: key, GATEHOUSE_ISSUER: ORIGIN, GATEHOUSE_AUDIENCE: `${ORIGIN}/mcp`, ...extra }) as Env;

function app() {
  const a = new Hono<AppEnv>();
  a.get('/healthz', (c) => c.text('ok'));
  a.use('*', configGuard());
  a.use('/admin/*', requireAuth({ scopes: ['admin'] }));
  a.use('/mcp/*', requireAuth({ anyScope: ['execute', 'artifacts:read'] }));
  a.get('/admin/x', (c) => c.json(c.get('principal')));
  a.get('/mcp/x', (c) => c.json(c.get('principal')));
  return a;
}

const token = async (scopes: string[], o: { team?: string; jti?: string; aud?: string; iss?: string } = {}) =>
  (
    await mintToken({
      minter: { kind: 'bootstrap' },
      privateJwk: key,
      issuer: o.iss ?? ORIGIN,
      audience: o.aud ?? `${ORIGIN}/mcp`,
      team: o.team ?? 'acme',
      subject: 'u',
      scopes,
      ttlSeconds: 600,
      jti: o.jti,
    })
  ).token;

const req = (path: string, t?: string) => new Request(`${ORIGIN}${path}`, { headers: t ? { Authorization: `Bearer ${t}` } : {} });

beforeAll(async () => {
  key = await generateSigningKey();
});

describe('requireAuth', () => {
  it('sets the principal from a valid token', async () => {
    const r = await app().request(req('/admin/x', await token(['admin', 'execute'], { jti: 'j1' })), undefined, envWith());
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ team: 'acme', subject: 'u', scopes: ['admin', 'execute'], tokenId: 'j1', issuer: ORIGIN, minter: { kind: 'bootstrap' } });
  });

  it('anyScope needs one of the scopes; scopes needs all', async () => {
    const a = app();
    expect((await a.request(req('/mcp/x', await token(['artifacts:read'])), undefined, envWith())).status).toBe(200);
    expect((await a.request(req('/mcp/x', await token(['agent'])), undefined, envWith())).status).toBe(403);
    const r = await a.request(req('/admin/x', await token(['execute'])), undefined, envWith());
    expect(r.status).toBe(403);
    expect(r.headers.get('WWW-Authenticate')).toMatch(/^Bearer error="insufficient_scope", scope="admin", /);
  });

  it('checks revocation per team', async () => {
    revoked.add('acme/gone');
    expect((await app().request(req('/admin/x', await token(['admin'], { jti: 'gone' })), undefined, envWith())).status).toBe(401);
    expect((await app().request(req('/admin/x', await token(['admin'], { jti: 'gone', team: 'other' })), undefined, envWith())).status).toBe(200);
  });

  it('uses GATEHOUSE_AUDIENCE as the expected audience when set', async () => {
    const env = envWith({ GATEHOUSE_AUDIENCE: 'https://public.example/mcp' });
    const bad = await app().request(req('/admin/x', await token(['admin'])), undefined, env);
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain('expected "https://public.example/mcp"');
    expect((await app().request(req('/admin/x', await token(['admin'], { aud: 'https://public.example/mcp' })), undefined, env)).status).toBe(200);
  });

  it('never minds a trailing slash on the issuer or the audience, in the configuration or in the token', async () => {
    const slashed = envWith({ GATEHOUSE_ISSUER: `${ORIGIN}/`, GATEHOUSE_AUDIENCE: `${ORIGIN}/mcp/` });
    for (const [env, t] of [
      [slashed, await token(['admin'])],
      [envWith(), await token(['admin'], { iss: `${ORIGIN}/`, aud: `${ORIGIN}/mcp/` })],
      [slashed, await token(['admin'], { iss: `${ORIGIN}/` })],
    ] as const) {
      const r = await app().request(req('/admin/x', t), undefined, env);
      expect(r.status, await r.clone().text()).toBe(200);
    }
    // Another issuer is still another issuer.
    const other = await app().request(req('/admin/x', await token(['admin'], { iss: `${ORIGIN}/tenant` })), undefined, envWith());
    expect(other.status).toBe(401);
  });

  it('refuses to start with an issuer or audience that is not an http(s) URL, naming the var and what it allows', async () => {
    for (const [name, value] of [
      ['GATEHOUSE_ISSUER', 'gw.test'],
      ['GATEHOUSE_AUDIENCE', 'ftp://gw.test/mcp'],
      ['GATEHOUSE_ISSUER', 'https://gw.test/?x=1'],
    ] as const) {
      const r = await app().request(req('/admin/x'), undefined, envWith({ [name]: value }));
      expect(r.status).toBe(500);
      const body = (await r.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('config_error');
      expect(body.error.message).toMatch(
        new RegExp(`^gateway misconfigured: ${name} is "${value.replace(/[?./]/g, '\\$&')}": .+; allowed: an http\\(s\\) URL`),
      );
    }
  });

  it('authenticate() works without Hono (for Durable Object routes)', async () => {
    const ok = await authenticate(req('/anything', await token(['agent'])), envWith(), { scopes: ['agent'] });
    expect(ok.ok && ok.value.team).toBe('acme');
    const no = await authenticate(req('/anything'), envWith(), {});
    expect(!no.ok && no.error.status).toBe(401);
  });
});

describe('configGuard', () => {
  it('refuses everything but /healthz while the configuration is broken', async () => {
    const env = envWith({ GATEHOUSE_HS_SECRET: 'short' });
    expect((await app().request(req('/healthz'), undefined, env)).status).toBe(200);
    const r = await app().request(req('/admin/x', await token(['admin'])), undefined, env);
    expect(r.status).toBe(500);
    expect(await r.json()).toEqual({ error: { code: 'config_error', message: expect.stringContaining('GATEHOUSE_HS_SECRET is 5 bytes') } });
  });

  it('requires EXTERNAL_JWKS_URL and EXTERNAL_ISSUER together', async () => {
    const r = await app().request(req('/admin/x'), undefined, envWith({ EXTERNAL_JWKS_URL: 'http://127.0.0.1:1/jwks.json' }));
    expect(r.status).toBe(500);
    expect(((await r.json()) as { error: { message: string } }).error.message).toContain('must be set together');
  });
});
