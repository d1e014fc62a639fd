/**
 * OAuth for interactive MCP clients, end to end: the official MCP SDK client's OAuth provider
 * discovers the authorization server from the gateway's 401, registers itself (RFC 7591), sends a
 * headless Chromium (Debian's, driven by puppeteer-core) to the consent page, where a team admin
 * signs in with an admin token and grants a team and scopes; the code (PKCE S256) becomes a token
 * that carries the same team/scope claims as an API token. API tokens keep working unchanged.
 * Attacks: an admin of another team, a forged OAuth-shaped token, an OAuth token on the admin API,
 * a wrong PKCE verifier, script in a self-registered client name, framing of the consent page.
 * Screenshots of the consent page go to test/screenshots/ (git-ignored).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { TestOAuthProvider } from '../support/oauth-provider.ts';
import type { Browser, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { ROOT, connectMcp, startGateway, type Gateway } from './harness.ts';

requireChromium('OAuth browser tests');
const SHOTS = join(ROOT, 'test/screenshots');

let gw: Gateway;
let browser: Browser;
let profile: string;
let callback: Server;
let callbackUrl: string;
/** Codes (or errors) the consent page redirected to our loopback callback, by state. */
const arrivals: URL[] = [];

/** Connects; the first attempt ends in the provider's redirect to the consent page. */
async function startSignIn(provider: TestOAuthProvider): Promise<URL> {
  const client = new Client({ name: 'oauth-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider });
  await expect(client.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.authorizationUrl).toBeDefined();
  return provider.authorizationUrl!;
}

async function waitArrival(state: string | null): Promise<URL> {
  if (!state) throw new Error('the authorization URL carries no state');
  const until = Date.now() + 15_000;
  for (;;) {
    const hit = arrivals.find((u) => u.searchParams.get('state') === state);
    if (hit) return hit;
    if (Date.now() > until) throw new Error(`nothing arrived at the callback for state ${state}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Files under `dir` whose bytes contain `needle`. */
function filesContaining(dir: string, needle: string): string[] {
  const hits: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    if (readFileSync(path).includes(needle)) hits.push(path);
  }
  return hits;
}

const text = (page: Page, sel: string) => page.$eval(sel, (e) => e.textContent);

async function consent(page: Page, o: { token: string; team: string; scopes?: string[]; decision?: 'approve' | 'deny'; shot?: string }) {
  for (const [sel, value] of [
    ['#admin_token', o.token],
    ['#team', o.team],
  ] as const) {
    await page.$eval(sel, (e) => {
      (e as unknown as { value: string }).value = '';
    });
    await page.type(sel, value);
  }
  if (o.scopes) {
    for (const box of await page.$$('input[name=scope]')) {
      const [value, checked] = await box.evaluate((e) => [(e as unknown as { value: string }).value, (e as unknown as { checked: boolean }).checked] as const);
      if (checked !== o.scopes.includes(value)) await box.click();
    }
  }
  if (o.shot) await page.screenshot({ path: join(SHOTS, o.shot), fullPage: true });
  // The form posts back to the page, which answers with the page again (an error) or a redirect to the client.
  await Promise.all([page.waitForNavigation(), page.click(o.decision === 'deny' ? '#deny' : '#approve')]);
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  callback = createServer((req, res) => {
    arrivals.push(new URL(req.url!, callbackUrl));
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><title>signed in</title><p id="done">You can close this window.</p>');
  });
  await new Promise<void>((r) => callback.listen(0, '127.0.0.1', r));
  callbackUrl = `http://127.0.0.1:${(callback.address() as { port: number }).port}/callback`;
  gw = await startGateway();
  if (HAVE_CHROMIUM) {
    profile = mkdtempSync(join(tmpdir(), 'gatehouse-chromium-'));
    browser = await launchChromium(profile);
  }
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
  await new Promise<void>((r) => (callback ? callback.close(() => r()) : r()));
  if (profile) rmSync(profile, { recursive: true, force: true });
});

describe('authorization server discovery', () => {
  it('publishes real RFC 8414 metadata that the protected-resource metadata points at', async () => {
    const prm = (await (await fetch(`${gw.url}/.well-known/oauth-protected-resource/mcp`)).json()) as { authorization_servers: string[] };
    expect(prm.authorization_servers).toContain(gw.issuer);
    const r = await fetch(`${gw.issuer}/.well-known/oauth-authorization-server`);
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({
      issuer: gw.issuer,
      authorization_endpoint: `${gw.url}/authorize`,
      token_endpoint: `${gw.url}/oauth/token`,
      registration_endpoint: `${gw.url}/oauth/register`,
      code_challenge_methods_supported: ['S256'],
      scopes_supported: ['execute', 'artifacts:read'],
    });
  });
});

describe.skipIf(!HAVE_CHROMIUM)('sign-in of an MCP client through the consent page', () => {
  it('grants team and scopes; the token acts exactly like an API token of that team, and API tokens still work', async () => {
    const provider = new TestOAuthProvider('Gatehouse OAuth test client', callbackUrl);
    const authUrl = await startSignIn(provider);
    expect(authUrl.origin).toBe(new URL(gw.url).origin);
    expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(provider.info?.client_id).toBeTruthy(); // registered dynamically

    const page = await browser.newPage();
    const shown = await page.goto(authUrl.href);
    expect(shown!.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(await text(page, '#client-name')).toBe('Gatehouse OAuth test client');
    expect(await text(page, '#redirect-host')).toBe('127.0.0.1');
    await page.screenshot({ path: join(SHOTS, 'oauth-consent.png'), fullPage: true });

    // An admin of another team cannot grant this one: the page says why and no code is issued.
    await consent(page, { token: await gw.token({ team: 'globex', scopes: ['admin'], subject: 'globex-admin' }), team: 'acme' });
    expect(await text(page, '#error')).toContain('the admin token is for team "globex"; it cannot grant team "acme"');
    // A client token is no admin token.
    await consent(page, { token: await gw.token({ team: 'acme', scopes: ['execute'] }), team: 'acme' });
    expect(await text(page, '#error')).toContain('lacks the required scope "admin"');
    await page.screenshot({ path: join(SHOTS, 'oauth-consent-refused.png'), fullPage: true });
    expect(arrivals.filter((u) => u.searchParams.get('state') === authUrl.searchParams.get('state'))).toEqual([]);

    // The team admin grants execute only.
    const acmeAdmin = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'acme-admin' });
    await consent(page, { token: acmeAdmin, team: 'acme', scopes: ['execute'], shot: 'oauth-consent-filled.png' });
    const back = await waitArrival(authUrl.searchParams.get('state')!);
    expect(back.searchParams.get('iss')).toBe(gw.issuer);
    const code = back.searchParams.get('code')!;
    expect(code).toBeTruthy();
    await page.close();

    // The SDK exchanges the code (with its PKCE verifier) and connects with the token.
    const first = new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider });
    await first.finishAuth(code);
    expect(provider.saved?.access_token).toBeTruthy();
    expect(provider.saved?.scope).toBe('execute');
    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }));
    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toContain('execute');
    const r = await client.callTool({ name: 'policy_check', arguments: { command: 'git', args: ['status'] } });
    expect(r.isError).toBeFalsy();
    await client.close();

    // Same claims as an API token: the audit row is acme's, with the OAuth subject.
    const admin = await gw.token({ team: 'acme', scopes: ['admin'] });
    const audit = (await (await fetch(`${gw.url}/admin/v1/audit?tool=policy_check`, { headers: { Authorization: `Bearer ${admin}` } })).json()) as {
      entries: { subject: string }[];
    };
    expect(audit.entries.map((e) => e.subject)).toContain('oauth:acme-admin');
    // Only the scopes granted: no admin API with it, and another team's admin API sees nothing of it.
    const asOAuth = { Authorization: `Bearer ${provider.saved!.access_token}` };
    const adminApi = await fetch(`${gw.url}/admin/v1/whoami`, { headers: asOAuth });
    expect(adminApi.status).toBe(403);
    expect(((await adminApi.json()) as { error: { message: string } }).error.message).toContain('lacks the required scope "admin" (token scopes: execute)');
    // Not an agent token either.
    expect((await fetch(`${gw.url}/agent/v1/connect`, { headers: asOAuth })).status).toBe(403);

    // The admin token was checked, never stored: it is nowhere in the gateway's state (D1, R2, KV, DO).
    expect(filesContaining(gw.stateDir, acmeAdmin)).toEqual([]);

    // An hour's access token; the refresh token gets a new pair (rotated), whose access token works the same.
    expect(provider.saved?.expires_in).toBe(3600); // ACCESS_TOKEN_TTL_S (src/oauth/server.ts imports a workerd-only module)
    const refreshed = await fetch(`${gw.url}/oauth/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: provider.saved!.refresh_token!, client_id: provider.info!.client_id }),
    });
    expect(refreshed.status).toBe(200);
    const pair = (await refreshed.json()) as { access_token: string; refresh_token: string; scope: string };
    expect(pair.refresh_token).toBeTruthy();
    expect(pair.refresh_token).not.toBe(provider.saved!.refresh_token);
    expect(pair.access_token).not.toBe(provider.saved!.access_token);
    expect(pair.scope).toBe('execute');
    const again = await connectMcp(gw.mcpUrl, pair.access_token);
    expect((await again.callTool({ name: 'policy_check', arguments: { command: 'git', args: ['log'] } })).isError).toBeFalsy();
    await again.close();

    // API tokens keep working unchanged.
    const api = await connectMcp(gw.mcpUrl, await gw.token({ team: 'acme', scopes: ['execute'] }));
    expect((await api.listTools()).tools.length).toBe(tools.length);
    await api.close();
  }, 180_000);

  it('Deny sends access_denied back to the client', async () => {
    const provider = new TestOAuthProvider('Denied client', callbackUrl);
    const authUrl = await startSignIn(provider);
    const page = await browser.newPage();
    await page.goto(authUrl.href);
    await consent(page, { token: 'not-even-a-token', team: 'acme', decision: 'deny' });
    const back = await waitArrival(authUrl.searchParams.get('state')!);
    expect(back.searchParams.get('error'), back.href).toBe('access_denied');
    expect(back.searchParams.get('code')).toBeNull();
    await page.close();
  }, 120_000);

  it('escapes a self-registered client name: no script runs on the consent page', async () => {
    const evil = '<img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>';
    const provider = new TestOAuthProvider(evil, callbackUrl);
    const authUrl = await startSignIn(provider);
    const page = await browser.newPage();
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await page.goto(authUrl.href);
    expect(await text(page, '#client-name')).toBe(evil);
    expect(await page.title()).not.toBe('pwned');
    expect(await page.$$('#client-name img, #client-name script')).toHaveLength(0);
    expect(dialogs).toEqual([]);
    await page.screenshot({ path: join(SHOTS, 'oauth-consent-escaped.png'), fullPage: true });
    await page.close();
  }, 120_000);
});

describe('attacks on the token path', () => {
  it('refuses a forged OAuth-shaped token and a code redeemed with the wrong PKCE verifier', async () => {
    const forged = await fetch(gw.mcpUrl, {
      method: 'POST',
      headers: {
        Authorization: 'Bearer acme%2Fadmin:grant123:secretsecretsecret',
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(forged.status).toBe(401);
    expect(((await forged.json()) as { error: { message: string } }).error.message).toMatch(/OAuth access token is invalid, expired or revoked/);

    if (!HAVE_CHROMIUM) return;
    const provider = new TestOAuthProvider('PKCE test client', callbackUrl);
    const authUrl = await startSignIn(provider);
    // A redirect URI the client did not register: the page says so and never redirects there.
    const hijack = new URL(authUrl);
    hijack.searchParams.set('redirect_uri', 'http://127.0.0.1:9/steal');
    const refused = await fetch(hijack, { redirect: 'manual' });
    expect(refused.status).toBe(400);
    expect(refused.headers.get('location')).toBeNull();
    expect(await refused.text()).toContain('cannot continue');
    const page = await browser.newPage();
    await page.goto(authUrl.href);
    await consent(page, { token: await gw.token({ team: 'acme', scopes: ['admin'], subject: 'acme-admin' }), team: 'acme', scopes: ['execute'] });
    const code = (await waitArrival(authUrl.searchParams.get('state')!)).searchParams.get('code')!;
    await page.close();
    const redeem = (verifier: string) =>
      fetch(`${gw.url}/oauth/token`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: callbackUrl,
          client_id: provider.info!.client_id,
          code_verifier: verifier,
          resource: gw.mcpUrl,
        }),
      });
    const wrong = await redeem('x'.repeat(64));
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { error: string }).error).toBe('invalid_grant');
  }, 120_000);
});
