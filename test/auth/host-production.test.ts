/**
 * A production gateway (issuer and audience configured) serves its configured host only, and
 * builds metadata from configuration, never from the request. Without that configuration a
 * public host is a configuration error, not a fallback to whatever Host the request names.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { productionConfigProblem } from '../../src/auth/config.ts';
import { hostProblem } from '../../src/auth/host-check.ts';
import type { Env } from '../../src/env.ts';

let gw: Gateway;
const PUBLIC = 'gw.example.com';

beforeAll(async () => {
  gw = await startGateway({ vars: { GATEHOUSE_ISSUER: `https://${PUBLIC}`, GATEHOUSE_AUDIENCE: `https://${PUBLIC}/mcp` } });
});
afterAll(async () => {
  await gw?.stop();
});

function get(path: string, host: string, on: Gateway = gw, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const u = new URL(on.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method: 'GET', headers: { ...headers, Host: host } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('a configured gateway', () => {
  it('serves its configured host, with metadata from configuration', async () => {
    const r = await get('/.well-known/oauth-protected-resource', PUBLIC);
    expect(r.status).toBe(200);
    const m = JSON.parse(r.text);
    expect(m.resource).toBe(`https://${PUBLIC}/mcp`);
    expect(m.jwks_uri).toBe(`https://${PUBLIC}/.well-known/jwks.json`);
    expect(m.authorization_servers).toEqual([`https://${PUBLIC}`]);
  });
  it('refuses other hosts, loopback included', async () => {
    expect((await get('/.well-known/oauth-protected-resource', 'evil.example.com')).status).toBe(421);
    expect((await get('/.well-known/oauth-protected-resource', `127.0.0.1:${new URL(gw.url).port}`)).status).toBe(421);
  });
});

describe('a public host without GATEHOUSE_ISSUER / GATEHOUSE_AUDIENCE', () => {
  const req = new Request('https://gw.example.com/mcp');
  it('is a configuration error naming both variables', () => {
    expect(productionConfigProblem(req, {} as Env)).toContain('GATEHOUSE_ISSUER and GATEHOUSE_AUDIENCE must be set');
    expect(productionConfigProblem(req, { GATEHOUSE_ISSUER: 'https://gw.example.com' } as Env)).toContain('GATEHOUSE_AUDIENCE must be set');
    expect(productionConfigProblem(new Request('http://127.0.0.1:8787/mcp'), {} as Env)).toBeNull();
  });
  it('is not served at all: the host check refuses it before anything is derived from it', () => {
    expect(hostProblem(req, {} as Env)).toContain('development gateway');
  });
});

describe('a gateway deployed with GATEHOUSE_ISSUER but without GATEHOUSE_AUDIENCE (the real Worker)', () => {
  let half: Gateway;
  beforeAll(async () => {
    half = await startGateway({ vars: { GATEHOUSE_ISSUER: `https://${PUBLIC}` } });
  });
  afterAll(async () => {
    await half?.stop();
  });
  it('refuses every route on its public host with config_error naming the missing variable, a valid token included', async () => {
    const token = await half.token({ team: 'acme', scopes: ['admin', 'execute'] });
    for (const path of ['/.well-known/oauth-protected-resource', '/mcp', '/admin/v1/policy']) {
      const r = await get(path, PUBLIC, half, { Authorization: `Bearer ${token}` });
      expect(r.status, path).toBe(500);
      expect(JSON.parse(r.text).error).toMatchObject({ code: 'config_error' });
      expect(r.text, path).toContain('GATEHOUSE_AUDIENCE must be set');
      // Nothing derived from the request: no metadata, no challenge naming the Host.
      expect(r.text).not.toContain('jwks_uri');
    }
  });
  it('keeps /healthz up so the deployment is diagnosable', async () => {
    expect((await get('/healthz', PUBLIC, half)).status).toBe(200);
  });
});
