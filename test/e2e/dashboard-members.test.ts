/**
 * The Members page of a team that has no members yet, in real chromium against the real gateway: it says so in
 * words, with nothing else (no stray `null`) under the sentence. Screenshot in test/screenshots/.
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

requireChromium('members page browser test');
const SHOTS = join(ROOT, 'test/screenshots');

describe.skipIf(!HAVE_CHROMIUM)('members page of a team without members', () => {
  let gw: Gateway;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    gw = await startGateway();
    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
    await page.goto(`${gw.url}/dashboard`);
    const field = await page.waitForSelector(aria('Admin token'));
    await field!.type(await gw.token({ team: 'empty', scopes: ['admin'], subject: 'empty-admin' }));
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await gw?.stop();
  });

  it('says "No members yet" and shows no literal null anywhere on the page', async () => {
    await goTo(page, '#/members', 'Members');
    await page.waitForFunction(() => document.getElementById('members-list')?.innerText.includes('No members yet'), { timeout: 15_000 });
    await page.screenshot({ path: join(SHOTS, 'dashboard-members-empty.png'), fullPage: true });
    const text: string = await page.$eval('main', (e: any) => e.innerText);
    expect(text).toContain('No members yet: invite the first owner below.');
    expect(text).not.toMatch(/\bnull\b/);
    expect(text).not.toMatch(/\bundefined\b/);
  });

  it('with only a pending invitation, still says "No members yet", lists the invitation, and shows no null', async () => {
    await fillField(page, 'Email', 'first-owner@example.com');
    await page.click('#invite-form button[type=submit]');
    await page
      .waitForFunction(() => document.getElementById('members-list')?.innerText.includes('first-owner@example.com'), { timeout: 15_000 })
      .catch(async (e) => {
        throw new Error(`${e}; the page says: ${await page.$eval('main', (m: any) => m.innerText)}`);
      });
    await page.screenshot({ path: join(SHOTS, 'dashboard-members-invited.png'), fullPage: true });
    const list: string = await page.$eval('#members-list', (e: any) => e.innerText);
    expect(list).toContain('No members yet');
    expect(list).toContain('Pending invitations');
    expect(await page.$eval('main', (e: any) => e.innerText)).not.toMatch(/\bnull\b|\bundefined\b/);
  });
});
