/**
 * Approvals in the dashboard, in a real browser (Debian's chromium via puppeteer-core) against the
 * real gateway: the policy page's dry run shows an `ask` decision, the Approvals page lists what
 * an MCP client (SDK v1, no elicitation) is waiting for, and its Approve / Deny buttons decide it
 * for the signed-in admin, which the caller's retry then sees.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Browser, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { connectMcp, startGateway, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { aria, fillField, goTo } from '../support/dashboard-page.ts';

declare const document: any, location: any;

requireChromium('approval dashboard tests');

const TEAM = 'appr-dash';
let gw: Gateway;
let browser: Browser;
let page: Page;
let client: Client;
let adminToken: string;

const fill = (label: string, value: string) => fillField(page, label, value);
const go = (hash: string, heading: string) => goTo(page, hash, heading);
async function ask(word: string): Promise<string> {
  const r = (await client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['ship-it', word] } })) as { structuredContent?: any };
  expect(r.structuredContent?.error?.code).toBe('approval_required');
  return r.structuredContent.approval.id as string;
}
async function approvalStatus(id: string): Promise<{ status: string; decided_by: string | null }> {
  const r = await fetch(`${gw.url}/admin/v1/approvals/${id}`, { headers: { Authorization: `Bearer ${adminToken}` } });
  return ((await r.json()) as { approval: { status: string; decided_by: string | null } }).approval;
}

describe.skipIf(!HAVE_CHROMIUM)('approvals in the dashboard', () => {
  beforeAll(async () => {
    gw = await startGateway();
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, rules: [{ pattern: ['echo', 'ship-it'], decision: 'ask', reason: 'shipping needs a person' }] });
    adminToken = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'dash-admin' });
    client = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'], subject: 'agent-7' }));
    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
    page = await browser.newPage();
    await page.setViewport({ width: 1366, height: 900 });
    await page.goto(`${gw.url}/dashboard`);
    await page.waitForSelector(aria('Admin token'));
    await page.keyboard.type(adminToken);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await client?.close();
    await gw?.stop();
  });

  it('the dry run shows "needs approval" with the rule and its reason', async () => {
    await go('#/policy', 'Policy');
    await fill('Command', 'echo');
    await fill('Arguments (one per line)', 'ship-it');
    await page.click(aria('Check'));
    const v = await page.waitForSelector('.verdict[data-decision=ask]', { timeout: 10_000 });
    expect(await v!.evaluate((e: any) => e.textContent)).toBe('Needs approval (ask)');
    await page.waitForFunction(() => document.getElementById('main').innerText.includes('Approval required by rule 1: shipping needs a person'), {
      timeout: 10_000,
    });
  });

  it("lists pending approvals and decides them with Approve / Deny; the caller's retry sees the decision", async () => {
    const yes = await ask('one');
    const no = await ask('two');
    await go('#/approvals', 'Approvals');
    await page.waitForSelector(aria(`Approve ${yes}`), { timeout: 15_000 });
    const row = await page.$eval(`tr[data-approval="${yes}"]`, (e: any) => e.innerText);
    expect(row).toContain('agent-7');
    expect(row).toContain('echo ship-it one');
    expect(row).toContain('shipping needs a person');

    // Locators re-find the button when the list re-renders between finding and clicking it (a deciding refresh does).
    await page.locator(aria(`Approve ${yes}`)).click();
    await page.waitForFunction(
      (id: string) => document.querySelector('main [role=status]')?.textContent?.startsWith(`Approved ${id}`),
      { timeout: 15_000 },
      yes,
    );
    expect(await approvalStatus(yes)).toMatchObject({ status: 'approved', decided_by: 'dash-admin' });
    await page.locator(aria(`Deny ${no}`)).click();
    await page.waitForFunction((id: string) => document.querySelector('main [role=status]')?.textContent?.startsWith(`Denied ${id}`), { timeout: 15_000 }, no);
    expect(await approvalStatus(no)).toMatchObject({ status: 'denied', decided_by: 'dash-admin' });
    // Both leave the pending list for the decided one.
    await page.waitForFunction(() => document.getElementById('main').innerText.includes('Nothing is waiting for approval.'), { timeout: 15_000 });

    const denied = (await client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['ship-it', 'two'], approval_id: no } })) as {
      structuredContent?: any;
    };
    expect(denied.structuredContent?.error?.code).toBe('approval_denied');
    // No agent in this team: the approved retry (background, which is not part of what was approved) is accepted and queued.
    const approved = (await client.callTool({
      name: 'execute',
      arguments: { command: 'echo', args: ['ship-it', 'one'], approval_id: yes, background: true },
    })) as { isError?: boolean; structuredContent?: any };
    expect(approved.isError, JSON.stringify(approved)).toBeFalsy();
    expect(approved.structuredContent?.job_id).toBeTruthy();
    expect((await approvalStatus(yes)).status).toBe('used');
  });
});
