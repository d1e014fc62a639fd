/**
 * A misconfiguration — a short HS256 secret, a [var] the gateway cannot use — refuses every route
 * but /healthz with 500 naming it, instead of half-working.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { errorOf } from './forge.ts';

let shortSecret: Gateway;
let badVar: Gateway;

beforeAll(async () => {
  [shortSecret, badVar] = await Promise.all([
    startGateway({ vars: { GATEHOUSE_HS_SECRET: 'too-short-secret' } }),
    startGateway({ vars: { MAX_BODY_BYTES: '1mb' } }),
  ]);
});
afterAll(async () => {
  await Promise.all([shortSecret?.stop(), badVar?.stop()]);
});

/** Every route but /healthz answers 500 config_error with `message`, even with a valid token. */
async function expectRefused(gw: Gateway, routes: string[][], message: RegExp): Promise<void> {
  const token = await gw.token({ team: 'acme', scopes: ['admin', 'execute'] });
  for (const [method, path] of routes) {
    const r = await fetch(`${gw.url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: method === 'POST' ? '{}' : undefined,
    });
    expect(r.status, `${method} ${path}`).toBe(500);
    const e = await errorOf(r);
    expect(e.code).toBe('config_error');
    expect(e.message).toMatch(message);
  }
}

describe('configGuard', () => {
  it('keeps /healthz up so the deployment is diagnosable', async () => {
    expect((await fetch(`${shortSecret.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${badVar.url}/healthz`)).status).toBe(200);
  });

  it('refuses every other route with 500 naming the problem, even with a valid token', async () => {
    await expectRefused(
      shortSecret,
      [
        ['GET', '/admin/v1/tokens'],
        ['GET', '/.well-known/oauth-protected-resource'],
        ['GET', '/.well-known/jwks.json'],
        ['POST', '/mcp'],
        ['GET', '/agent/v1/connect'],
        ['GET', '/nope'],
      ],
      /GATEHOUSE_HS_SECRET is 16 bytes; HS256 needs at least 32 bytes/,
    );
  });

  it('names a [var] the gateway cannot use, its value and what it allows', async () => {
    await expectRefused(
      badVar,
      [
        ['POST', '/mcp'],
        ['GET', '/admin/v1/tokens'],
        ['GET', '/agent/v1/connect'],
      ],
      /^gateway misconfigured: MAX_BODY_BYTES is "1mb"; allowed: a whole number from 1024 to 100000000 bytes/,
    );
  });
});
