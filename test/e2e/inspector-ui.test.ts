/**
 * The MCP Inspector's web UI (the pinned @modelcontextprotocol/inspector, 2.x) against the real gateway, started
 * exactly as docs/clients.md says (`inspector-ui` block): the Inspector's web server on loopback serves the UI and
 * makes the MCP requests itself (Streamable HTTP with the bearer header given on its command line); the browser
 * talks only to that server, authenticated by the API token in the URL the Inspector prints. In Debian's Chromium the
 * test switches the server on, opens Tools, runs `list_runtimes` and sees the gateway's answer; the gateway's audit
 * log shows the call under the token's subject. Screenshots go to test/screenshots/.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { readmeBlock } from '../cli/readme.ts';
import { ROOT, freePort, startGateway, stopGroup, type Gateway } from './harness.ts';

declare const document: any;

requireChromium('MCP Inspector web UI test');
const SHOTS = join(ROOT, 'test/screenshots');
const TEAM = 'inspector';

let gw: Gateway;
let inspector: ChildProcess | undefined;
let inspectorLog = '';
let uiUrl = '';
let browser: Browser | undefined;
const dirs: string[] = [];

beforeAll(async () => {
  if (!HAVE_CHROMIUM) return;
  mkdirSync(SHOTS, { recursive: true });
  gw = await startGateway();
  const [line] = readmeBlock('inspector-ui');
  expect(line).toMatch(/^npx @modelcontextprotocol\/inspector --web /);
  const storage = mkdtempSync(join(tmpdir(), 'gatehouse-inspector-'));
  dirs.push(storage);
  const env = {
    ...process.env,
    GATEHOUSE_URL: gw.url,
    TOKEN: await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'], subject: 'inspector-user' }),
    // Free ports instead of the defaults (6274-6278), so the test runs beside other Inspectors; no browser is opened
    // by the Inspector itself, and its secrets stay in memory.
    CLIENT_PORT: String(await freePort()),
    MCP_SANDBOX_PORT: String(await freePort()),
    MCP_APP_ORIGIN_PORT: String(await freePort()),
    MCP_AUTO_OPEN_ENABLED: 'false',
    MCP_INSPECTOR_SECRET_STORE: 'memory',
    MCP_STORAGE_DIR: storage,
  };
  inspector = spawn('/bin/sh', ['-ec', line], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  inspector.stdout!.on('data', (d) => (inspectorLog += d));
  inspector.stderr!.on('data', (d) => (inspectorLog += d));
  const until = Date.now() + 90_000;
  for (;;) {
    const m = /up and running at:\s+(http:\/\/\S+\?MCP_INSPECTOR_API_TOKEN=\S+)/.exec(inspectorLog);
    if (m) {
      uiUrl = m[1];
      break;
    }
    if (inspector.exitCode !== null || Date.now() > until) throw new Error(`the Inspector did not start:\n${inspectorLog}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const profile = mkdtempSync(join(tmpdir(), 'gatehouse-chromium-'));
  dirs.push(profile);
  browser = await launchChromium(profile);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  if (inspector) await stopGroup(inspector);
  await gw?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const bodyText = (page: Page): Promise<string> => page.evaluate(() => document.body.innerText as string);

describe.skipIf(!HAVE_CHROMIUM)('the MCP Inspector web UI', () => {
  it('connects to the gateway over Streamable HTTP with the bearer token and calls a tool', async () => {
    const page = await browser!.newPage();
    await page.setViewport({ width: 1366, height: 900 });
    await page.goto(uiUrl);
    // A locator re-finds the switch if the Inspector re-renders it between finding and clicking.
    await page.locator('input[aria-label^="Connect or disconnect"]').setTimeout(30_000).click();
    await page.waitForFunction(() => document.body.innerText.includes('Connected') && document.body.innerText.includes('MCP 20'), { timeout: 60_000 });
    await page.screenshot({ path: join(SHOTS, 'inspector-ui-connected.png') });

    // The tab bar is a Mantine SegmentedControl: its radio is what selects the tab (a mouse click on the label's centre
    // did not always select it).
    await page.$eval('input[type=radio][value=Tools]', (el) => (el as unknown as { click(): void }).click());
    await page.waitForSelector('button::-p-text(list_runtimes)', { timeout: 30_000 });
    expect(await bodyText(page)).toContain('execute');
    await page.locator('button::-p-text(list_runtimes)').click();
    await page.locator('button::-p-text(Execute Tool)').click();
    await page.waitForFunction(() => document.body.innerText.includes(`no executor agent is connected for team 'inspector'`), { timeout: 60_000 });
    await page.screenshot({ path: join(SHOTS, 'inspector-ui-tool-call.png') });

    const admin = await gw.token({ team: TEAM, scopes: ['admin'] });
    const audit = (await (await fetch(`${gw.url}/admin/v1/audit`, { headers: { Authorization: `Bearer ${admin}` } })).json()) as {
      entries?: { tool: string; subject: string }[];
    };
    expect(JSON.stringify(audit)).toMatch(/"tool":"list_runtimes"[^}]*"subject":"inspector-user"|"subject":"inspector-user"[^}]*"tool":"list_runtimes"/);
  }, 180_000);
});
