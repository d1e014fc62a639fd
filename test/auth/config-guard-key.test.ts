/** An unparsable GATEHOUSE_SIGNING_KEY is a misconfiguration: 500 naming it, /healthz still up. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { errorOf } from './forge.ts';

let gw: Gateway;

beforeAll(async () => {
  gw = await startGateway({ vars: { GATEHOUSE_SIGNING_KEY: '{"kty":"EC","crv":"P-256"' } });
});
afterAll(async () => {
  await gw?.stop();
});

describe('configGuard and the signing key', () => {
  it('answers 500 config_error naming GATEHOUSE_SIGNING_KEY on every route but /healthz', async () => {
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
    for (const path of ['/admin/v1/tokens', '/.well-known/jwks.json', '/mcp']) {
      const r = await fetch(`${gw.url}${path}`);
      expect(r.status, path).toBe(500);
      const e = await errorOf(r);
      expect(e.code).toBe('config_error');
      expect(e.message).toContain('GATEHOUSE_SIGNING_KEY is not valid JSON');
    }
  });
});
