/** A short HS256 secret is a misconfiguration: every route but /healthz answers 500 naming it. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { errorOf } from './forge.ts';

let gw: Gateway;

beforeAll(async () => {
  gw = await startGateway({ vars: { GATEHOUSE_HS_SECRET: 'too-short-secret' } });
});
afterAll(async () => {
  await gw?.stop();
});

describe('configGuard', () => {
  it('keeps /healthz up so the deployment is diagnosable', async () => {
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });

  it('refuses every other route with 500 naming the problem, even with a valid token', async () => {
    const token = await gw.token({ team: 'acme', scopes: ['admin', 'execute'] });
    for (const [method, path] of [
      ['GET', '/admin/v1/tokens'],
      ['GET', '/.well-known/oauth-protected-resource'],
      ['GET', '/.well-known/jwks.json'],
      ['POST', '/mcp'],
      ['GET', '/agent/v1/connect'],
      ['GET', '/nope'],
    ]) {
      const r = await fetch(`${gw.url}${path}`, {
        method,
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: method === 'POST' ? '{}' : undefined,
      });
      expect(r.status, `${method} ${path}`).toBe(500);
      const e = await errorOf(r);
      expect(e.code).toBe('config_error');
      expect(e.message).toMatch(/GATEHOUSE_HS_SECRET is 16 bytes; HS256 needs at least 32 bytes/);
    }
  });
});
