/**
 * Per-issuer trust, attacked the way the findings did: an outside issuer (external JWKS, HS256
 * secret) may only speak for the teams it is configured for and grant the scopes it is
 * configured to; external tokens must be access tokens; no token may live longer than the maximum.
 * Host validation (DNS rebinding) is attacked here too, with raw HTTP so the Host header is ours.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { startJwksServer, type JwksServer } from '../support/jwks-server.ts';
import { trustConfig } from '../../src/auth/config.ts';
import type { Env } from '../../src/env.ts';
import { forge } from './forge.ts';

const AUD = 'https://gatehouse.example/mcp';
const SECRET = 'a-shared-secret-of-more-than-32-bytes!!';
let gw: Gateway;
let idp: JwksServer;

beforeAll(async () => {
  idp = await startJwksServer({ alg: 'ES256' });
  gw = await startGateway({
    vars: {
      EXTERNAL_JWKS_URL: idp.jwksUrl,
      EXTERNAL_ISSUER: idp.issuer,
      EXTERNAL_AUDIENCE: AUD,
      EXTERNAL_TEAMS: 'acme',
      GATEHOUSE_HS_SECRET: SECRET,
      HS_TEAMS: 'acme,beta',
    },
  });
});
afterAll(async () => {
  await gw?.stop();
  await idp?.close();
});

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
};

/** POST /mcp initialize with `token`; extra headers (Host, Origin) sent as given. */
function post(
  path: string,
  headers: Record<string, string>,
  body: unknown = INIT,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  const u = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path,
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Content-Length': Buffer.byteLength(data), ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}
function getRaw(
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  const u = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method: 'GET', headers }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end();
  });
}
const bearer = (t: string) => ({ Authorization: `Bearer ${t}` });
const messageOf = (text: string) => (JSON.parse(text) as { error: { message: string } }).error.message;

describe('an external issuer speaks only for its teams, with its scopes, with access tokens', () => {
  it('accepts an access token for a trusted team with a default scope', async () => {
    const t = await idp.sign({ aud: AUD, sub: 'alice@idp', team: 'acme', scope: 'execute' });
    expect((await post('/mcp', bearer(t))).status).toBe(200);
  });
  it('refuses admin (not configured in EXTERNAL_SCOPES)', async () => {
    const r = await post('/mcp', bearer(await idp.sign({ aud: AUD, sub: 'alice@idp', team: 'acme', scope: 'execute admin' })));
    expect(r.status).toBe(401);
    expect(messageOf(r.text)).toContain('may not grant scope "admin"');
  });
  it('refuses agent (not configured)', async () => {
    const r = await post('/mcp', bearer(await idp.sign({ aud: AUD, sub: 'x', team: 'acme', scp: ['agent'] })));
    expect(r.status).toBe(401);
  });
  it('refuses a team it is not trusted for', async () => {
    const r = await post('/mcp', bearer(await idp.sign({ aud: AUD, sub: 'alice@idp', team: 'dev', scope: 'execute' })));
    expect(r.status).toBe(401);
    expect(messageOf(r.text)).toContain('not trusted to speak for team "dev"');
  });
  it('refuses an ID token (typ JWT) and a token without typ', async () => {
    const id = await post('/mcp', bearer(await idp.sign({ aud: AUD, sub: 'alice@idp', team: 'acme', scope: 'execute' }, { typ: 'JWT' })));
    expect(id.status).toBe(401);
    expect(messageOf(id.text)).toContain('send an access token');
  });
  it('accepts typ application/at+jwt (the media-type spelling)', async () => {
    const t = await idp.sign({ aud: AUD, sub: 'alice@idp', team: 'acme', scope: 'execute' }, { typ: 'application/at+jwt' });
    expect((await post('/mcp', bearer(t))).status).toBe(200);
  });
});

