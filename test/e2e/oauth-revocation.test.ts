/**
 * OAuth grants are credentials with a lifecycle, through the real gateway: the official MCP SDK
 * client's OAuth provider registers and signs in (the consent form is posted over HTTP as a browser
 * would post it), then each way of ending the grant — revoking the grant, the admin token that
 * consented (recorded or offline), the client, the grant's token id — ends its access token AND its
 * refresh token on the very next request. Attacks: a departed admin's self-refreshing credential,
 * another team's admin, a bare "revocation" of an unknown id.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { TestOAuthProvider } from '../support/oauth-provider.ts';
import { runCli } from '../support/cli.ts';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { aria } from '../support/dashboard-page.ts';
import { readmeBlock } from '../cli/readme.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { decodeJwt } from 'jose';
import { ROOT, startGateway, type Gateway } from './harness.ts';

// Callbacks given to page.evaluate/waitForFunction run in the browser; the project's types have no DOM lib.
declare const document: any;

requireChromium('the Tokens page test of OAuth grants');
const SHOTS = join(ROOT, 'test/screenshots');
let gw: Gateway;
let callback: Server;
let callbackUrl: string;

interface Signed {
  provider: TestOAuthProvider;
  grantId: string;
  access: string;
  refresh: string;
  clientId: string;
}

/** Posts the consent form; returns the redirect (a code) or the page's error text. */
async function postConsent(authUrl: URL, adminToken: string, team: string): Promise<{ code?: string; error?: string }> {
  const body = new URLSearchParams({ admin_token: adminToken, team, scope: 'execute', decision: 'approve' });
  const r = await fetch(authUrl, { method: 'POST', body, redirect: 'manual' });
  if (r.status === 302) return { code: new URL(r.headers.get('Location')!).searchParams.get('code') ?? undefined };
  const html = await r.text();
  const text = /id="error">([^<]*)</.exec(html)?.[1] ?? html.slice(0, 200);
  const entities: Record<string, string> = { '&quot;': '"', '&lt;': '<', '&gt;': '>', '&amp;': '&', '&#39;': "'" };
  return { error: text.replace(/&(quot|lt|gt|amp|#39);/g, (e) => entities[e]) };
}

/** Registers a client (or reuses the provider's), consents as `adminToken`, exchanges the code. */
async function signIn(adminToken: string, o: { provider?: TestOAuthProvider; team?: string } = {}): Promise<Signed> {
  const provider = o.provider ?? new TestOAuthProvider(`revocation test ${crypto.randomUUID().slice(0, 8)}`, callbackUrl);
  provider.saved = undefined;
  const client = new Client({ name: 'oauth-revocation', version: '1.0.0' });
  await expect(client.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
  const consent = await postConsent(provider.authorizationUrl!, adminToken, o.team ?? 'acme');
  if (!consent.code) throw new Error(`consent refused: ${consent.error}`);
  await new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }).finishAuth(consent.code);
  const access = provider.saved!.access_token;
  return { provider, grantId: access.split(':')[1], access, refresh: provider.saved!.refresh_token!, clientId: provider.info!.client_id };
}

/** One MCP call with the access token: the status the gateway answers. */
async function mcpStatus(access: string): Promise<{ status: number; body: string }> {
  const r = await fetch(gw.mcpUrl, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${access}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2025-06-18',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'policy_check', arguments: { command: 'git', args: ['status'] } } }),
  });
  return { status: r.status, body: await r.text() };
}

/** The refresh grant at the token endpoint, as the SDK client sends it. */
async function refresh(
  s: Signed,
): Promise<{ status: number; json: { access_token?: string; refresh_token?: string; error?: string; error_description?: string } }> {
  const r = await fetch(`${gw.url}/oauth/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: s.refresh, client_id: s.clientId }),
  });
  return { status: r.status, json: (await r.json()) as never };
}

async function admin(method: string, path: string, token: string) {
  const r = await fetch(`${gw.url}/admin/v1${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
  return { status: r.status, json: (await r.json()) as any };
}

/** Both of the grant's tokens are dead: the access token is refused, and refreshing mints nothing. */
async function expectEnded(s: Signed, why: RegExp) {
  const m = await mcpStatus(s.access);
  expect(m.status).toBe(401);
  expect(m.body).toMatch(why);
  const r = await refresh(s);
  expect(r.status).toBe(400);
  expect(r.json.error).toBe('invalid_grant');
  expect(r.json.access_token).toBeUndefined();
}

beforeAll(async () => {
  callback = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => callback.listen(0, '127.0.0.1', r));
  callbackUrl = `http://127.0.0.1:${(callback.address() as { port: number }).port}/callback`;
  gw = await startGateway();
}, 180_000);

afterAll(async () => {
  await gw?.stop();
  await new Promise<void>((r) => (callback ? callback.close(() => r()) : r()));
});

describe('OAuth grants are listed like tokens', () => {
  it('lists the grant with its client, who consented, scopes, created and last used; the audit names grant and consenting subject', async () => {
    const consenter = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'alice-admin' });
    const s = await signIn(consenter);
    expect((await mcpStatus(s.access)).status).toBe(200);
    const reader = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'auditor' });
    const list = await admin('GET', '/oauth/grants', reader);
    expect(list.status).toBe(200);
    const g = list.json.grants.find((x: { grantId: string }) => x.grantId === s.grantId);
    expect(g).toMatchObject({
      clientId: s.clientId,
      clientName: s.provider.name,
      subject: 'alice-admin',
      consentTokenId: decodeJwt(consenter).jti,
      scopes: ['execute'],
      revokedAt: null,
      tokenId: `oauth-${s.grantId}`,
    });
    expect(g.createdAt).toBeGreaterThan(Date.now() - 120_000);
    expect(g.lastUsedAt).toBeGreaterThanOrEqual(g.createdAt);
    // Another team's admin sees none of it.
    const other = await admin('GET', '/oauth/grants', await gw.token({ team: 'globex', scopes: ['admin'] }));
    expect(other.json.grants.map((x: { grantId: string }) => x.grantId)).not.toContain(s.grantId);

    const audit = await admin('GET', '/audit?tool=oauth.grant_create', reader);
    const row = audit.json.entries.find((e: { command: { grantId?: string } }) => e.command?.grantId === s.grantId);
    expect(row).toMatchObject({ subject: 'alice-admin', tokenId: decodeJwt(consenter).jti, decision: 'allowed' });
    expect(row.command).toMatchObject({ clientId: s.clientId, clientName: s.provider.name, scopes: ['execute'] });
    const calls = await admin('GET', '/audit?tool=policy_check', reader);
    expect(calls.json.entries.some((e: { tokenId: string; subject: string }) => e.tokenId === `oauth-${s.grantId}` && e.subject === 'oauth:alice-admin')).toBe(
      true,
    );
  });
});

