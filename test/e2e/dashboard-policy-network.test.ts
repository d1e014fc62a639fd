/**
 * The Policy page in real chromium against the real gateway: the team's network is edited in its own form (mode,
 * allowed hosts, private addresses) that writes into the JSON the editor saves, with a bad host refused by line; the
 * preset box reads as a starting point, not as the current policy. Screenshot in test/screenshots/.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { aria, fillField, goTo } from '../support/dashboard-page.ts';
import { ROOT, startGateway, type Gateway } from './harness.ts';

declare const document: any;

requireChromium('policy network form browser test');
const SHOTS = join(ROOT, 'test/screenshots');
const TEAM = 'netform';

describe.skipIf(!HAVE_CHROMIUM)('policy page: network form and presets', () => {
  let gw: Gateway;
  let browser: Browser;
  let page: Page;
  let admin: string;
  const editorDoc = async () => JSON.parse(await page.$eval('textarea[name=policy]', (e: any) => e.value));
  const serverPolicy = async () =>
    (await (await fetch(`${gw.url}/admin/v1/policy`, { headers: { Authorization: `Bearer ${admin}` } })).json()) as { version: number; policy: any };

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    gw = await startGateway();
    admin = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'netform-admin' });
    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    await page.goto(`${gw.url}/dashboard`);
    await (await page.waitForSelector(aria('Admin token')))!.type(admin);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
    await goTo(page, '#/policy', 'Policy');
    await page.waitForFunction(() => document.querySelector('textarea[name=policy]')?.value.includes('"network"'), { timeout: 15_000 });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await gw?.stop();
  });

  it('labels presets as starting points that change nothing until saved', async () => {
    await page.waitForFunction(() => document.querySelector('select[name=preset] option'), { timeout: 15_000 });
    const box: string = await page.$eval('[aria-labelledby=pol-presets]', (e: any) => e.innerText);
    expect(box).toContain('Start from a preset');
    expect(box).toContain('starting points, not the current policy');
    expect(box).toMatch(/Starting point "[^"]+": /);
    expect(await page.$(aria('Load as a starting point'))).not.toBeNull();
  });

  it('shows the current network in the form and refuses a bad host by line, writing nothing', async () => {
    expect(await page.$eval('select[name=network-mode]', (e: any) => e.value)).toBe('off');
    expect(await page.$eval('textarea[name=network-allow]', (e: any) => e.value)).toBe('');
    const before = await editorDoc();
    await fillField(page, 'Allowed hosts (one per line)', 'registry.npmjs.org\nhttps://evil.example/path');
    await page.click(aria('Write network into the editor'));
    await page.waitForFunction(() => document.querySelector('form[aria-label=Network] [role=alert]')?.textContent, { timeout: 10_000 });
    expect(await page.$eval('form[aria-label=Network] [role=alert]', (e: any) => e.textContent)).toBe(
      'Line 2: "https://evil.example/path" is not a host; write an exact name (registry.npmjs.org), a wildcard *.example.org, or an IP address.',
    );
    expect(await editorDoc()).toEqual(before);
  });

  it('writes mode, hosts and privateAddresses into the JSON, which saves as the team network', async () => {
    await page.select(aria('Network mode'), 'allowlist');
    await fillField(page, 'Allowed hosts (one per line)', 'registry.npmjs.org\nnpm.internal.example private');
    await page.click(aria('Write network into the editor'));
    await page.waitForFunction(() => document.querySelector('textarea[name=policy]')?.value.includes('npm.internal.example'), { timeout: 10_000 });
    const doc = await editorDoc();
    expect(doc.network.mode).toBe('allowlist');
    expect(doc.network.allow).toEqual([{ host: 'registry.npmjs.org' }, { host: 'npm.internal.example', privateAddresses: true }]);
    // Nothing is current until saved.
    expect((await serverPolicy()).policy.network.mode).toBe('off');
    await page.screenshot({ path: join(SHOTS, 'dashboard-policy-network.png'), fullPage: true });
    await page.click(aria('Save as new version'));
    await page.waitForFunction(() => /the policy is now version \d+/.test(document.getElementById('main').innerText), { timeout: 15_000 });
    const saved = await serverPolicy();
    expect(saved.policy.network).toMatchObject({
      mode: 'allowlist',
      allow: [{ host: 'registry.npmjs.org' }, { host: 'npm.internal.example', privateAddresses: true }],
    });
    // Reloaded from the gateway, the form shows what is saved.
    expect(await page.$eval('textarea[name=network-allow]', (e: any) => e.value)).toBe('registry.npmjs.org\nnpm.internal.example private');
  });
});
