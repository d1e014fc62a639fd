/**
 * A team member with no admin token connects an MCP client by OAuth and runs a job; the audit row
 * names them, and their own dashboard page lists the job and the client; an admin removes them, the
 * client's next call fails and their session is over. Everything real: the gateway,
 * an executor agent, oidc-provider on 127.0.0.1 as the identity provider, the consent page in
 * Chromium, the MCP SDK client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'puppeteer-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { ROOT, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { execSql } from '../admin/seed.ts';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { startOidcIdp, type OidcIdp } from '../support/oidc-idp.ts';
import { TestOAuthProvider } from '../support/oauth-provider.ts';

requireChromium('member OAuth e2e');
// Callbacks given to page.evaluate/waitForFunction run in the browser; the project's types have no DOM lib.
declare const document: any, location: any;

let gw: Gateway;
let idp: OidcIdp;
let agent: AgentProcess;
let browser: Browser;
let profile: string;
let root: string;
let callback: Server;
let callbackUrl = '';
const arrivals: URL[] = [];

beforeAll(async () => {
  if (!HAVE_CHROMIUM) return;
  idp = await startOidcIdp();
  gw = await startGateway({
    vars: { OIDC_ISSUER: idp.issuer, OIDC_CLIENT_ID: idp.clientId, OIDC_CLIENT_SECRET: idp.clientSecret },
    beforeStart: async (persist) =>
      execSql(
        persist,
        `INSERT INTO members (member_id, team, issuer, subject, email, name, role, created_at, added_by) VALUES ('mem_mona', 'acme', '${idp.issuer}', 'mona', 'mona@acme.example', 'Mona', 'member', ${Date.now() - 60_000}, 'seed');`,
      ),
  });
  idp.allowRedirect(`${gw.url}/dashboard/auth/callback`);
  root = mkdtempSync(join(tmpdir(), 'gatehouse-member-oauth-'));
  agent = startAgent(gw, { token: await gw.token({ team: 'acme', scopes: ['agent'], subject: 'member-oauth-agent' }), root, sandbox: testSandbox() });
  await agent.ready;
  callback = createServer((req, res) => {
    arrivals.push(new URL(req.url!, callbackUrl));
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end('you can close this window');
  });
  await new Promise<void>((r) => callback.listen(0, '127.0.0.1', () => r()));
  callbackUrl = `http://127.0.0.1:${(callback.address() as { port: number }).port}/callback`;
  profile = mkdtempSync(join(tmpdir(), 'gatehouse-member-oauth-chromium-'));
  browser = await launchChromium(profile);
});
afterAll(async () => {
  await browser?.close();
  await agent?.stop();
  await gw?.stop();
  await idp?.close();
  callback?.close();
  for (const d of [profile, root]) if (d) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(!HAVE_CHROMIUM)('a member connects an MCP client without an admin token', () => {
  it('signs in at the consent page, runs a job audited under the member, and is cut off when removed', async () => {
    const provider = new TestOAuthProvider("Mona's editor", callbackUrl);
    const probe = new Client({ name: 'member-oauth', version: '1.0.0' });
    await expect(probe.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
    const authUrl = provider.authorizationUrl!;

    const page = await browser.newPage();
    await page.goto(authUrl.href);
    await page.waitForSelector('#sign-in');
    idp.nextLogin({ sub: 'mona', email: 'mona@acme.example', name: 'Mona' });
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#sign-in')]);
    await page.waitForFunction((u) => location.href === u, { timeout: 30_000 }, authUrl.href);
    expect(await page.$eval('#signed-in', (e: any) => e.innerText)).toBe('Signed in as mona@acme.example; the app acts as you.');
    expect(await page.$('#admin_token')).toBeNull();
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#approve')]);
    const arrived = arrivals.find((u) => u.searchParams.get('state') === authUrl.searchParams.get('state'));
    if (!arrived) throw new Error(`no code arrived; the page at ${page.url()} says: ${await page.evaluate(() => document.body.innerText)}`);
    expect(arrived?.searchParams.get('code')).toBeTruthy();
    await page.close();

    await new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }).finishAuth(arrived!.searchParams.get('code')!);
    const client = new Client({ name: 'member-oauth', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }));
    const r = await client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['hello from mona'] } }, undefined, { timeout: 60_000 });
    expect(r.structuredContent as { stdout: string; exit_code: number }).toMatchObject({ stdout: 'hello from mona\n', exit_code: 0 });

    const admin = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'acme-admin' });
    const get = async (path: string, init: RequestInit = {}) =>
      (await (await fetch(`${gw.url}/admin/v1${path}`, { ...init, headers: { Authorization: `Bearer ${admin}` } })).json()) as any;
    let row: any;
    for (let i = 0; i < 50 && !row; i++) {
      row = (await get('/audit?tool=execute')).entries.find((e: any) => e.command?.args?.[0] === 'hello from mona');
      if (!row) await new Promise((res) => setTimeout(res, 200));
    }
    expect(row).toMatchObject({ subject: 'member:mem_mona', decision: 'allowed' });

    // Her own dashboard page (the session from the consent page's sign-in): the client she connected and the job it ran.
    const own = await browser.newPage();
    await own.goto(`${gw.url}/dashboard`);
    await own.waitForSelector('[data-grant-row]');
    await own.waitForFunction(() => document.getElementById('my-jobs')?.textContent?.includes('hello from mona'), { timeout: 30_000 });
    expect(await own.$eval('#my-grants', (e: any) => e.innerText)).toContain("Mona's editor");
    expect(await own.$$eval('#nav a', (as) => as.map((a: any) => a.textContent))).toEqual(['You']);
    await own.screenshot({ path: join(ROOT, 'test/screenshots/dashboard-member-jobs-and-clients.png'), fullPage: true });

    const removed = await get('/members/mem_mona', { method: 'DELETE' });
    expect(removed.oauthGrantsEnded).toHaveLength(1);
    await expect(client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['after removal'] } })).rejects.toThrow();
    expect((await get('/audit?tool=execute')).entries.filter((e: any) => e.command?.args?.[0] === 'after removal')).toEqual([]);
    // Her client refreshes: refused, and the reason names the grant and says she was removed (not her member id as a grant).
    const grantId = provider.tokens()!.access_token.split(':')[1]!;
    const refreshed = await fetch(`${gw.url}/oauth/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: provider.tokens()!.refresh_token!,
        client_id: provider.clientInformation()!.client_id,
      }),
    });
    const refusal = (await refreshed.json()) as { error: string; error_description: string };
    expect(refreshed.status).toBe(400);
    expect(refusal.error).toBe('invalid_grant');
    expect(refusal.error_description).toContain(grantId);
    expect(refusal.error_description).not.toMatch(/OAuth grant mem_mona|OAuth grant member:/);
    expect(refusal.error_description).toMatch(/mona@acme\.example \(member mem_mona\) was removed from the team/);
    // Her session ended with the membership: the dashboard asks her to sign in again.
    await own.reload({ waitUntil: 'load' });
    await own.waitForSelector('#idp-signin');
    await own.close();
    await client.close().catch(() => undefined);
  }, 180_000);
});