describe('every way of ending a grant ends its access and refresh tokens on the next request', () => {
  it('revoking the grant: DELETE /admin/v1/oauth/grants/<id>', async () => {
    const s = await signIn(await gw.token({ team: 'acme', scopes: ['admin'], subject: 'bob-admin' }));
    // Before: the refresh token works and rotates (the refreshed pair is what the client holds now).
    const r1 = await refresh(s);
    expect(r1.status).toBe(200);
    const live = { ...s, access: r1.json.access_token!, refresh: r1.json.refresh_token! };
    expect((await mcpStatus(live.access)).status).toBe(200);

    const adminToken = await gw.token({ team: 'acme', scopes: ['admin'] });
    const del = await admin('DELETE', `/oauth/grants/${s.grantId}`, adminToken);
    expect(del.status).toBe(200);
    expect(del.json.revokedAt).toBeGreaterThan(0);
    await expectEnded(live, /OAuth access token is invalid|has ended/);
    const row = (await admin('GET', '/oauth/grants', adminToken)).json.grants.find((x: { grantId: string }) => x.grantId === s.grantId);
    expect(row.revokedAt).toBe(del.json.revokedAt);
    expect(row.revokedReason).toMatch(/revoked by/);
    const audit = await admin('GET', '/audit?tool=admin.oauth_grant_revoke', adminToken);
    expect(audit.json.entries.some((e: { command: { grantId: string } }) => e.command.grantId === s.grantId)).toBe(true);
  });

  it('revoking the admin token that consented (offline token, ?unrecorded=true): a departed admin keeps nothing', async () => {
    const departing = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'carol-admin' });
    const s = await signIn(departing);
    expect((await mcpStatus(s.access)).status).toBe(200);
    const jti = decodeJwt(departing).jti!;
    const del = await admin('DELETE', `/tokens/${jti}?unrecorded=true`, await gw.token({ team: 'acme', scopes: ['admin'] }));
    expect(del.status).toBe(200);
    expect(del.json.oauthGrantsEnded).toEqual([s.grantId]);
    await expectEnded(s, /OAuth access token is invalid|has ended/);
  });

  it('revoking a recorded admin token minted by the admin API ends the grants it consented to', async () => {
    const root = await gw.token({ team: 'acme', scopes: ['admin'] });
    const r = await fetch(`${gw.url}/admin/v1/tokens`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${root}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ subject: 'dave-admin', scopes: ['admin'], ttlSeconds: 3600 }),
    });
    const minted = (await r.json()) as { token: string; jti: string };
    const s = await signIn(minted.token);
    // Even before the cascade reaches the authorization server's store, the D1 check holds: the
    // grant is refused because its consenting token is revoked.
    const del = await admin('DELETE', `/tokens/${minted.jti}`, root);
    expect(del.status).toBe(200);
    await expectEnded(s, /OAuth access token is invalid|has ended/);
  });

  it('revoking the client for the team ends its grants and refuses consent until unblocked', async () => {
    const adminToken = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'erin-admin' });
    const s = await signIn(adminToken);
    const del = await admin('DELETE', `/oauth/clients/${encodeURIComponent(s.clientId)}`, adminToken);
    expect(del.status).toBe(200);
    expect(del.json.grantsEnded).toEqual([s.grantId]);
    await expectEnded(s, /OAuth access token is invalid|has ended/);
    // The same client cannot be granted again in acme while blocked…
    await expect(signIn(adminToken, { provider: s.provider })).rejects.toThrow(/this client was revoked for team "acme"/);
    // …until an admin unblocks it.
    expect((await admin('DELETE', `/oauth/clients/${encodeURIComponent(s.clientId)}/block`, adminToken)).status).toBe(200);
    const again = await signIn(adminToken, { provider: s.provider });
    expect((await mcpStatus(again.access)).status).toBe(200);
  });

  it('revoking the principal\'s token id oauth-<grant> revokes the grant; an unknown id is 404, never "revoked"', async () => {
    const adminToken = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'frank-admin' });
    const s = await signIn(adminToken);
    const del = await admin('DELETE', `/tokens/oauth-${s.grantId}?unrecorded=true`, adminToken);
    expect(del.status).toBe(200);
    expect(del.json.grantId).toBe(s.grantId);
    await expectEnded(s, /OAuth access token is invalid|has ended/);
    for (const path of ['/tokens/oauth-nosuchgrant0000?unrecorded=true', '/oauth/grants/nosuchgrant0000', '/oauth/clients/nosuchclient']) {
      const r = await admin('DELETE', path, adminToken);
      expect(r.status, path).toBe(404);
      expect(r.json.error.code).toBe('not_found');
      expect(r.json.revokedAt).toBeUndefined();
    }
  });

  it("another team's admin cannot revoke or see a grant: 404, and the grant keeps working", async () => {
    const s = await signIn(await gw.token({ team: 'acme', scopes: ['admin'], subject: 'gina-admin' }));
    const globex = await gw.token({ team: 'globex', scopes: ['admin'] });
    expect((await admin('DELETE', `/oauth/grants/${s.grantId}`, globex)).status).toBe(404);
    expect((await admin('DELETE', `/tokens/oauth-${s.grantId}`, globex)).status).toBe(404);
    expect((await admin('DELETE', `/oauth/clients/${encodeURIComponent(s.clientId)}`, globex)).status).toBe(404);
    expect((await mcpStatus(s.access)).status).toBe(200);
    expect((await refresh(s)).status).toBe(200);
  });
});

