/**
 * `npm run idp` (scripts/dev-idp.ts) is a usable identity provider for a local gateway: started as the docs say, the
 * gateway configured with the variables it prints, its documented user signs in to the dashboard in real chromium
 * through its form — and a wrong password is refused there, with what the provider accepts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { execSql } from '../admin/seed.ts';
import { readmeBlock } from '../cli/readme.ts';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { freePort, ROOT, startGateway, type Gateway } from './harness.ts';

declare const document: any, location: any;

requireChromium('npm run idp sign-in test');

/** Starts `npm run idp` and resolves with the variables its banner tells `npm start` to use. */
function startIdp(port: number, gateway: string): Promise<{ proc: ChildProcess; vars: Record<string, string>; banner: string }> {
  const proc = spawn('npm', ['run', '--silent', 'idp'], {
    cwd: ROOT,
    env: { ...process.env, GATEHOUSE_IDP_PORT: String(port), GATEHOUSE_URL: gateway },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  return new Promise((resolve, reject) => {
    proc.on('exit', (code) => reject(new Error(`npm run idp exited (${code}):\n${out}`)));
    proc.stderr!.on('data', (d) => (out += d));
    proc.stdout!.on('data', (d) => {
      out += d;
      const m = /OIDC_ISSUER=(\S+) OIDC_CLIENT_ID=(\S+) OIDC_CLIENT_SECRET=(\S+) npm start/.exec(out);
      if (m && out.includes('members invite')) resolve({ proc, vars: { OIDC_ISSUER: m[1]!, OIDC_CLIENT_ID: m[2]!, OIDC_CLIENT_SECRET: m[3]! }, banner: out });
    });
  });
}

describe.skipIf(!HAVE_CHROMIUM)('npm run idp: the development OpenID provider', () => {
  let idp: ChildProcess | undefined;
  let gw: Gateway;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    const idpPort = await freePort();
    const issuer = `http://127.0.0.1:${idpPort}`;
    // The gateway needs the issuer before it starts, the provider the gateway's URL: the port is chosen first.
    gw = await startGateway({
      vars: { OIDC_ISSUER: issuer, OIDC_CLIENT_ID: 'gatehouse-dev', OIDC_CLIENT_SECRET: 'gatehouse-dev-secret' },
      beforeStart: async (persist) =>
        execSql(
          persist,
          `INSERT INTO members (member_id, team, issuer, subject, email, name, role, created_at, added_by) VALUES ('mem_devowner', 'dev', '${issuer}', 'dev-owner', 'owner@gatehouse.test', 'Dev Owner', 'owner', ${Date.now()}, 'seed');`,
        ),
    });
    const started = await startIdp(idpPort, gw.url);
    idp = started.proc;
    // What the banner prints is what the gateway was configured with.
    expect(started.vars).toEqual({ OIDC_ISSUER: issuer, OIDC_CLIENT_ID: 'gatehouse-dev', OIDC_CLIENT_SECRET: 'gatehouse-dev-secret' });
    // docs/members.md's recipe is what the banner says (on the default port).
    const [run, start, invite] = readmeBlock('dev-idp');
    expect(run).toBe('npm run idp');
    expect(started.banner.replaceAll(issuer, 'http://127.0.0.1:8788')).toContain(start);
    expect(started.banner).toContain(invite);
    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
    page = await browser.newPage();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    if (idp?.pid) process.kill(-idp.pid, 'SIGTERM');
    await gw?.stop();
  });

  it('refuses a wrong password on its form, naming the one user it knows', async () => {
    await page.goto(`${gw.url}/dashboard`);
    await (await page.waitForSelector('#idp-signin'))!.click();
    await page.waitForSelector('input[name=password]', { timeout: 30_000 });
    await page.type('input[name=email]', 'owner@gatehouse.test');
    await page.type('input[name=password]', 'not-the-password');
    await Promise.all([page.waitForNavigation(), page.click('#sign-in')]);
    expect(await page.$eval('#error', (e: any) => e.innerText)).toBe(
      'Wrong email or password: this provider knows only owner@gatehouse.test with password gatehouse.',
    );
  });

  it('signs the documented user in to the dashboard as the team owner', async () => {
    await page.type('input[name=email]', 'owner@gatehouse.test');
    await page.type('input[name=password]', 'gatehouse');
    await page.click('#sign-in');
    await page.waitForFunction((u: string) => location.href.startsWith(`${u}/dashboard`) && document.querySelector('main h1'), { timeout: 30_000 }, gw.url);
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
    const session = await page.evaluate(async () => (await fetch('/dashboard/auth/session')).json());
    expect(session).toMatchObject({ signedIn: true, email: 'owner@gatehouse.test', teams: [{ team: 'dev', role: 'owner', memberId: 'mem_devowner' }] });
    await page.screenshot({ path: join(ROOT, 'test/screenshots/dashboard-dev-idp-signed-in.png'), fullPage: true });
  });
});
