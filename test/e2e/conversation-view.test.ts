/**
 * An interactive job's conversation, live, in a real browser (Debian's chromium via puppeteer-core): a Python REPL
 * started through the official MCP client on a real agent with gVisor (`runsc`), fed with `job_input`, while the
 * dashboard's job page and the job's MCP Apps view (ui://gatehouse/job-output.html, framed by the page as a chat
 * client frames it) each show every write where it fell in stdout, followed by the REPL's answer. Screenshots go to
 * test/screenshots/conversation-*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Browser, Frame, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { aria, goTo } from '../support/dashboard-page.ts';
import { ROOT, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { PRESETS } from '../../src/policy/presets.ts';
import { requireTool } from '../executor/helpers.ts';

// Callbacks given to page.evaluate/waitForFunction run in the browser; the project's types have no DOM lib.
declare const document: any;

requireChromium('conversation view tests');
const RUNSC = requireTool('gvisor');
const SHOTS = join(ROOT, 'test/screenshots');
const TEAM = 'convo';
type S = Record<string, unknown>;

let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;
let browser: Browser;
let page: Page;

async function call(name: string, args: S): Promise<S> {
  return (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as S;
}
const data = (r: S) => r.structuredContent as S;
const text = (r: S) => (r.content as { text: string }[])[0]?.text ?? '';

/** Waits until the element's text contains every one of `parts`, in order. */
async function shows(where: Page | Frame, selector: string, parts: string[]): Promise<string> {
  await where
    .waitForFunction(
      (sel: string, want: string[]) => {
        const t: string = document.querySelector(sel)?.textContent ?? '';
        let at = 0;
        for (const w of want) {
          at = t.indexOf(w, at);
          if (at < 0) return false;
          at += w.length;
        }
        return true;
      },
      { timeout: 30_000 },
      selector,
      parts,
    )
    .catch(async (e) => {
      const seen = await where.evaluate((sel: string) => document.querySelector(sel)?.outerHTML ?? '(none)', selector);
      throw new Error(`${selector} never showed ${JSON.stringify(parts)}; it shows ${seen.slice(0, 2000)} (${e})`);
    });
  return where.$eval(selector, (e: any) => e.textContent as string);
}

describe.skipIf(!HAVE_CHROMIUM || !RUNSC)("an interactive job's conversation in the dashboard and the MCP Apps view", () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    gw = await startGateway();
    root = mkdtempSync(join(tmpdir(), 'gatehouse-convo-'));
    const open = PRESETS.open.policy;
    // The writes' text is kept (auditInputText), so the views show what was typed, not only its size.
    await gw.putPolicy(TEAM, { ...open, interactive: { ...open.interactive, enabled: true, auditInputText: true } });
    agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: 'gvisor', capacity: 2, agentId: 'agent-convo' });
    // The harness gives an agent 30 s; probing runtimes on a loaded machine can take longer, so wait for the line itself.
    await agent.ready.catch(async () => {
      for (let i = 0; i < 360 && !/connected to /.test(agent.logs()); i++) await new Promise((r) => setTimeout(r, 500));
      if (!/connected to /.test(agent.logs())) throw new Error(`agent did not connect:\n${agent.logs()}`);
    });
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
    page = await browser.newPage();
    await page.setViewport({ width: 1366, height: 900 });
    await page.goto(`${gw.url}/dashboard`);
    const field = await page.waitForSelector(aria('Admin token'));
    await field!.type(await gw.token({ team: TEAM, scopes: ['admin'] }));
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
  }, 900_000);

  afterAll(async () => {
    await browser?.close();
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('shows each job_input and the REPL answer live on the job page and in its MCP Apps view', async () => {
    const started = await call('execute', { command: 'python3', args: ['-i', '-q', '-u'], interactive: true });
    expect(started.isError, text(started)).toBeFalsy();
    const jobId = data(started).job_id as string;
    const prompt = await call('job_output', { job_id: jobId, stream: 'stderr', wait_ms: 30_000, until: '>>> ' });
    expect(data(prompt).data).toContain('>>> ');

    await goTo(page, `#/jobs/${jobId}`, 'Job ');
    await page.click(aria('Open the MCP Apps view'));
    const frameEl = await page.waitForSelector('iframe.appframe', { timeout: 10_000 });
    let view: Frame | null = null;
    for (let i = 0; i < 100 && !view; i++) {
      const f = await frameEl!.contentFrame();
      if (f?.url().endsWith('/dashboard/app/job-output.html')) view = f;
      else await new Promise((r) => setTimeout(r, 100));
    }
    if (!view) throw new Error('the MCP Apps view did not load');
    await view.waitForFunction(() => /running/.test(document.getElementById('state').textContent), { timeout: 30_000 });

    // First write: both views show it, then the answer, while the job runs.
    const w1 = await call('job_input', { job_id: jobId, data: 'print(6 * 7)\n' });
    expect(w1.isError, text(w1)).toBeFalsy();
    const onPage = 'section[aria-label=conversation] pre';
    expect(await shows(page, onPage, ['› print(6 * 7)\n', '42\n'])).toBe('› print(6 * 7)\n42\n');
    expect(await shows(view, '#conversation', ['› print(6 * 7)\n', '42\n'])).toBe('› print(6 * 7)\n42\n');

    // Second write: it lands after the first answer, in order, on both.
    await call('job_input', { job_id: jobId, data: 'print("answer:", 6 * 7 + 1)\n' });
    const both = '› print(6 * 7)\n42\n› print("answer:", 6 * 7 + 1)\nanswer: 43\n';
    expect(await shows(page, onPage, ['42\n', '› print("answer:", 6 * 7 + 1)\n', 'answer: 43\n'])).toBe(both);
    expect(await shows(view, '#conversation', ['42\n', '› print("answer:", 6 * 7 + 1)\n', 'answer: 43\n'])).toBe(both);
    expect(await view.$eval('#state', (e: any) => e.textContent)).toMatch(/running/);
    await frameEl!.evaluate((f: any) => f.scrollIntoView({ block: 'start' }));
    await page.screenshot({ path: join(SHOTS, 'conversation-dashboard-app-view.png'), fullPage: true });
    await page.evaluate(() => document.querySelector('section[aria-label=conversation]').scrollIntoView({ block: 'start' }));
    await page.screenshot({ path: join(SHOTS, 'conversation-dashboard-job-page.png') });

    // The end: eof closes stdin, the REPL exits 0, and the view says so.
    await call('job_input', { job_id: jobId, data: '', eof: true });
    const st = await call('job_status', { job_id: jobId, wait_ms: 60_000 });
    expect(data(st)).toMatchObject({ state: 'exited', exit_code: 0 });
    await view.waitForFunction(() => /exited \(exit 0\)/.test(document.getElementById('state').textContent), { timeout: 30_000 });
  }, 300_000);
});