const cli = (args: string[], token: string) => runCli(gw.url, token, args);

describe('gatehouse oauth', () => {
  it('lists grants (a hostile client name shown as data) and revokes one; both tokens end', async () => {
    const adminToken = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'hank-admin' });
    const provider = new TestOAuthProvider('evil\x1b[2K\x1b[1Aallowed\u202e client', callbackUrl);
    const s = await signIn(adminToken, { provider });
    const list = await cli(['oauth', 'grants'], adminToken);
    expect(list.code, list.stderr).toBe(0);
    const line = list.stdout.split('\n').find((l) => l.startsWith(s.grantId)) ?? '';
    expect(line, list.stdout).toContain('hank-admin');
    expect(line, list.stdout).toContain('execute');
    expect(line, list.stdout).toContain('\\x1b[2K');
    expect(list.stdout).not.toMatch(/[\x1b\u202e]/);
    const json = JSON.parse((await cli(['oauth', 'grants', '--json'], adminToken)).stdout) as { grants: { grantId: string; clientName: string }[] };
    expect(json.grants.find((g) => g.grantId === s.grantId)?.clientName).toBe(provider.name);

    // "--" as docs/operations.md shows: a grant id is random base64url and may start with "-".
    const revoked = await cli(['oauth', 'revoke', '--', s.grantId], adminToken);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain(`revoked grant ${s.grantId}`);
    await expectEnded(s, /OAuth access token is invalid|has ended/);
    const live = await cli(['oauth', 'grants'], adminToken);
    expect(live.stdout + live.stderr).not.toContain(s.grantId);
    const all = await cli(['oauth', 'grants', '--all'], adminToken);
    expect(all.stdout, all.stderr).toMatch(new RegExp(`${s.grantId}.*revoked .*revoked by`));
    const unknown = await cli(['oauth', 'revoke', 'nosuchgrant0000'], adminToken);
    expect(unknown.code, unknown.stdout).toBe(1);
    expect(unknown.stderr).toContain('error (not_found)');
  });
});

