/**
 * What a first user of the dashboard needs, in a real browser (Debian's chromium via puppeteer-core) against the
 * real gateway, a real agent and the official MCP client, on a laptop screen (1366 × 768): the Overview landing
 * page (agents, the last hour's jobs by state, denials, pending approvals, recent failures, each a link); what
 * each job ran (command, cwd) and why it was allowed, in the Jobs list and on the job page, with hostile text
 * inert; failures that look like failures; long data that never makes a page scroll sideways; a focus ring for
 * the keyboard only; a favicon; and the job's MCP Apps view framed as a chat client frames it. Screenshots go to
 * test/screenshots/dashboard-first-*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Browser, Frame, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { aria, goTo } from '../support/dashboard-page.ts';
import { connectMcp, ROOT, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

// Callbacks given to page.evaluate/waitForFunction run in the browser; the project's types have no DOM lib.
declare const document: any, window: any, getComputedStyle: any, innerWidth: number;

requireChromium('dashboard first-user tests');
const SANDBOX = testSandbox();
const SHOTS = join(ROOT, 'test/screenshots');
const TEAM = 'first-look';
const ESC = '\x1b';
/** Characters a browser or terminal acts on instead of showing (as in audit-hostile-text.test.ts). */
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/u;
const HOSTILE_ARGS = [`${ESC}[2J${ESC}[31mred`, '\u202eexe.live', '<script>window.__pwned=1</script>', '<img src=x onerror=window.__pwned=2>'];
const LONG_DIR = `a-rather-long-working-directory-${'d'.repeat(120)}`;
const LONG_ARGS = Array.from({ length: 30 }, (_, i) => `argument-number-${i}-${'z'.repeat(i === 7 ? 150 : 4)}`);
const LONG_SUBJECT = `a-caller-with-a-very-long-subject-${'s'.repeat(150)}`;
const LONG_EXE = `not-an-allowed-tool-${'x'.repeat(250)}`;

let gw: Gateway;
let agent: AgentProcess;
let root: string;
let browser: Browser;
let page: Page;
let client: Client;
let longClient: Client;
let adminToken: string;
const notFound: string[] = [];
const cspViolations: string[] = [];
const jobs: Record<string, string> = {};

