/** HS256 tokens from another system, accepted only because a long enough shared secret is configured. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { errorOf, forge, get } from './forge.ts';

const SECRET = 'a-shared-secret-of-more-than-32-bytes!!';
let gw: Gateway;

beforeAll(async () => {
  gw = await startGateway({ vars: { GATEHOUSE_HS_SECRET: SECRET, HS_TEAMS: 'acme', HS_SCOPES: 'execute admin' } });
});
afterAll(async () => {
  await gw?.stop();
});

describe('HS256 with a configured secret', () => {
  it('accepts an HS256 token signed with the secret', async () => {
    const r = await get(gw, '/admin/v1/tokens', await forge(gw, { scope: 'admin' }, { hsSecret: SECRET }));
    expect(r.status).toBe(200);
  });

  it('still accepts ES256 tokens', async () => {
    expect((await get(gw, '/admin/v1/tokens', await gw.token({ team: 'acme', scopes: ['admin'] }))).status).toBe(200);
  });

  it('refuses an HS256 token signed with another secret', async () => {
    const r = await get(gw, '/admin/v1/tokens', await forge(gw, {}, { hsSecret: 'another-secret-that-is-long-enough-too' }));
    expect(r.status).toBe(401);
    expect((await errorOf(r)).message).toMatch(/signature verification failed/);
  });

  it('applies the same claim rules to HS256 tokens (audience)', async () => {
    const r = await get(gw, '/admin/v1/tokens', await forge(gw, { aud: 'https://other/mcp' }, { hsSecret: SECRET }));
    expect(r.status).toBe(401);
    expect((await errorOf(r)).message).toMatch(/wrong audience/);
  });
});