describe('the HS256 secret speaks only for HS_TEAMS with HS_SCOPES', () => {
  it('accepts execute for a listed team', async () => {
    expect((await post('/mcp', bearer(await forge(gw, { team: 'beta', scope: 'execute' }, { hsSecret: SECRET })))).status).toBe(200);
  });
  it('refuses admin, and a team not listed', async () => {
    const admin = await post('/mcp', bearer(await forge(gw, { team: 'acme', scope: 'admin' }, { hsSecret: SECRET })));
    expect(admin.status).toBe(401);
    expect(messageOf(admin.text)).toContain('may not grant scope "admin"');
    const other = await post('/mcp', bearer(await forge(gw, { team: 'dev', scope: 'execute' }, { hsSecret: SECRET })));
    expect(other.status).toBe(401);
    expect(messageOf(other.text)).toContain('team "dev"');
  });
});

describe('maximum token lifetime', () => {
  it('refuses exp: 1e20 even when signed with the gateway key', async () => {
    const r = await post('/mcp', bearer(await forge(gw, { exp: 1e20 })));
    expect(r.status).toBe(401);
    expect(messageOf(r.text)).toMatch(/lifetime|too far in the future/);
  });
  it('refuses a two-year token and accepts a one-day token', async () => {
    const now = Math.floor(Date.now() / 1000);
    expect((await post('/mcp', bearer(await forge(gw, { iat: now, exp: now + 2 * 365 * 86400 })))).status).toBe(401);
    expect((await post('/mcp', bearer(await forge(gw, { iat: now, exp: now + 86400 })))).status).toBe(200);
  });
});

describe('trust configuration is checked', () => {
  const base = { GATEHOUSE_SIGNING_KEY: '', EXTERNAL_JWKS_URL: 'http://127.0.0.1:9/jwks.json', EXTERNAL_ISSUER: 'https://idp.example' } as unknown as Env;
  it('an external issuer without EXTERNAL_TEAMS is a configuration error', async () => {
    const r = await trustConfig(base);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toContain('EXTERNAL_TEAMS must list the teams');
  });
  it('an HS secret without HS_TEAMS is a configuration error; unknown scopes are named', async () => {
    const hs = await trustConfig({ GATEHOUSE_HS_SECRET: SECRET } as unknown as Env);
    expect(hs.ok).toBe(false);
    const bad = await trustConfig({ ...base, EXTERNAL_TEAMS: '*', EXTERNAL_SCOPES: 'execute root' } as Env);
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.message).toContain('unknown scope "root"');
  });
});

describe('Host validation (DNS rebinding)', () => {
  const port = () => new URL(gw.url).port;
  it('refuses a foreign Host even with a matching Origin, before auth (4xx)', async () => {
    const evil = `evil.example.com:${port()}`;
    const r = await post('/mcp', { Host: evil, Origin: `http://${evil}`, ...bearer(await gw.token({ team: 'acme', scopes: ['execute'] })) });
    expect(r.status).toBe(421);
    expect(messageOf(r.text)).toContain('Host "evil.example.com');
  });
  it('never echoes an unvalidated Host into metadata or challenges', async () => {
    const evil = `evil.example.com:${port()}`;
    const meta = await getRaw('/.well-known/oauth-protected-resource', { Host: evil });
    expect(meta.status).toBe(421);
    expect(meta.text).not.toContain('"jwks_uri"');
    const challenge = await post('/mcp', { Host: evil });
    expect(challenge.status).toBe(421);
    expect(String(challenge.headers['www-authenticate'] ?? '')).not.toContain('evil');
  });
  it('serves loopback names in development, and builds metadata from them', async () => {
    const local = `localhost:${port()}`;
    const meta = await getRaw('/.well-known/oauth-protected-resource', { Host: local });
    expect(meta.status).toBe(200);
    expect(JSON.parse(meta.text).jwks_uri).toBe(`http://${local}/.well-known/jwks.json`);
    const r = await post('/mcp', { Host: local, Origin: `http://${local}` });
    expect(r.status).toBe(401);
    expect(String(r.headers['www-authenticate'])).toContain(`resource_metadata="http://${local}/.well-known/oauth-protected-resource/mcp"`);
  });
  it("an Origin other than the gateway's own is refused", async () => {
    const r = await post('/mcp', { Origin: 'http://evil.example.com', ...bearer(await gw.token({ team: 'acme', scopes: ['execute'] })) });
    expect(r.status).toBe(403);
  });
});
