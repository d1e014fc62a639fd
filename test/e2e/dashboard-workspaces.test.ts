/**
 * The dashboard's Workspaces page in a real browser (Debian's chromium via puppeteer-core) against the real gateway
 * and a real agent in gVisor: the team's workspaces listed with agent and size, a Delete that is cancelled keeps the
 * row, a confirmed Delete removes the row, the workspace from the admin API and its files on the agent.
 * Screenshots go to test/screenshots/dashboard-workspaces-*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { aria } from '../support/dashboard-page.ts';
import { hasCommand, requireParts, ROOT, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { call } from './fleet.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

declare const document: any;
type S = Record<string, any>;

requireChromium('dashboard workspaces page tests');
const RUNSC = requireParts({ runsc: hasCommand('runsc') });
const SHOTS = join(ROOT, 'test/screenshots');
const TEAM = 'ws-page';

let gw: Gateway;
let browser: Browser;
let page: Page;
let client: Client;
let agent: AgentProcess;
let adminToken: string;
let stateDir: string;
const dirs: string[] = [];

const rowIds = () => page.$$eval('tr[data-workspace]', (rows: any[]) => rows.map((r) => r.getAttribute('data-workspace')));

describe.skipIf(!HAVE_CHROMIUM || !RUNSC)('the Workspaces page', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    const root = mkdtempSync(join(tmpdir(), 'gatehouse-wspage-root-'));
    stateDir = mkdtempSync(join(tmpdir(), 'gatehouse-wspage-state-'));
    dirs.push(root, stateDir);
    gw = await startGateway();
    await gw.putPolicy(TEAM, {
      ...DEFAULT_POLICY,
      executables: { allow: [...DEFAULT_POLICY.executables.allow, 'sh', 'echo'] },
      shell: { enabled: true, allow: ['/.*/'] },
      sandbox: { minimum: 'gvisor', reuse: { jobs: 20, seconds: 600 } },
    });
    adminToken = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'page-admin' });
    client = await gw.mcp(TEAM, ['execute']);
    agent = startAgent(gw, {
      token: await gw.token({ team: TEAM, scopes: ['agent'] }),
      root,
      sandbox: 'gvisor',
      capacity: 2,
      agentId: 'page-gvisor',
      extraArgs: ['--state-dir', stateDir],
    });
    await agent.ready;
    for (const id of ['alpha', 'beta']) {
      const r = await call(client, 'execute', { command: `echo ${id} > f`, workspace: id }, 120_000);
      expect(r.s.exit_code, `${r.t}\n${agent.logs()}`).toBe(0);
    }
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
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it('lists the workspaces with their agent and size, linked from the navigation', async () => {
    await page.click('nav a[data-page=workspaces]');
    await page.waitForSelector('tr[data-workspace=alpha]', { timeout: 15_000 });
    expect((await rowIds()).sort()).toEqual(['alpha', 'beta']);
    const row = await page.$eval('tr[data-workspace=alpha]', (e: any) => e.innerText.replace(/\s+/g, ' '));
    expect(row).toMatch(/^alpha page-gvisor \d/);
    expect(row).toContain('Delete');
    await page.screenshot({ path: join(SHOTS, 'dashboard-workspaces-list.png'), fullPage: true });
  });

  it('a Delete that is not confirmed keeps the workspace', async () => {
    page.once('dialog', (d) => void d.dismiss());
    await page.click(aria('Delete workspace beta'));
    expect(await rowIds()).toContain('beta');
    const api = await fetch(`${gw.url}/admin/v1/workspaces`, { headers: { Authorization: `Bearer ${adminToken}` } });
    expect(((await api.json()) as S).workspaces.map((w: S) => w.id)).toContain('beta');
    expect(existsSync(join(stateDir, 'workspaces', 'beta', 'f'))).toBe(true);
  });

  it('a confirmed Delete removes the row, the workspace and its files on the agent', async () => {
    let asked = '';
    page.once('dialog', (d) => {
      asked = d.message();
      void d.accept();
    });
    await page.click(aria('Delete workspace beta'));
    await page.waitForFunction(() => !document.querySelector('tr[data-workspace=beta]'), { timeout: 15_000 });
    expect(asked).toContain('Delete workspace beta');
    expect(await rowIds()).toEqual(['alpha']);
    await page.waitForFunction(() => /Deleted workspace beta/.test(document.querySelector('main')?.innerText ?? ''), { timeout: 15_000 });
    const api = await fetch(`${gw.url}/admin/v1/workspaces`, { headers: { Authorization: `Bearer ${adminToken}` } });
    expect(((await api.json()) as S).workspaces.map((w: S) => w.id)).toEqual(['alpha']);
    await expect.poll(() => existsSync(join(stateDir, 'workspaces', 'beta')), { timeout: 30_000 }).toBe(false);
    expect(existsSync(join(stateDir, 'workspaces', 'alpha', 'f'))).toBe(true);
    await page.screenshot({ path: join(SHOTS, 'dashboard-workspaces-deleted.png'), fullPage: true });
  });
});