describe('README', () => {
  it("runs the README's oauth block as written: list, revoke a grant, revoke a client", async () => {
    const adminToken = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'readme-admin' });
    const one = await signIn(adminToken);
    const two = await signIn(adminToken);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      GATEHOUSE_URL: gw.url,
      GATEHOUSE_ADMIN_TOKEN: adminToken,
      GRANT_ID: one.grantId,
      CLIENT_ID: two.clientId,
    };
    const lines = readmeBlock('cli-oauth');
    expect(lines).toHaveLength(3);
    for (const line of lines) {
      const r = await promisify(execFile)('/bin/sh', ['-ec', line], { cwd: ROOT, env }).catch((e: { message: string; stderr?: string }) => {
        throw new Error(`README line failed: ${line}\n${e.message}\n${e.stderr ?? ''}`);
      });
      if (line.includes('oauth grants')) expect(r.stdout).toContain(one.grantId);
    }
    await expectEnded(one, /OAuth access token is invalid|has ended/);
    await expectEnded(two, /OAuth access token is invalid|has ended/);
  }, 120_000);
});

describe.skipIf(!HAVE_CHROMIUM)("the dashboard's Tokens page", () => {
  it('lists OAuth grants (client name as isolated text) and revokes one; both tokens end', async () => {
    mkdirSync(SHOTS, { recursive: true });
    const adminToken = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'ivy-admin' });
    const provider = new TestOAuthProvider('<img src=x onerror="document.title=1">\u202eevil', callbackUrl);
    const s = await signIn(adminToken, { provider });
    const profile = mkdtempSync(join(tmpdir(), 'gatehouse-chromium-'));
    const browser = await launchChromium(profile);
    try {
      const page = await browser.newPage();
      await page.setViewport({ width: 1366, height: 900 });
      page.on('dialog', (d) => void d.accept());
      await page.goto(`${gw.url}/dashboard`);
      const field = await page.waitForSelector(aria('Admin token'));
      await field!.type(adminToken);
      await page.keyboard.press('Enter');
      await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
      await page.evaluate(() => {
        (globalThis as any).location.hash = '#/tokens';
      });
      const row = `tr[data-grant="${s.grantId}"]`;
      await page.waitForSelector(row, { timeout: 15_000 }).catch(async (e) => {
        throw new Error(`${(e as Error).message}; the page shows: ${await page.evaluate(() => document.getElementById('main')?.innerText)}`);
      });
      const shown = await page.$eval(row, (tr: any) => ({
        name: tr.querySelector('bdi.client-name')?.textContent,
        imgs: tr.querySelectorAll('img').length,
        status: tr.dataset.status,
        cells: [...tr.querySelectorAll('td')].map((td: any) => td.textContent),
      }));
      // Markup stays text, and the right-to-left override is shown as an escape, isolated from its neighbours.
      expect(shown).toMatchObject({ name: provider.name.replace('\u202e', '\\u202e'), imgs: 0, status: 'active' });
      expect(shown.cells).toContain('ivy-admin');
      expect(shown.cells).toContain('execute');
      expect(await page.title()).not.toBe('1');
      await page.screenshot({ path: join(SHOTS, 'dashboard-oauth-grants.png'), fullPage: true });

      await page.click(aria(`Revoke OAuth grant ${s.grantId}`));
      await page.waitForFunction((sel: string) => document.querySelector(sel)?.dataset.status === 'revoked', { timeout: 15_000 }, row);
      await expectEnded(s, /OAuth access token is invalid|has ended/);
      await page.screenshot({ path: join(SHOTS, 'dashboard-oauth-grant-revoked.png'), fullPage: true });
    } finally {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    }
  });
});
