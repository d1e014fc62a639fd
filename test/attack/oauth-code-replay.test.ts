/**
 * The OAuth grants list tells the truth (src/store/oauth-grants.ts): a consent whose code was never
 * exchanged is pending (never "active"), and a replayed authorization code — someone else may hold it —
 * ends the grant and its tokens, and the list says revoked and why. Real gateway (wrangler dev, local
 * D1 and KV), the MCP SDK's OAuth client, the real consent page.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { TestOAuthProvider } from '../support/oauth-provider.ts';
import { runCli } from '../support/cli.ts';
import { initializeStatus } from '../support/mcp-initialize.ts';

let gw: Gateway;
let admin: string;
const CALLBACK = 'http://127.0.0.1:9/callback';

beforeAll(async () => {
  gw = await startGateway();
  admin = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'acme-admin' });
});
afterAll(async () => {
  await gw?.stop();
});

/** Registers a client and consents with the admin token; returns the provider and the code (not exchanged). */
async function consent(): Promise<{ provider: TestOAuthProvider; code: string; grantId: string }> {
  const provider = new TestOAuthProvider(`replay ${crypto.randomUUID().slice(0, 8)}`, CALLBACK);
  const probe = new Client({ name: 'replay', version: '1.0.0' });
  await expect(probe.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
  const body = new URLSearchParams({ admin_token: admin, team: 'acme', scope: 'execute', decision: 'approve' });
  const r = await fetch(provider.authorizationUrl!, { method: 'POST', body, redirect: 'manual' });
  expect(r.status).toBe(302);
  const code = new URL(r.headers.get('Location')!).searchParams.get('code')!;
  return { provider, code, grantId: code.split(':')[1] };
}

const grantOf = async (grantId: string) => {
  const r = await fetch(`${gw.url}/admin/v1/oauth/grants`, { headers: { Authorization: `Bearer ${admin}` } });
  return ((await r.json()) as { grants: any[] }).grants.find((g) => g.grantId === grantId);
};

const mcpStatus = (access: string) => initializeStatus(gw.mcpUrl, access);

describe('OAuth grant bookkeeping', () => {
  it('lists a consent whose code was not exchanged as pending, then active once the client exchanges it', async () => {
    const { provider, code, grantId } = await consent();
    expect(await grantOf(grantId)).toMatchObject({ state: 'pending', codeExchangedAt: null, revokedAt: null });
    const cli = await runCli(gw.url, admin, ['oauth', 'grants']);
    expect(cli.stdout).toMatch(new RegExp(`${grantId}.*pending \\(code not exchanged yet\\)`));
    await new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }).finishAuth(code);
    expect(await grantOf(grantId)).toMatchObject({ state: 'active', codeExchangedAt: expect.any(Number) });
    expect(await mcpStatus(provider.saved!.access_token)).toBe(200);
  });

  it('a replayed code ends the grant and its tokens, and the list says revoked and why', async () => {
    const { provider, code, grantId } = await consent();
    await new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }).finishAuth(code);
    const access = provider.saved!.access_token;
    expect(await mcpStatus(access)).toBe(200);
    // An attacker who saw the code presents it again.
    const replay = await fetch(`${gw.url}/oauth/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        client_id: provider.info!.client_id,
        redirect_uri: CALLBACK,
        code_verifier: 'x'.repeat(43),
      }),
    });
    expect(replay.status).toBe(400);
    expect(replay.headers.get('X-Gatehouse-Code-Replayed')).toBeNull();
    expect(await replay.json()).toMatchObject({ error: 'invalid_grant' });
    expect(await mcpStatus(access)).toBe(401);
    const g = await grantOf(grantId);
    expect(g).toMatchObject({ state: 'revoked', revokedAt: expect.any(Number) });
    expect(g.revokedReason).toContain('authorization code was presented a second time');
    const cli = await runCli(gw.url, admin, ['oauth', 'grants', '--all']);
    expect(cli.stdout).toMatch(new RegExp(`${grantId}.*revoked .*presented a second time`));
    expect((await runCli(gw.url, admin, ['oauth', 'grants'])).stdout).not.toContain(grantId);
  });
});