const go = (hash: string, heading: string) => goTo(page, hash, heading);
const shot = (name: string) => page.screenshot({ path: join(SHOTS, `dashboard-first-${name}.png`), fullPage: true });
async function admin<T>(path: string, init: RequestInit = {}): Promise<T> {
  const r = await fetch(`${gw.url}/admin/v1${path}`, { ...init, headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' } });
  return (await r.json()) as T;
}
async function run(c: Client, args: Record<string, unknown>): Promise<{ job_id: string; exit_code?: number; state?: string }> {
  const r = await c.callTool({ name: 'execute', arguments: args }, undefined, { timeout: 60_000 });
  return r.structuredContent as { job_id: string; exit_code?: number; state?: string };
}
/** Until the job's call (its audit row, written in the background) is there, the list shows "…". */
async function waitCall(id: string) {
  for (let i = 0; i < 100; i++) {
    const r = await admin<{ job: { call: unknown } }>(`/jobs/${id}`);
    if (r.job.call) return;
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error(`job ${id} has no call after 20 s`);
}
/** The page is no wider than the window, and no table is wider than the main column. */
async function widths() {
  return page.evaluate(() => {
    const main = document.getElementById('main');
    const tables = [...document.querySelectorAll('main table')].map((t: any) => t.getBoundingClientRect().width);
    return { doc: document.documentElement.scrollWidth, win: innerWidth, main: main.clientWidth, widest: Math.max(0, ...tables) };
  });
}

describe.skipIf(!HAVE_CHROMIUM)('the dashboard for a first user', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    gw = await startGateway();
    root = mkdtempSync(join(tmpdir(), 'gatehouse-first-'));
    mkdirSync(join(root, LONG_DIR));
    agent = startAgent(gw, {
      token: await gw.token({ team: TEAM, scopes: ['agent'], subject: 'first-agent' }),
      root,
      sandbox: SANDBOX,
      capacity: 2,
      agentId: 'first-agent',
    });
    await agent.ready;
    await gw.putPolicy(TEAM, {
      ...DEFAULT_POLICY,
      rules: [{ pattern: ['echo', 'ship-it'], decision: 'ask', reason: `shipping needs a person ${'r'.repeat(200)}` }],
    });
    adminToken = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'first-admin' });
    client = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'], subject: 'first-client' }));
    longClient = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'], subject: LONG_SUBJECT }));

    jobs.ok = (await run(client, { command: 'echo', args: ['hello', 'first user'] })).job_id;
    const failed = await run(client, { command: 'false' });
    expect(failed.exit_code).toBe(1);
    jobs.failed = failed.job_id;
    jobs.timedOut = (await run(client, { command: 'sleep', args: ['20'], timeout_ms: 500 })).job_id;
    jobs.hostile = (await run(client, { command: 'echo', args: HOSTILE_ARGS })).job_id;
    const long = await run(longClient, { command: 'echo', args: LONG_ARGS, cwd: LONG_DIR });
    expect(long.exit_code).toBe(0);
    jobs.long = long.job_id;
    const denied = await longClient.callTool({ name: 'execute', arguments: { command: LONG_EXE, args: ['--with', 'y'.repeat(200)] } });
    expect(denied.isError).toBe(true);
    const asked = (await longClient.callTool({ name: 'execute', arguments: { command: 'echo', args: ['ship-it', 'w'.repeat(150)] } })) as {
      structuredContent?: any;
    };
    expect(asked.structuredContent?.error?.code).toBe('approval_required');
    // A token with a long subject and note, minted through the gateway (so listed on the Tokens page).
    const minted = await admin<{ jti: string }>('/tokens', {
      method: 'POST',
      body: JSON.stringify({ subject: `ci-${'y'.repeat(190)}`, scopes: ['execute'], note: `what it is for: ${'n'.repeat(300)}` }),
    });
    expect(minted.jti).toBeTruthy();
    for (const id of Object.values(jobs)) await waitCall(id);

    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
    page = await browser.newPage();
    await page.setViewport({ width: 1366, height: 768 });
    page.on('response', (r) => {
      if (r.status() === 404) notFound.push(r.url());
    });
    page.on('console', (m) => {
      if (/Content.Security.Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    await page.goto(`${gw.url}/dashboard`);
    const field = await page.waitForSelector(aria('Admin token'));
    await field!.type(adminToken);
    await page.keyboard.press('Enter');
    // The overview is the landing page.
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await client?.close();
    await longClient?.close();
    await agent?.stop();
    await gw?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it("the overview shows agents and slots, the last hour's jobs by state, denials, pending approvals and recent failures, each a link", async () => {
    expect(await page.evaluate(() => window.location.hash)).toBe('#/overview');
    // Wait until all five jobs are counted with their end (the page refreshes every 5 s).
    await page.waitForFunction(
      () =>
        Number(document.querySelector('[data-tile=jobs] .n')?.textContent) >= 5 &&
        document.querySelector('[data-tile=failures] .n')?.textContent === '2' &&
        !document.querySelector('[data-state-count=running]'),
      { timeout: 60_000 },
    );
    const tile = (k: string) => page.$eval(`[data-tile=${k}]`, (e: any) => ({ text: e.innerText.replace(/\s+/g, ' '), href: e.getAttribute('href') }));
    expect(await tile('agents')).toEqual({ text: '1 agent online 0 of 2 slots busy', href: '#/agents' });
    expect((await tile('jobs')).text).toMatch(/^5 jobs in the last hour 0 running or queued$/);
    expect(await tile('denials')).toEqual({ text: '1 denial in the last hour', href: '#/audit?decision=denied' });
    expect(await tile('approvals')).toEqual({ text: '1 pending approval', href: '#/approvals' });
    expect(await tile('failures')).toEqual({ text: '2 failed jobs in 24 h 1 in the last hour ended without an exit', href: '#/jobs' });
    // By state, each a link to the Jobs page filtered by it.
    const states = await page.$$eval('[data-state-count]', (as: any[]) => as.map((a) => [a.getAttribute('href'), a.innerText.replace(/\s+/g, ' ')]));
    expect(states).toEqual([
      ['#/jobs?state=exited', 'exited 4'],
      ['#/jobs?state=timed_out', 'timed_out 1'],
    ]);
    // Recent failures: the non-zero exit and the timeout, newest first, each linking to its job.
    const failures = await page.$$eval('tr[data-failed-job]', (trs: any[]) =>
      trs.map((t) => [t.getAttribute('data-failed-job'), t.cells[1].querySelector('.badge').textContent]),
    );
    expect(failures).toEqual([
      [jobs.timedOut, 'timed_out'],
      [jobs.failed, 'exited 1'],
    ]);
    expect(await page.$eval(`tr[data-failed-job="${jobs.failed}"] a`, (a: any) => a.getAttribute('href'))).toBe(`#/jobs/${jobs.failed}`);
    // The newest denial and the pending approval, with who asked.
    const denial = await page.$eval('tr[data-denial]', (t: any) => [t.innerText, t.querySelector('td.reason [title]').getAttribute('title')]);
    expect(denial[0]).toContain(LONG_SUBJECT);
    // The reason is cut in the table, whole on hover.
    expect(denial[1]).toContain(`Executable "${LONG_EXE}" is not in the allowed executables list`);
    expect(await page.$eval('tr[data-approval]', (t: any) => t.innerText)).toContain(LONG_SUBJECT);
    // What the team keeps, against its policy's retention, and what is dropped next.
    const storage = await page.$eval('[data-storage]', (e: any) => e.innerText.replace(/\s+/g, ' '));
    expect(storage).toMatch(
      /Storage and retention [\d.]+ MB of 1073\.7 MB \(policy retention\.maxBytes\) · audit kept 90 days \(retention\.auditDays\) · the next audit rows are exported and dropped .+ · 0 rows exported so far/,
    );
    await shot('overview');
    // The denials tile opens the audit log filtered to denials.
    await page.click('[data-tile=denials]');
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Audit log', { timeout: 15_000 });
    expect(await page.$eval(aria('Decision'), (s: any) => s.value)).toBe('denied');
    await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-decision]').length > 0, { timeout: 15_000 });
    expect(await page.$$eval('tbody tr[data-decision]', (trs: any[]) => trs.map((t) => t.getAttribute('data-decision')))).toEqual(['denied']);
    // A state opens the Jobs page filtered by that state.
    await go('#/jobs?state=timed_out', 'Jobs');
    expect(await page.$eval(aria('State'), (s: any) => s.value)).toBe('timed_out');
    await page.waitForFunction(() => document.querySelectorAll('tr[data-job]').length > 0, { timeout: 15_000 });
    expect(await page.$$eval('tr[data-job]', (trs: any[]) => trs.map((t) => t.getAttribute('data-job')))).toEqual([jobs.timedOut]);
  });

  it("the Jobs list and a job's page show the command, its cwd and the policy decision; a long command is cut, whole on hover and on expand", async () => {
    await go('#/jobs', 'Jobs');
    const row = `tr[data-job="${jobs.ok}"]`;
    await page.waitForSelector(row, { timeout: 15_000 });
    const cells = await page.$eval(row, (tr: any) => [...tr.cells].map((c: any) => c.innerText.trim()));
    expect(cells[2]).toBe('echo hello "first user"');
    expect(cells[3]).toMatch(/^allowed/);
    // The long one: cut to a line, the whole argv in the title and in a disclosure; the cwd under it.
    const long = `tr[data-job="${jobs.long}"]`;
    const full = ['echo', ...LONG_ARGS].join(' ');
    const cut = await page.$eval(`${long} details.cmd summary`, (s: any) => ({ text: s.innerText, title: s.getAttribute('title') }));
    expect(cut.title).toBe(full);
    expect(cut.text.endsWith('…')).toBe(true);
    expect(full.startsWith(cut.text.slice(0, -1))).toBe(true);
    expect(await page.$eval(`${long} .cwd`, (e: any) => e.innerText)).toBe(`in ${LONG_DIR}`);
    await page.click(`${long} details.cmd summary`);
    expect(await page.$eval(`${long} details.cmd code.full`, (e: any) => e.innerText)).toBe(full);
    // The live list refreshes every 2 s: the opened command stays open.
    await page.$eval(long, (e: any) => {
      e.__old = true;
    });
    await page.waitForFunction((sel: string) => document.querySelector(sel)?.__old !== true, { timeout: 10_000 }, long);
    expect(await page.$eval(`${long} details.cmd`, (d: any) => d.open)).toBe(true);
    await shot('jobs');
    // The job page: command, working directory, policy with the rule's reason.
    await go(`#/jobs/${jobs.long}`, 'Job ');
    await page.waitForSelector('dl.facts.call dd', { timeout: 15_000 });
    const facts = await page.$eval('dl.facts.call', (e: any) => e.innerText);
    expect(facts).toContain(full);
    expect(facts).toContain(LONG_DIR);
    expect(facts).toMatch(/Policy\s+allowed/);
    await shot('job-long');
  });

  it('a command carrying ESC sequences, U+202E and <script> renders inert, as visible escapes', async () => {
    await go('#/jobs', 'Jobs');
    const row = `tr[data-job="${jobs.hostile}"]`;
    await page.waitForSelector(`${row} td.command details`, { timeout: 15_000 });
    const expected = 'echo "\\x1b[2J\\x1b[31mred" "\\u202eexe.live" "<script>window.__pwned=1</script>" "<img src=x onerror=window.__pwned=2>"';
    const shown = await page.$eval(`${row} td.command`, (e: any) => ({
      cut: e.querySelector('summary').innerText,
      title: e.querySelector('summary').getAttribute('title'),
      full: e.querySelector('code.full').textContent,
    }));
    expect(expected.startsWith(shown.cut.slice(0, -1))).toBe(true);
    expect(shown.title).toBe(expected);
    expect(shown.full).toBe(expected);
    expect(shown.cut).not.toMatch(RAW);
    await go(`#/jobs/${jobs.hostile}`, 'Job ');
    await page.waitForSelector('dl.facts.call dd', { timeout: 15_000 });
    expect(await page.$eval('dl.facts.call', (e: any) => e.innerText)).toContain(expected);
    // The job's output (echo printed the ESC sequences and U+202E) is shown the same way, once it is there.
    await page.waitForFunction(() => (document.querySelector('pre.output[data-stream="stdout"]')?.textContent ?? '').includes('exe.live'), { timeout: 15_000 });
    expect(await page.$eval('pre.output[data-stream="stdout"]', (e: any) => e.textContent)).toContain('\\x1b[2J\\x1b[31mred \\u202eexe.live');
    // Nothing ran and nothing became markup: no script or image in the page, no raw control character anywhere in it.
    expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
    expect(await page.$$('main script, main img')).toHaveLength(0);
    expect(await page.evaluate(() => document.body.innerText)).not.toMatch(RAW);
    expect(await page.evaluate(() => [...document.querySelectorAll('[title]')].map((e: any) => e.getAttribute('title')).join('\n'))).not.toMatch(RAW);
    await shot('job-hostile');
  });

  it('a non-zero exit and a timeout look like failures (red), a clean exit like success', async () => {
    const colour = (sel: string) => page.$eval(sel, (e: any) => getComputedStyle(e).color);
    await go('#/jobs', 'Jobs');
    await page.waitForSelector(`tr[data-job="${jobs.failed}"]`, { timeout: 15_000 });
    const red = 'rgb(164, 14, 38)';
    const green = 'rgb(17, 99, 41)';
    expect(await page.$eval(`tr[data-job="${jobs.failed}"] .badge`, (e: any) => e.textContent)).toBe('exited 1');
    expect(await colour(`tr[data-job="${jobs.failed}"] .badge`)).toBe(red);
    expect(await colour(`tr[data-job="${jobs.failed}"] .exit`)).toBe(red);
    expect(await colour(`tr[data-job="${jobs.timedOut}"] .badge`)).toBe(red);
    expect(await page.$eval(`tr[data-job="${jobs.ok}"] .badge`, (e: any) => e.textContent)).toBe('exited');
    expect(await colour(`tr[data-job="${jobs.ok}"] .badge`)).toBe(green);
    await go(`#/jobs/${jobs.failed}`, 'Job ');
    await page.waitForSelector('dd .badge[data-state=exited]', { timeout: 15_000 });
    expect(await colour('dd .badge[data-state=exited]')).toBe(red);
    expect(await page.$eval('dd .badge[data-state=exited]', (e: any) => e.getAttribute('data-outcome'))).toBe('bad');
  });

  it('no page scrolls sideways at 1366 × 768 with long commands, reasons, subjects, cwds and notes', async () => {
    const pages: [string, string, string][] = [
      ['#/overview', 'Overview', 'overview'],
      ['#/agents', 'Agents', 'agents'],
      ['#/jobs', 'Jobs', 'jobs'],
      [`#/jobs/${jobs.long}`, 'Job ', 'job'],
      ['#/approvals', 'Approvals', 'approvals'],
      ['#/audit', 'Audit log', 'audit'],
      ['#/policy', 'Policy', 'policy'],
      ['#/tokens', 'Tokens', 'tokens'],
    ];
    for (const [hash, heading, name] of pages) {
      await go(hash, heading);
      // Each page with its long data on it.
      const ready: Record<string, string> = {
        overview: 'tr[data-denial]',
        agents: 'tr[data-agent]',
        jobs: `tr[data-job="${jobs.long}"] details`,
        job: 'dl.facts.call dd',
        approvals: 'tr[data-approval]',
        audit: 'tr[data-decision=denied]',
        policy: 'textarea[name=policy]',
        tokens: 'tr[data-jti]',
      };
      await page.waitForSelector(ready[name], { timeout: 15_000 }).catch((e) => {
        throw new Error(`${hash}: ${(e as Error).message}`);
      });
      const w = await widths();
      expect(w.doc, `${hash} is ${w.doc}px wide in a ${w.win}px window`).toBeLessThanOrEqual(w.win);
      expect(w.widest, `${hash}: a table is ${w.widest}px wide in a ${w.main}px column`).toBeLessThanOrEqual(w.main);
      await page.screenshot({ path: join(SHOTS, `dashboard-first-laptop-${name}.png`) });
    }
    // The long data was on those pages (a check that cannot pass on empty pages).
    await go('#/audit', 'Audit log');
    await page.waitForSelector('tr[data-decision=denied]', { timeout: 15_000 });
    expect(await page.$eval('tr[data-decision=denied]', (t: any) => t.innerText)).toContain(LONG_EXE);
  });

  it('shows a focus ring for keyboard focus only', async () => {
    const focused = () =>
      page.evaluate(() => {
        const e = document.activeElement;
        return { tag: e.tagName, name: e.getAttribute('name') ?? e.textContent.trim(), style: getComputedStyle(e).outlineStyle };
      });
    await go('#/jobs', 'Jobs');
    // The heading takes focus when the page opens (for screen readers): no ring on it.
    expect(await focused()).toEqual({ tag: 'H1', name: 'Jobs', style: 'none' });
    // The keyboard: a ring on what Tab reaches (the first filter).
    await page.keyboard.press('Tab');
    expect(await focused()).toEqual({ tag: 'SELECT', name: 'state', style: 'solid' });
    // A click on a button: no ring.
    await page.click(aria('Apply filters'));
    expect(await focused()).toEqual({ tag: 'BUTTON', name: 'Apply filters', style: 'none' });
  });

  it('has a favicon, and nothing the dashboard asked for answered 404', async () => {
    const href = await page.$eval('link[rel=icon]', (l: any) => l.href);
    const r = await fetch(href);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('image/svg+xml');
    expect(await r.text()).toMatch(/^<svg /);
    // (The admin API answers 404 for what does not exist, which the pages read as such: only the page's own files count.)
    expect(notFound.filter((u) => !new URL(u).pathname.startsWith('/admin/v1/'))).toEqual([]);
  });

  it("the job page opens the job's MCP Apps view as a chat client renders it: a sandboxed frame that follows the job through the host", async () => {
    await go(`#/jobs/${jobs.ok}`, 'Job ');
    await page.waitForSelector('dd .badge[data-state=exited]', { timeout: 15_000 });
    await page.click(aria('Open the MCP Apps view'));
    const frameEl = await page.waitForSelector('iframe.appframe', { timeout: 10_000 });
    expect(await frameEl!.evaluate((f: any) => f.getAttribute('sandbox'))).toBe('allow-scripts');
    const view = async (): Promise<Frame> => {
      for (let i = 0; i < 100; i++) {
        const f = await frameEl!.contentFrame();
        if (f?.url().endsWith('/dashboard/app/job-output.html')) return f;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('the view frame did not load');
    };
    const v = await view();
    await v.waitForFunction(() => /exited/.test(document.getElementById('state').textContent), { timeout: 30_000 });
    await v.waitForFunction(() => document.getElementById('stdout').textContent === 'hello first user\n', { timeout: 15_000 });
    expect(await v.$eval('#job', (e: any) => e.textContent)).toBe(jobs.ok);
    expect(await v.$eval('#state', (e: any) => [e.textContent, e.className])).toEqual(['exited (exit 0)', 'state ok']);
    // Search goes through the host too (query_output).
    await v.type('#terms', 'first');
    await v.click('#go');
    await v.waitForFunction(() => document.querySelector('#results mark') || document.getElementById('error').textContent, { timeout: 15_000 });
    expect(await v.$eval('#error', (e: any) => e.textContent)).toBe('');
    expect(await v.$eval('#results mark', (e: any) => e.textContent)).toBe('first');
    // The host sized the frame to the view's height.
    expect(await frameEl!.evaluate((f: any) => parseInt(f.style.height, 10))).toBeGreaterThan(100);
    await shot('app-view');
    // Served as resources/read serves it, under the CSP its resource declares: no network of its own.
    const doc = await fetch(`${gw.url}/dashboard/app/job-output.html`);
    const csp = doc.headers.get('content-security-policy')!;
    expect(csp).toContain("connect-src 'none'");
    expect(csp).toContain(`frame-ancestors ${gw.url}`);
    const resource = await client.readResource({ uri: 'ui://gatehouse/job-output.html' });
    expect(await doc.text()).toBe((resource.contents[0] as { text: string }).text);
    expect(cspViolations).toEqual([]);
  });

  it('the view reaches neither the page nor the admin token, and the host answers it only read tools about its own job', async () => {
    const frameEl = await page.$('iframe.appframe');
    const v = (await frameEl!.contentFrame())!;
    // An opaque origin: the parent's DOM and storage are out of reach.
    expect(
      await v.evaluate(() => {
        try {
          return String(window.parent.document.title);
        } catch {
          return 'blocked';
        }
      }),
    ).toBe('blocked');
    expect(
      await v.evaluate(() => {
        try {
          return String(window.sessionStorage.length);
        } catch {
          return 'blocked';
        }
      }),
    ).toBe('blocked');
    // No network of its own (connect-src 'none').
    expect(
      await v.evaluate(async (u: string) => {
        try {
          await fetch(u);
          return 'fetched';
        } catch {
          return 'blocked';
        }
      }, `${gw.url}/healthz`),
    ).toBe('blocked');
    // tools/call through the host: another job, another tool, or a kill are refused; the shown job's status is answered.
    const ask = (params: unknown) =>
      v.evaluate(
        (p: unknown) =>
          new Promise((resolve) => {
            const id = 'probe-' + Math.random();
            const on = (ev: any) => {
              if (ev.data?.id === id) {
                window.removeEventListener('message', on);
                resolve(ev.data);
              }
            };
            window.addEventListener('message', on);
            window.parent.postMessage({ jsonrpc: '2.0', id, method: 'tools/call', params: p }, '*');
          }),
        params,
      ) as Promise<{ result?: any; error?: { message: string } }>;
    const other = await ask({ name: 'job_status', arguments: { job_id: jobs.failed } });
    expect(other.error?.message).toMatch(/only about job/);
    const kill = await ask({ name: 'job_kill', arguments: { job_id: jobs.ok } });
    expect(kill.error?.message).toMatch(/forwards only job_status, job_output and query_output/);
    const exec = await ask({ name: 'execute', arguments: { command: 'echo', args: ['from the frame'] } });
    expect(exec.error).toBeTruthy();
    const mine = await ask({ name: 'job_status', arguments: { job_id: jobs.ok } });
    expect(mine.result?.structuredContent).toMatchObject({ job_id: jobs.ok, state: 'exited', exit_code: 0 });
    expect(mine.result?.structuredContent.call).toBeUndefined();
    // Nothing ran from the frame.
    const audit = await admin<{ entries: { command: { args?: string[] } }[] }>('/audit?tool=execute&limit=50');
    expect(audit.entries.some((e) => e.command?.args?.includes('from the frame'))).toBe(false);
  });

  it('the Tokens page lists the tokens the gateway minted, with long subjects and notes shown whole', async () => {
    await go('#/tokens', 'Tokens');
    await page.waitForSelector('tr[data-jti]', { timeout: 15_000 });
    const rows = await page.$$eval('tr[data-jti]', (trs: any[]) => trs.map((t) => t.cells[1].innerText));
    expect(rows).toContain(`ci-${'y'.repeat(190)}`);
    await shot('tokens');
  });
});
