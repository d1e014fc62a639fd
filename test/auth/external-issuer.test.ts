/**
 * Tokens of an external identity provider, trusted through EXTERNAL_JWKS_URL / EXTERNAL_ISSUER /
 * EXTERNAL_AUDIENCE (a loopback JWKS server stands in for the provider). The verifier is chosen by
 * the token's `iss`; Gatehouse-issued tokens keep working next to it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { startJwksServer, type JwksServer } from '../support/jwks-server.ts';
import { errorOf, get } from './forge.ts';

let gw: Gateway;
let idp: JwksServer;
const AUD = 'https://gatehouse.example/mcp';

beforeAll(async () => {
  idp = await startJwksServer({ alg: 'RS256' });
  // This provider is trusted for acme, with admin: granted explicitly (outside issuers get execute + artifacts:read by default).
  gw = await startGateway({
    vars: {
      EXTERNAL_JWKS_URL: idp.jwksUrl,
      EXTERNAL_ISSUER: idp.issuer,
      EXTERNAL_AUDIENCE: AUD,
      EXTERNAL_TEAMS: 'acme',
      EXTERNAL_SCOPES: 'execute artifacts:read admin',
    },
  });
});
afterAll(async () => {
  await gw?.stop();
  await idp?.close();
});

describe('external issuer', () => {
  it('accepts a token of the external issuer (RS256, key from its JWKS)', async () => {
    const t = await idp.sign({ aud: AUD, sub: 'alice@idp', team: 'acme', scope: 'admin' });
    const r = await get(gw, '/admin/v1/whoami', t);
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ team: 'acme', subject: 'alice@idp', scopes: ['admin'], issuer: idp.issuer });
    expect(idp.fetches()).toBeGreaterThan(0);
  });

  it('accepts scopes as an scp array from the provider', async () => {
    const t = await idp.sign({ aud: AUD, sub: 'bob@idp', team: 'acme', scp: ['admin', 'execute'] });
    expect((await get(gw, '/admin/v1/tokens', t)).status).toBe(200);
  });

  it("checks the external token's audience against EXTERNAL_AUDIENCE", async () => {
    const t = await idp.sign({ aud: gw.audience, sub: 'alice@idp', team: 'acme', scope: 'admin' });
    const r = await get(gw, '/admin/v1/tokens', t);
    expect(r.status).toBe(401);
    expect((await errorOf(r)).message).toContain(`wrong audience: expected "${AUD}"`);
  });

  it('refuses a token with an unknown kid for the external issuer', async () => {
    const t = await idp.sign({ aud: AUD, sub: 'alice@idp', team: 'acme', scope: 'admin' }, { kid: 'not-in-jwks' });
    const r = await get(gw, '/admin/v1/tokens', t);
    expect(r.status).toBe(401);
    expect((await errorOf(r)).message).toMatch(/unknown signing key/);
  });

  it('still requires jti and team on external tokens', async () => {
    const noJti = await idp.sign({ aud: AUD, sub: 'a', team: 'acme', scope: 'admin' }, { omit: ['jti'] });
    expect((await errorOf(await get(gw, '/admin/v1/tokens', noJti))).message).toMatch(/missing the required "jti" claim/);
    const noTeam = await idp.sign({ aud: AUD, sub: 'a', scope: 'admin' });
    expect((await errorOf(await get(gw, '/admin/v1/tokens', noTeam))).message).toMatch(/no "team" claim/);
  });

  it('keeps accepting Gatehouse-issued tokens', async () => {
    expect((await get(gw, '/admin/v1/tokens', await gw.token({ team: 'acme', scopes: ['admin'] }))).status).toBe(200);
  });

  it('names both trusted issuers when the issuer is unknown', async () => {
    const other = await startJwksServer({ alg: 'ES256' });
    try {
      const t = await other.sign({ aud: AUD, sub: 'mallory', team: 'acme', scope: 'admin' });
      const r = await get(gw, '/admin/v1/tokens', t);
      expect(r.status).toBe(401);
      const m = (await errorOf(r)).message;
      expect(m).toContain('wrong issuer');
      expect(m).toContain(idp.issuer);
    } finally {
      await other.close();
    }
  });

  it('lists the external issuer as an authorization server in RFC 9728 metadata', async () => {
    const meta = (await (await fetch(`${gw.url}/.well-known/oauth-protected-resource`)).json()) as { authorization_servers: string[] };
    expect(meta.authorization_servers).toEqual([gw.url, idp.issuer]);
  });
});
