/**
 * The dashboard for people signed in with an OpenID Connect provider, in Chromium against the real
 * gateway and oidc-provider on 127.0.0.1: sign in through the provider, the Members page (invite
 * with the one-time link, role change, removal), sign-out; a member sees their own page (their
 * connected clients, which they revoke, and their jobs), not the team pages; a person in two teams
 * switches between them, and picks the team at the OAuth consent page, where a team forged into the
 * form is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';
import type { Browser, Page } from 'puppeteer-core';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { execSql } from '../admin/seed.ts';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { startOidcIdp, type OidcIdp } from '../support/oidc-idp.ts';
import { TestOAuthProvider } from '../support/oauth-provider.ts';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

requireChromium('members dashboard tests');
// Callbacks given to page.evaluate/waitForFunction run in the browser; the project's types have no DOM lib.
declare const document: any, location: any;

let gw: Gateway;
let idp: OidcIdp;
let browser: Browser;
let profile: string;

beforeAll(async () => {
  if (!HAVE_CHROMIUM) return;
  idp = await startOidcIdp();
  const member = (id: string, sub: string, email: string, role: string, team = 'acme') =>
    `INSERT INTO members (member_id, team, issuer, subject, email, name, role, created_at, added_by) VALUES ('${id}', '${team}', '${idp.issuer}', '${sub}', '${email}', NULL, '${role}', ${Date.now() - 60_000}, 'seed');`;
  // A connected client of Erin's in acme, as the consent page records it (its tokens live in the authorization server).
  const grant = (id: string, team: string, memberId: string, client: string) =>
    `INSERT INTO oauth_grants (grant_id, team, user_id, client_id, client_name, subject, consent_token_id, scopes, created_at, expires_at) VALUES ('${id}', '${team}', '${team}%2Fmember%3A${memberId}', 'client-${id}', '${client.replace(/'/g, "''")}', 'member:${memberId}', 'member:${memberId}', 'execute', ${Date.now() - 30_000}, ${Date.now() + 86400_000});`;
  gw = await startGateway({
    vars: { OIDC_ISSUER: idp.issuer, OIDC_CLIENT_ID: idp.clientId, OIDC_CLIENT_SECRET: idp.clientSecret },
    beforeStart: async (persist) =>
      execSql(
        persist,
        [
          member('mem_alice', 'alice', 'alice@acme.example', 'owner'),
          member('mem_carol', 'carol', 'carol@acme.example', 'member'),
          member('mem_erin', 'erin', 'erin@acme.example', 'member'),
          member('mem_erin_globex', 'erin', 'erin@acme.example', 'admin', 'globex'),
          grant('grant_erin_1', 'acme', 'mem_erin', "Erin's editor"),
          grant('grant_carol_1', 'acme', 'mem_carol', "Carol's editor"),
        ].join('\n'),
      ),
  });
  idp.allowRedirect(`${gw.url}/dashboard/auth/callback`);
  profile = mkdtempSync(join(tmpdir(), 'gatehouse-members-chromium-'));
  browser = await launchChromium(profile);
});
afterAll(async () => {
  await browser?.close();
  await gw?.stop();
  await idp?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

const text = (page: Page, sel: string) => page.$eval(sel, (e: any) => e.innerText);

async function signInAs(page: Page, sub: string, email: string): Promise<void> {
  await page.goto(`${gw.url}/dashboard`);
  await page.waitForSelector('#idp-signin');
  idp.nextLogin({ sub, email });
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#idp-signin')]);
  await page.waitForFunction((h) => location.origin === h, {}, gw.url);
}

describe.skipIf(!HAVE_CHROMIUM)('the dashboard for signed-in people', () => {
  it('signs an owner in through the provider; the Members page invites, changes a role and removes; sign-out ends the session', async () => {
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await signInAs(page, 'alice', 'alice@acme.example');
    await page.waitForFunction(() => document.getElementById('who')?.textContent?.includes('alice@acme.example (owner)'));
    expect(await text(page, '#who')).toBe('team acme · alice@acme.example (owner)');

    await page.evaluate(() => {
      location.hash = '#/members';
    });
    await page.waitForSelector('[data-member-row="mem_carol"]');
    expect(await page.$$eval('[data-member-row]', (rows) => rows.map((r) => r.getAttribute('data-member-row')))).toEqual([
      'mem_alice',
      'mem_carol',
      'mem_erin',
    ]);

    await page.type('#invite-form input[name=email]', 'dana@example.com');
    await page.select('#invite-form select[name=role]', 'admin');
    await page.locator('#invite-form button[type=submit]').click();
    await page.waitForSelector('#invite-url');
    expect(await text(page, '#invite-url')).toMatch(new RegExp(`^${gw.url}/dashboard/join\\?invitation=[A-Za-z0-9_-]{43}$`));
    await page.waitForFunction(() => document.body.innerText.includes('Pending invitations'));

    await page.select('select[data-member="mem_carol"]', 'admin');
    await page.waitForFunction(() => document.body.innerText.includes('carol@acme.example is now admin.'));
    const token = await gw.token({ team: 'acme', scopes: ['admin'] });
    const list = async () => ((await (await fetch(`${gw.url}/admin/v1/members`, { headers: { Authorization: `Bearer ${token}` } })).json()) as any).members;
    expect((await list()).find((m: any) => m.memberId === 'mem_carol').role).toBe('admin');
    // Lowered again: the page says what ended with it (her seeded connected client).
    await page.select('select[data-member="mem_carol"]', 'member');
    await page.waitForFunction(() =>
      document.body.innerText.includes('carol@acme.example is now member. A lowered role: they are signed out and 1 connected client(s) of theirs ended.'),
    );
    // The gateway's refusal is shown as it says it: the last owner stays.
    await page.select('select[data-member="mem_alice"]', 'admin');
    await page.waitForFunction(() => document.body.innerText.includes('this is the last owner of team "acme"'));

    await page.locator('button[data-remove="mem_carol"]').click();
    await page.waitForFunction(() => !document.querySelector('[data-member-row="mem_carol"]'));
    expect((await list()).map((m: any) => m.memberId)).toEqual(['mem_alice', 'mem_erin']);

    await page.locator('#signout').click();
    await page.waitForSelector('#idp-signin');
    // A page's fetch sends its cookies to its own origin by default.
    const s = await page.evaluate(async () => (await fetch(new URL('/dashboard/auth/session', location.href))).json());
    expect(s).toMatchObject({ signedIn: false });
    await context.close();
  });

  it('shows a member their own page: their connected clients (revocable) and jobs, no team pages; a second team by the switcher', async () => {
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await signInAs(page, 'erin', 'erin@acme.example');
    // Erin manages globex: the dashboard opens there, with a switcher to her other team.
    await page.waitForFunction(() => document.getElementById('who')?.textContent?.includes('(admin)'));
    expect(await text(page, '#who')).toBe('team globex · erin@acme.example (admin)');
    expect(await page.$$eval('#team-switch option', (os) => os.map((o: any) => o.textContent))).toEqual(['acme (member)', 'globex (admin)']);

    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.select('#team-switch', 'acme')]);
    await page.waitForSelector('[data-grant-row="grant_erin_1"]');
    expect(await text(page, '#who')).toBe('team acme · erin@acme.example (member)');
    expect(await page.$$eval('#nav a', (as) => as.map((a: any) => a.textContent))).toEqual(['You']);
    expect(await text(page, '#my-role')).toContain('Signed in as erin@acme.example, member of team acme.');
    // Only her own client: Carol's grant in the same team is not hers to see.
    expect(await page.$$eval('[data-grant-row]', (rows) => rows.map((r) => r.getAttribute('data-grant-row')))).toEqual(['grant_erin_1']);
    await page.waitForFunction(() => document.getElementById('my-jobs')?.textContent === 'No jobs of yours in team acme yet.');
    // A team page by its address gives her own page again, not the team's.
    await page.evaluate(() => {
      location.hash = '#/members';
    });
    await page.waitForFunction(() => document.querySelector('h1')?.textContent === 'You in acme');
    await page.waitForSelector('button[data-revoke-grant="grant_erin_1"]');
    await page.waitForFunction(() => document.getElementById('my-jobs')?.textContent === 'No jobs of yours in team acme yet.');
    await page.screenshot({ path: join(ROOT, 'test/screenshots/dashboard-member-own-page.png'), fullPage: true });

    await page.locator('button[data-revoke-grant="grant_erin_1"]').click();
    await page.waitForFunction(() => document.querySelector('[data-grant-row="grant_erin_1"] [data-status]')?.getAttribute('data-status') === 'ended');
    expect(await page.$('button[data-revoke-grant="grant_erin_1"]')).toBeNull();
    const token = await gw.token({ team: 'acme', scopes: ['admin'] });
    const grants = ((await (await fetch(`${gw.url}/admin/v1/oauth/grants`, { headers: { Authorization: `Bearer ${token}` } })).json()) as any).grants;
    expect(grants.find((g: any) => g.grantId === 'grant_erin_1')).toMatchObject({ revokedReason: 'revoked by member:mem_erin, who consented to it' });
    expect(grants.find((g: any) => g.grantId === 'grant_carol_1').revokedReason ?? '').not.toContain('mem_erin');

    // The admin API refuses the member with words the page can show.
    const refusal = await page.evaluate(async () => {
      const s = (await (await fetch('/dashboard/auth/session')).json()) as { csrf: string };
      const r = await fetch('/dashboard/api/v1/teams/acme/tokens', { headers: { 'X-Gatehouse-CSRF': s.csrf } });
      return { status: r.status, body: await r.json() };
    });
    expect(refusal).toEqual({
      status: 403,
      body: {
        error: {
          code: 'insufficient_scope',
          message: 'your role in team "acme" is member; this needs the owner or admin role (a member connects clients and runs what the policy allows)',
        },
      },
    });
    await context.close();
  });

  it('lets a person in two teams pick the team at the consent page; a team forged into the form is refused', async () => {
    const callback = 'http://127.0.0.1:9/callback';
    const provider = new TestOAuthProvider("Erin's CLI", callback);
    const probe = new Client({ name: 'members-consent', version: '1.0.0' });
    await expect(probe.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
    const authUrl = provider.authorizationUrl!.href;
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await page.goto(authUrl);
    await page.waitForSelector('#sign-in');
    idp.nextLogin({ sub: 'erin', email: 'erin@acme.example' });
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#sign-in')]);
    await page.waitForFunction((u) => location.href === u, { timeout: 30_000 }, authUrl);
    expect(await page.$$eval('#team option', (os) => os.map((o: any) => o.textContent))).toEqual(['acme (member)', 'globex (admin)']);

    // The form's team changed in the page to one that is not hers: refused, the page shown again.
    await page.evaluate(() => {
      const o = document.querySelector('#team option');
      o.value = 'initech';
      o.selected = true;
    });
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#approve')]);
    expect(await text(page, '#error')).toBe('team "initech" not found among erin@acme.example\'s teams (acme, globex)');
    await page.screenshot({ path: join(ROOT, 'test/screenshots/consent-forged-team.png'), fullPage: true });

    await page.select('#team', 'globex');
    const toClient = page.waitForRequest((r) => r.url().startsWith(callback), { timeout: 30_000 });
    await page.locator('#approve').click();
    const code = new URL((await toClient).url()).searchParams.get('code')!;
    await context.close();
    await new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }).finishAuth(code);
    const client = new Client({ name: 'members-consent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }));
    expect((await client.callTool({ name: 'policy_check', arguments: { command: 'git', args: ['status'] } })).isError).toBeFalsy();
    await client.close();
    // The grant is globex's, as her globex membership; acme has no trace of it.
    const grantsOf = async (team: string) =>
      (
        (await (
          await fetch(`${gw.url}/admin/v1/oauth/grants`, { headers: { Authorization: `Bearer ${await gw.token({ team, scopes: ['admin'] })}` } })
        ).json()) as any
      ).grants;
    expect((await grantsOf('globex')).map((g: any) => [g.clientName, g.subject])).toEqual([["Erin's CLI", 'member:mem_erin_globex']]);
    expect((await grantsOf('acme')).map((g: any) => g.clientName)).not.toContain("Erin's CLI");
  });
});
