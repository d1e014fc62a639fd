/**
 * Authentication through the real gateway (`wrangler dev`): every way a bearer token is refused,
 * the challenge headers, revocation, scopes, and the discovery documents. Protected path:
 * GET /admin/v1/tokens (admin scope).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { errorOf, forge, get, otherKey, unsigned } from './forge.ts';
import { OAUTH_SCOPES } from '../../src/contracts/scopes.ts';

let gw: Gateway;
const PATH = '/admin/v1/tokens';
const now = () => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  gw = await startGateway();
});
afterAll(async () => {
  await gw?.stop();
});

async function expect401(token: string | undefined, message: RegExp, headers: Record<string, string> = {}) {
  const r = await get(gw, PATH, token, headers);
  expect(r.status).toBe(401);
  const www = r.headers.get('WWW-Authenticate') ?? '';
  expect(www).toContain(`resource_metadata="${gw.url}/.well-known/oauth-protected-resource/mcp"`);
  if (token !== undefined) expect(www).toContain('error="invalid_token"');
  const e = await errorOf(r);
  expect(e.code).toBe('unauthenticated');
  expect(e.message).toMatch(message);
  return { r, www, e };
}

describe('accepted tokens', () => {
  it('accepts a Gatehouse-issued ES256 token with the admin scope', async () => {
    const r = await get(gw, PATH, await gw.token({ team: 'acme', scopes: ['admin'] }));
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ tokens: [] });
  });

  it('accepts scopes given as an `scp` array', async () => {
    const r = await get(gw, PATH, await forge(gw, { scope: undefined, scp: ['admin'] }, { omit: ['scope'] }));
    expect(r.status).toBe(200);
  });

  it('tolerates a little clock skew on exp', async () => {
    const r = await get(gw, PATH, await forge(gw, { exp: now() - 5, iat: now() - 600 }));
    expect(r.status).toBe(200);
  });

  it('accepts a case-insensitive "bearer" scheme', async () => {
    const t = await gw.token({ team: 'acme', scopes: ['admin'] });
    const r = await fetch(`${gw.url}${PATH}`, { headers: { Authorization: `bearer ${t}` } });
    expect(r.status).toBe(200);
  });
});

describe('refused tokens', () => {
  it('asks for a token without error attributes when none is sent', async () => {
    const { www } = await expect401(undefined, /authentication required/);
    expect(www).toBe(`Bearer resource_metadata="${gw.url}/.well-known/oauth-protected-resource/mcp"`);
  });

  it('refuses a malformed token', async () => {
    await expect401('not-a-jwt', /malformed token/);
    await expect401('aaa.bbb.ccc', /malformed token/);
  });

  it('refuses a scheme other than Bearer', async () => {
    const r = await fetch(`${gw.url}${PATH}`, { headers: { Authorization: 'Basic dXNlcjpwYXNz' } });
    expect(r.status).toBe(401);
    expect((await errorOf(r)).message).toMatch(/scheme "Basic" is not supported/);
  });

  it('never accepts alg "none"', async () => {
    await expect401(unsigned(gw), /alg "none"/);
  });

  it('refuses HS256 when no HS secret is configured', async () => {
    await expect401(await forge(gw, {}, { hsSecret: 'x'.repeat(40) }), /"HS256" is not accepted.*no GATEHOUSE_HS_SECRET/);
  });

  it('refuses a token signed by another ES256 key', async () => {
    await expect401(await forge(gw, {}, { key: await otherKey() }), /unknown signing key/);
  });

  it('refuses a token signed by another key that claims the gateway kid', async () => {
    const kid = JSON.parse(gw.signingKey).kid;
    await expect401(await forge(gw, {}, { key: await otherKey(), kid }), /signature verification failed/);
  });

  it('refuses the wrong audience and names the expected one', async () => {
    const { e } = await expect401(await forge(gw, { aud: 'https://elsewhere.example/mcp' }), /wrong audience/);
    expect(e.message).toContain(`expected "${gw.audience}"`);
  });

  it('refuses the wrong issuer and names the expected one', async () => {
    const { e } = await expect401(await forge(gw, { iss: 'https://evil.example' }), /wrong issuer/);
    expect(e.message).toContain(gw.issuer);
  });

  it('refuses an expired token', async () => {
    await expect401(await forge(gw, { iat: now() - 7200, exp: now() - 3600 }), /token expired at \d{4}-/);
  });

  for (const claim of ['exp', 'iat', 'sub', 'jti']) {
    it(`refuses a token without "${claim}"`, async () => {
      await expect401(await forge(gw, {}, { omit: [claim] }), new RegExp(`missing the required "${claim}" claim`));
    });
  }

  it('refuses a token issued in the future', async () => {
    await expect401(await forge(gw, { iat: now() + 3600, exp: now() + 7200 }), /"iat" is in the future/);
  });

  it('refuses a token without a valid team claim', async () => {
    await expect401(await forge(gw, {}, { omit: ['team'] }), /no "team" claim/);
    await expect401(await forge(gw, { team: 'Acme Corp' }), /invalid "team" claim/);
  });

  it('refuses an oversized Authorization header with 431', async () => {
    const r = await get(gw, PATH, 'a'.repeat(9000));
    expect(r.status).toBe(431);
    expect((await errorOf(r)).message).toMatch(/Authorization header is \d+ bytes; the limit is 8192/);
  });

  it('refuses a token in the query string with 400', async () => {
    const t = await gw.token({ team: 'acme', scopes: ['admin'] });
    for (const p of ['access_token', 'token']) {
      const r = await fetch(`${gw.url}${PATH}?${p}=${t}`);
      expect(r.status).toBe(400);
      const e = await errorOf(r);
      expect(e.code).toBe('invalid_argument');
      expect(e.message).toContain('query string');
    }
  });

  it('refuses a revoked token (created and revoked through the admin API)', async () => {
    const admin = await gw.token({ team: 'acme', scopes: ['admin'] });
    const created = await fetch(`${gw.url}/admin/v1/tokens`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${admin}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ subject: 'short-lived', scopes: ['admin'] }),
    });
    expect(created.status).toBe(201);
    const { token, jti } = (await created.json()) as { token: string; jti: string };
    expect((await get(gw, PATH, token)).status).toBe(200);
    const del = await fetch(`${gw.url}/admin/v1/tokens/${jti}`, { method: 'DELETE', headers: { Authorization: `Bearer ${admin}` } });
    expect(del.status).toBe(200);
    await expect401(token, new RegExp(`token ${jti} has been revoked`));
  });

  it('refuses a revoked offline-minted token (jti only in revocations)', async () => {
    const jti = crypto.randomUUID();
    const boot = await gw.token({ team: 'acme', scopes: ['admin'], jti });
    const admin = await gw.token({ team: 'acme', scopes: ['admin'] });
    expect((await get(gw, PATH, boot)).status).toBe(200);
    // Not issued through the admin API: "not found" unless the admin says it is an unrecorded token.
    const unknown = await fetch(`${gw.url}/admin/v1/tokens/${jti}`, { method: 'DELETE', headers: { Authorization: `Bearer ${admin}` } });
    expect(unknown.status).toBe(404);
    expect((await errorOf(unknown)).message).toContain('?unrecorded=true');
    expect((await get(gw, PATH, boot)).status).toBe(200);
    const del = await fetch(`${gw.url}/admin/v1/tokens/${jti}?unrecorded=true`, { method: 'DELETE', headers: { Authorization: `Bearer ${admin}` } });
    expect(del.status).toBe(200);
    await expect401(boot, /has been revoked/);
    // Same jti in another team is not affected: a team can only revoke its own tokens.
    expect((await get(gw, PATH, await gw.token({ team: 'other', scopes: ['admin'], jti }))).status).toBe(200);
  });
});

describe('revocations are keyed by (team, jti)', () => {
  it("another team revoking a jti first changes nothing for the owner's token, and the owner can still revoke it", async () => {
    const devAdmin = await gw.token({ team: 'dev', scopes: ['admin'] });
    const created = await fetch(`${gw.url}/admin/v1/tokens`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${devAdmin}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ subject: 'client', scopes: ['admin'] }),
    });
    const { token, jti } = (await created.json()) as { token: string; jti: string };
    const evil = await gw.token({ team: 'evil', scopes: ['admin'] });
    const plain = await fetch(`${gw.url}/admin/v1/tokens/${jti}`, { method: 'DELETE', headers: { Authorization: `Bearer ${evil}` } });
    expect(plain.status).toBe(404);
    // Even as an "unrecorded" revocation it only lands in evil's own namespace.
    const pre = await fetch(`${gw.url}/admin/v1/tokens/${jti}?unrecorded=true`, { method: 'DELETE', headers: { Authorization: `Bearer ${evil}` } });
    expect(pre.status).toBe(200);
    expect((await get(gw, PATH, token)).status).toBe(200);
    const own = await fetch(`${gw.url}/admin/v1/tokens/${jti}`, { method: 'DELETE', headers: { Authorization: `Bearer ${devAdmin}` } });
    expect(own.status).toBe(200);
    await expect401(token, /has been revoked/);
  });
  it('revoking a jti that does not exist is "not found"', async () => {
    const admin = await gw.token({ team: 'acme', scopes: ['admin'] });
    const r = await fetch(`${gw.url}/admin/v1/tokens/no-such-jti`, { method: 'DELETE', headers: { Authorization: `Bearer ${admin}` } });
    expect(r.status).toBe(404);
    expect((await errorOf(r)).code).toBe('not_found');
  });
});

describe('scopes', () => {
  it('answers 403 insufficient_scope with the challenge naming the needed scope', async () => {
    const r = await get(gw, PATH, await gw.token({ team: 'acme', scopes: ['execute'] }));
    expect(r.status).toBe(403);
    const www = r.headers.get('WWW-Authenticate') ?? '';
    expect(www).toMatch(/^Bearer error="insufficient_scope", scope="admin"/);
    expect(www).toContain(`resource_metadata="${gw.url}/.well-known/oauth-protected-resource/mcp"`);
    const e = await errorOf(r);
    expect(e.code).toBe('insufficient_scope');
    expect(e.message).toContain('"admin"');
  });

  it('an execute token cannot change the policy', async () => {
    const r = await fetch(`${gw.url}/admin/v1/policy`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${await gw.token({ team: 'acme', scopes: ['execute', 'artifacts:read'] })}` },
      body: '{}',
    });
    expect(r.status).toBe(403);
  });
});

describe('discovery', () => {
  it('serves RFC 9728 protected resource metadata', async () => {
    for (const p of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const r = await fetch(`${gw.url}${p}`);
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({
        resource: `${gw.url}/mcp`,
        authorization_servers: [gw.url],
        bearer_methods_supported: ['header'],
        scopes_supported: ['execute', 'artifacts:read'],
        jwks_uri: `${gw.url}/.well-known/jwks.json`,
      });
    }
  });

  it('the 401 names the path-suffixed metadata URL (RFC 9728 §3.1), and that document describes /mcp', async () => {
    const r = await fetch(gw.mcpUrl, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect(r.status).toBe(401);
    const url = /resource_metadata="([^"]+)"/.exec(r.headers.get('WWW-Authenticate') ?? '')?.[1];
    expect(url).toBe(`${gw.url}/.well-known/oauth-protected-resource/mcp`);
    const meta = (await (await fetch(url!)).json()) as { resource: string; scopes_supported: string[] };
    expect(meta.resource).toBe(gw.mcpUrl);
    // Only scopes a client can obtain by OAuth: a client that asks for `admin` or `agent` would never get them.
    expect(meta.scopes_supported).toEqual([...OAUTH_SCOPES]);
    expect(meta.scopes_supported).not.toContain('admin');
    expect(meta.scopes_supported).not.toContain('agent');
    // Another path under the well-known name is no resource of this gateway's.
    expect((await fetch(`${gw.url}/.well-known/oauth-protected-resource/admin`)).status).toBe(404);
  });

  it('publishes the public signing key (never the private part) at jwks.json', async () => {
    const r = await fetch(`${gw.url}/.well-known/jwks.json`);
    const jwks = (await r.json()) as { keys: Record<string, string>[] };
    expect(jwks.keys).toHaveLength(1);
    const priv = JSON.parse(gw.signingKey);
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', x: priv.x, y: priv.y, kid: priv.kid, alg: 'ES256' });
    expect(jwks.keys[0].d).toBeUndefined();
    const t = await gw.token({ team: 'acme', scopes: ['execute'] });
    const v = await jwtVerify(t, createLocalJWKSet(jwks as never), { issuer: gw.issuer, audience: gw.audience });
    expect(v.payload.team).toBe('acme');
  });
});
