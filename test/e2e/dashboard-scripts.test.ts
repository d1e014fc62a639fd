/**
 * The dashboard's Scripts page in a real browser (Debian's chromium via puppeteer-core) against the real gateway:
 * the team's library listed, a script's versions, the source of the newest and of an older version, and a hostile
 * script's text shown inert. Screenshots go to test/screenshots/dashboard-scripts-*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { aria, goTo } from '../support/dashboard-page.ts';
import { ROOT, startGateway, type Gateway } from './harness.ts';

declare const document: any, window: any;

requireChromium('dashboard scripts page tests');
const SHOTS = join(ROOT, 'test/screenshots');
const TEAM = 'script-page';
const V1 = "console.log('first');\nreturn vars.NAME;\n";
const V2 = "const who = vars.NAME ?? 'world';\nreturn `hello ${who}`;\n";
const HOSTILE = "// \u202eexe.live\nreturn '<img src=x onerror=window.__pwned=1>';\n";

let gw: Gateway;
let browser: Browser;
let page: Page;
let adminToken: string;

async function push(name: string, source: string): Promise<void> {
  const r = await fetch(`${gw.url}/admin/v1/scripts`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name, source }),
  });
  expect(r.status).toBe(201);
}

describe.skipIf(!HAVE_CHROMIUM)('the Scripts page', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    gw = await startGateway();
    adminToken = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'page-admin' });
    await push('hello', V1);
    await push('hello', V2);
    await push('hostile', HOSTILE);
    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
    page = await browser.newPage();
    await page.setViewport({ width: 1366, height: 768 });
    await page.goto(`${gw.url}/dashboard`);
    const field = await page.waitForSelector(aria('Admin token'));
    await field!.type(adminToken);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 30_000 });
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await gw?.stop();
  });

  it('lists the scripts with their newest version, linked from the navigation', async () => {
    await page.click('nav a[data-page=scripts]');
    await page.waitForSelector('tr[data-script=hello]', { timeout: 15_000 });
    const row = await page.$eval('tr[data-script=hello]', (e: any) => e.innerText.replace(/\s+/g, ' '));
    expect(row).toMatch(/^hello 2 2 /);
    expect(row).toContain('page-admin');
    await page.screenshot({ path: join(SHOTS, 'dashboard-scripts-list.png'), fullPage: true });
  });

  it("shows a script's versions and the newest version's source, then an older one's", async () => {
    await page.click('tr[data-script=hello] a');
    await page.waitForSelector('pre[data-script-source]', { timeout: 15_000 });
    expect(await page.$$eval('tr[data-version]', (rows: any[]) => rows.map((r) => r.getAttribute('data-version')))).toEqual(['2', '1']);
    expect(await page.$eval('pre[data-script-source]', (e: any) => e.textContent)).toBe(V2);
    await page.screenshot({ path: join(SHOTS, 'dashboard-scripts-show.png'), fullPage: true });
    await page.click('tr[data-version="1"] a');
    await page.waitForFunction((v: string) => document.querySelector('pre[data-script-source]')?.textContent === v, { timeout: 15_000 }, V1);
    expect(await page.$eval('tr[aria-current]', (e: any) => e.getAttribute('data-version'))).toBe('1');
    expect(await page.evaluate(() => window.location.hash)).toBe('#/scripts/hello?version=1');
  });

  it("shows a hostile script's text inert: markup as text, a bidi override as its escape", async () => {
    await goTo(page, '#/scripts/hostile', 'Script');
    await page.waitForSelector('pre[data-script-source]', { timeout: 15_000 });
    const text = await page.$eval('pre[data-script-source]', (e: any) => e.textContent);
    expect(text).not.toContain('\u202e');
    expect(text).toContain('<img src=x onerror=window.__pwned=1>');
    expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
    expect(await page.$('pre[data-script-source] img')).toBeNull();
  });

  it('an unknown script is an error naming what the library holds', async () => {
    await goTo(page, '#/scripts/nope', 'Script');
    await page.waitForFunction(() => /no script named "nope" in the team library \(hello, hostile\)/.test(document.querySelector('main')?.innerText ?? ''), {
      timeout: 15_000,
    });
  });
});
