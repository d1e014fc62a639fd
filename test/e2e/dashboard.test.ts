/**
 * The dashboard in a real browser: Debian's chromium driven by puppeteer-core against the real
 * gateway (`wrangler dev`), a real agent and the official MCP client. Each page is screenshotted
 * to test/screenshots/ (git-ignored). Controls are found by their accessible names (aria
 * selectors), so an unlabelled control fails the test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Browser, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { ROOT, startAgent, startGateway, type AgentProcess, type Gateway, testSandbox } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { aria, fillField, goTo } from '../support/dashboard-page.ts';

// Callbacks given to page.evaluate/waitForFunction run in the browser; the project's types have no DOM lib.
declare const document: any, window: any, location: any, sessionStorage: any;

requireChromium('dashboard browser tests');
const SANDBOX = testSandbox();
const SHOTS = join(ROOT, 'test/screenshots');

const TEAM = 'dash';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let browser: Browser;
let page: Page;
let client: Client;
let adminToken: string;
/** Every URL the browser requested: the admin token must never be in one. */
const requested: string[] = [];
const cspViolations: string[] = [];

async function shot(name: string) {
  await page.screenshot({ path: join(SHOTS, `dashboard-${name}.png`), fullPage: true });
}
/** Waits until the main region's text contains `text`. */
async function waitText(text: string, timeout = 30_000) {
  await page.waitForFunction((t) => document.getElementById('main')!.innerText.includes(t), { timeout }, text);
}
/** Waits for the audit page's answer for page n (its status line says "… on page n" once loaded). */
async function auditPage(n: number) {
  await page.waitForFunction((k: number) => document.querySelector('main [role=status]')?.textContent?.endsWith(`on page ${k}`), { timeout: 15_000 }, n);
}
/** The error shown at the policy editor (the element its aria-describedby points to). */
const editorError = () => page.$eval('textarea[name=policy]', (e: any) => document.getElementById(e.getAttribute('aria-describedby'))?.textContent ?? '');
async function waitEditorError(re: RegExp) {
  await page.waitForFunction(
    (src: string) => {
      const e = document.querySelector('textarea[name=policy]');
      return new RegExp(src).test(document.getElementById(e?.getAttribute('aria-describedby'))?.textContent ?? '');
    },
    { timeout: 10_000 },
    re.source,
  );
}
const go = (hash: string, heading: string) => goTo(page, hash, heading);
const fill = (label: string, value: string) => fillField(page, label, value);

describe.skipIf(!HAVE_CHROMIUM)('dashboard in a real browser', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    gw = await startGateway();
    root = mkdtempSync(join(tmpdir(), 'gatehouse-dash-'));
    agent = startAgent(gw, {
      token: await gw.token({ team: TEAM, scopes: ['agent'], subject: 'dash-agent' }),
      root,
      sandbox: SANDBOX,
      capacity: 2,
      agentId: 'dash-agent',
    });
    await agent.ready;
    adminToken = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'dash-admin' });
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
    page = await browser.newPage();
    await page.setViewport({ width: 1366, height: 900 });
    page.on('request', (r) => requested.push(r.url()));
    page.on('console', (m) => {
      if (/Content.Security.Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    page.on('dialog', (d) => void d.accept());
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('serves one document with a strict CSP: no inline script, no framing, no form posting', async () => {
    const r = await fetch(`${gw.url}/dashboard`);
    expect(r.status).toBe(200);
    const csp = r.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("form-action 'none'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(r.headers.get('x-frame-options')).toBe('DENY');
    const html = await r.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/\son[a-z]+=/i);
    const js = await fetch(`${gw.url}/dashboard/assets/main.js`);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(js.headers.get('x-content-type-options')).toBe('nosniff');
    expect((await fetch(`${gw.url}/dashboard/assets/nope.js`)).status).toBe(404);
  });

  it("refuses a wrong token with the gateway's reason and signs in with the keyboard alone", async () => {
    await page.goto(`${gw.url}/dashboard`);
    await page.waitForSelector(aria('Admin token'));
    // The token field has focus on load: type and press Enter, no mouse.
    await page.keyboard.type('not-a-jwt');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('[role=alert]')?.textContent?.length, { timeout: 15_000 });
    expect(await page.$eval('[role=alert]', (e: any) => e.textContent)).toMatch(/unauthenticated/);
    await shot('signin');
    const noAdmin = await gw.token({ team: TEAM, scopes: ['execute'] });
    await fill('Admin token', noAdmin);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /insufficient_scope/.test(document.querySelector('[role=alert]')?.textContent ?? ''), { timeout: 15_000 });
    await fill('Admin token', adminToken);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
    expect(await page.$eval('#who', (e: any) => e.textContent)).toBe(`team ${TEAM} · dash-admin`);
    // Kept in this tab's sessionStorage only: not in the URL, not in a cookie.
    expect(await page.evaluate(() => sessionStorage.getItem('gatehouse.adminToken'))).toBe(adminToken);
    expect(page.url()).not.toContain(adminToken.slice(-20));
    expect(await page.evaluate(() => document.cookie)).toBe('');
    expect((await page.cookies()).length).toBe(0);
  });

  it('navigates between pages with the keyboard', async () => {
    await page.focus('#nav a[data-page="agents"]');
    for (let i = 0; i < 8 && (await page.evaluate(() => document.activeElement?.textContent)) !== 'Tokens'; i++) await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Tokens');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Tokens', { timeout: 10_000 });
    // Focus moves to the new page's heading, so keyboard and screen-reader users land on it.
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('H1');
    expect(await page.$eval('#nav a[aria-current=page]', (e: any) => e.textContent)).toBe('Tokens');
  });

  it('shows the connected agent with its sandbox, capacity and runtimes, live', async () => {
    await go('#/agents', 'Agents');
    const row = await page.waitForSelector('tr[data-agent=dash-agent]', { timeout: 20_000 });
    const text = await page.evaluate((e: any) => e.innerText, row);
    expect(text).toContain('connected');
    expect(text).toContain(SANDBOX);
    expect(text).toMatch(/0 \/ 2 slots/);
    // Runtimes with versions, as the agent probed them, and a recent heartbeat.
    const runtimes = await page.$$eval('tr[data-agent=dash-agent] ul.runtimes li', (li: any[]) =>
      li.map((l) => [l.querySelector('.rt').textContent, l.querySelector('.ver').textContent]),
    );
    expect(runtimes.length).toBeGreaterThan(0);
    expect(runtimes.find(([name]) => name === 'shell')?.[1]).toMatch(/\d/);
    const beat = await page.$eval('tr[data-agent=dash-agent] time', (t: any) => t.getAttribute('datetime'));
    expect(Date.now() - Date.parse(beat)).toBeLessThan(60_000);
    await shot('agents');
  });

  it('watches a job from another client appear, stream, finish; searches and downloads its output', async () => {
    const TICKS = 'for i in 1 2 3 4 5 6; do echo tick-$i; sleep 1; done; echo done >&2';
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, shell: { enabled: true, allow: [TICKS] } });
    await go('#/jobs', 'Jobs');
    // A foreground call from the MCP client, left running while the browser watches.
    const call = client.callTool({ name: 'execute', arguments: { command: TICKS } }, undefined, { timeout: 60_000 });
    const row = await page.waitForSelector('tr[data-job] .badge.running', { timeout: 20_000 });
    const jobId = await page.evaluate((e: any) => e.closest('tr').getAttribute('data-job'), row);
    await shot('jobs');
    // The list refreshes under the keyboard user's focus without taking it away; Enter opens the job.
    await page.focus(`tr[data-job="${jobId}"] a`);
    await page.$eval(`tr[data-job="${jobId}"]`, (e: any) => {
      e.__old = true;
    });
    await page.waitForFunction((id: string) => document.querySelector(`tr[data-job="${id}"]`)?.__old !== true, { timeout: 10_000 }, jobId);
    expect(await page.evaluate(() => document.activeElement?.getAttribute('href'))).toBe(`#/jobs/${jobId}`);
    await page.keyboard.press('Enter');
    await page.waitForFunction((id: string) => document.querySelector('main h1')?.textContent?.includes(id), { timeout: 10_000 }, jobId);
    // Live tail while it runs: the first ticks show before the job ends.
    await page.waitForFunction(() => /tick-2/.test(document.querySelector('pre[data-stream=stdout]')?.textContent ?? ''), { timeout: 20_000 });
    expect(await page.$eval('dd .badge[data-state]', (e: any) => e.dataset.state)).toBe('running');
    await shot('job-running');
    const result = await call;
    expect((result.structuredContent as { exit_code: number }).exit_code).toBe(0);
    await page.waitForSelector('dd .badge[data-state=exited]', { timeout: 20_000 });
    // The job's facts: who ran it with which tool, how it ended and how long it took.
    const facts = await page.$eval('dl.facts:not(.call)', (e: any) => e.innerText);
    expect(facts).toMatch(/execute/);
    expect(facts).toMatch(/test-dash/);
    // The stored output replaces the live view once the artifact is complete: stderr shows up there too.
    await page.waitForFunction(() => /done/.test(document.querySelector('pre[data-stream=stderr]')?.textContent ?? ''), { timeout: 20_000 });
    const out = await page.$eval('pre[data-stream=stdout]', (e: any) => e.textContent);
    expect(out).toBe('tick-1\ntick-2\ntick-3\ntick-4\ntick-5\ntick-6\n');
    // Search the stored output.
    await fill('Search terms', 'tick-4');
    await page.select(aria('Stream'), 'stdout');
    await fill('Context lines', '1');
    await page.click(aria('Search'));
    await page.waitForSelector('figure.excerpt', { timeout: 15_000 });
    expect(await page.$eval('figure.excerpt figcaption', (e: any) => e.textContent)).toBe('stdout lines 3–5');
    expect(await page.$eval('figure.excerpt mark', (e: any) => e.textContent)).toBe('tick-4');
    await shot('job');
    // Download: through fetch with the Bearer token, saved as a file.
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-dl-'));
    const cdp = await page.createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dir });
    await page.click(aria('Download stdout'));
    const file = join(dir, `${jobId}-stdout.txt`);
    for (let i = 0; i < 100 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 100));
    expect(readFileSync(file, 'utf8')).toBe('tick-1\ntick-2\ntick-3\ntick-4\ntick-5\ntick-6\n');
    rmSync(dir, { recursive: true, force: true });
    // Back in the list, its row says what ran, why it was allowed and how it ended: state, command, policy, tool,
    // subject, agent, duration, exit.
    await go('#/jobs', 'Jobs');
    await page.waitForFunction((id: string) => document.querySelector(`tr[data-job="${id}"] .badge`)?.textContent === 'exited', { timeout: 15_000 }, jobId);
    const cells = await page.$eval(`tr[data-job="${jobId}"]`, (tr: any) => [...tr.cells].map((c: any) => c.textContent));
    expect(cells[1]).toBe('exited');
    expect(cells[2]).toBe(TICKS);
    expect(cells[3]).toMatch(/^allowed/);
    expect(cells.slice(4, 7)).toEqual(['execute', 'test-dash', 'dash-agent']);
    expect(cells[8]).toMatch(/\d/);
    expect(cells[9]).toBe('0');
    await gw.putPolicy(TEAM, DEFAULT_POLICY);
  });

  it('kills a running job from its page', async () => {
    const call = client.callTool({ name: 'execute', arguments: { command: 'sleep', args: ['60'] } }, undefined, { timeout: 90_000 });
    // The agents page is live: the job's slot shows as taken without a reload.
    await go('#/agents', 'Agents');
    await page.waitForFunction(() => /1 \/ 2 slots/.test(document.querySelector('tr[data-agent=dash-agent]')?.innerText ?? ''), { timeout: 20_000 });
    await go('#/jobs', 'Jobs');
    await page.select(aria('State'), 'running');
    await page.click(aria('Apply filters'));
    // The live list re-renders its rows while we look at them, so find and click inside the page in one step
    // (an element handle taken first can be detached by the time it is clicked).
    const found = await page.waitForFunction(() => document.querySelector('tr[data-job] .badge.running')?.closest('tr')?.getAttribute('data-job'), {
      timeout: 20_000,
    });
    const jobId = (await found.jsonValue()) as string;
    await page.waitForFunction(
      (id: string) => {
        const a = document.querySelector(`tr[data-job="${id}"] a`);
        a?.click();
        return !!a;
      },
      { timeout: 15_000 },
      jobId,
    );
    await page.waitForSelector(aria('Kill job'), { visible: true, timeout: 15_000 });
    await page.click(aria('Kill job'));
    const r = await call;
    expect((r.structuredContent as { state: string }).state).toMatch(/cancelled|signaled/);
    await page.waitForSelector('dd .badge:is([data-state=cancelled],[data-state=signaled])', { timeout: 20_000 });
    // The kill is audited with who did it.
    const audit = (await (await fetch(`${gw.url}/admin/v1/audit?tool=admin.job_kill`, { headers: { Authorization: `Bearer ${adminToken}` } })).json()) as any;
    expect(audit.entries[0]).toMatchObject({ subject: 'dash-admin', jobId });
  });

  it('creates a token (shown once), lists it, and revokes it so the gateway refuses it', async () => {
    await go('#/tokens', 'Tokens');
    await fill('Subject', 'dash-ci-bot');
    await page.click(aria('admin — manage the team: tokens, policy, audit, this dashboard'));
    await page.select(aria('Expires after'), '86400');
    await page.click(aria('Create token'));
    const out = await page.waitForSelector('textarea[data-token=new]', { timeout: 15_000 });
    const minted = await page.evaluate((e) => (e as any).value, out);
    expect(minted.split('.')).toHaveLength(3);
    await waitText('This is the only time the token is shown');
    const who = await fetch(`${gw.url}/admin/v1/whoami`, { headers: { Authorization: `Bearer ${minted}` } });
    expect(await who.json()).toMatchObject({ team: TEAM, subject: 'dash-ci-bot', scopes: ['execute', 'artifacts:read', 'admin'] });
    await page.waitForSelector('tr[data-status=active] ::-p-text(dash-ci-bot)', { timeout: 15_000 });
    await shot('tokens');
    // A bad subject gets the gateway's explanation, not a silent failure.
    await fill('Subject', 'has space');
    await page.click(aria('Create token'));
    await page.waitForFunction(() => /printable ASCII without spaces/.test(document.body.innerText), { timeout: 10_000 });

    const jti = await page.$$eval('tr[data-status=active]', (trs: any[]) =>
      trs.find((t) => t.cells[1].textContent === 'dash-ci-bot')?.getAttribute('data-jti'),
    );
    expect(jti).toBeTruthy();
    await page.click(aria(`Revoke token ${jti} of dash-ci-bot`));
    await page.waitForSelector(`tr[data-jti="${jti}"][data-status=revoked]`, { timeout: 15_000 });
    const refused = await fetch(`${gw.url}/admin/v1/whoami`, { headers: { Authorization: `Bearer ${minted}` } });
    expect(refused.status).toBe(401);
    expect(await refused.text()).toMatch(/revoked/);
  });

  it('shows attacker-controlled strings as text: a subject holding markup never runs', async () => {
    const evil = '<img/src=x/onerror=window.__pwned=1>';
    await fill('Subject', evil);
    await page.click(aria('Create token'));
    await page.waitForSelector('textarea[data-token=new]', { timeout: 15_000 });
    await page.waitForSelector(`tr ::-p-text(${evil})`, { timeout: 15_000 });
    expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
    expect(await page.$$('main img')).toHaveLength(0);
  });

  it('edits the policy with inline validation errors, dry-runs a command, and the denial shows in the audit page', async () => {
    await go('#/policy', 'Policy');
    await page.waitForFunction(() => (document.querySelector('textarea[name=policy]') as any)?.value.includes('"executables"'), { timeout: 15_000 });
    await waitText('the shipped default');
    // Broken JSON: the editor says where, and nothing is sent.
    await page.$eval('textarea[name=policy]', (e) => {
      (e as any).value = '{ "version": 1, }';
    });
    await page.click(aria('Save as new version'));
    await waitEditorError(/Not valid JSON at line 1, column \d+/);
    expect(await page.$eval('textarea[name=policy]', (e: any) => e.getAttribute('aria-invalid'))).toBe('true');
    // Valid JSON, invalid policy: the gateway's message names the failing path, shown at the editor.
    const bad = { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: 'soon' } };
    await page.$eval(
      'textarea[name=policy]',
      (e, v) => {
        (e as any).value = v;
      },
      JSON.stringify(bad, null, 2),
    );
    await page.click(aria('Save as new version'));
    await waitEditorError(/invalid policy: limits\.maxTimeoutMs/);
    await shot('policy-error');
    // A preset, edited: take `ls` out of the allowlist, save.
    await page.select(aria('Starting point'), 'standard');
    await page.click(aria('Load as a starting point'));
    const doc = JSON.parse(await page.$eval('textarea[name=policy]', (e) => (e as any).value));
    doc.executables.allow = doc.executables.allow.filter((x: string) => x !== 'ls');
    await page.$eval(
      'textarea[name=policy]',
      (e, v) => {
        (e as any).value = v;
      },
      JSON.stringify(doc, null, 2),
    );
    const before = ((await (await fetch(`${gw.url}/admin/v1/policy`, { headers: { Authorization: `Bearer ${adminToken}` } })).json()) as { version: number })
      .version;
    await page.click(aria('Save as new version'));
    await waitText(`the policy is now version ${before + 1}`);
    expect(await editorError()).toBe('');
    // The history lists the saved version, who saved it, and can load it back into the editor.
    await page.waitForSelector(aria(`Load version ${before + 1}`), { timeout: 10_000 });
    expect(await page.$eval('caption ::-p-text(Policy versions)', (e: any) => e.closest('table').innerText)).toContain('dash-admin');
    // Dry run in the page.
    await fill('Command', 'ls');
    await fill('Arguments (one per line)', '-a');
    await page.click(aria('Check'));
    await page.waitForSelector('.verdict[data-allowed=false]', { timeout: 10_000 });
    await waitText('Executable "ls" is not in the allowed executables list');
    // Decision, deciding stage and reason, as the dry-run API says them.
    const check = (await (
      await fetch(`${gw.url}/admin/v1/policy/check`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ command: 'ls', args: ['-a'] }),
      })
    ).json()) as { stage: string; reason: string };
    const verdict = await page.$eval('.verdict + dl.facts', (dl: any) => dl.innerText);
    expect(check.stage).toMatch(/^[a-z_]+$/);
    expect(verdict).toMatch(new RegExp(`Deciding stage\\s+${check.stage}\\s`));
    expect(verdict).toContain(check.reason);
    await shot('policy');

    // The same call from an MCP client is denied...
    const r = await client.callTool({ name: 'execute', arguments: { command: 'ls', args: ['-a'] } });
    expect(r.isError).toBe(true);
    // ...and the audit page shows it, with its reason, under a decision filter.
    await go('#/audit', 'Audit log');
    await page.select(aria('Decision'), 'denied');
    await fill('Tool', 'execute');
    await page.click(aria('Apply filters'));
    await auditPage(1);
    const rows = await page.$$eval('tbody tr', (trs) => trs.map((t) => (t as any).innerText));
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((t) => /denied/.test(t))).toBe(true);
    expect(rows[0]).toContain('Executable "ls" is not in the allowed executables list');
    await shot('audit');
    // A bad filter gets the gateway's explanation.
    await fill('Tool', 'rm -rf');
    await page.click(aria('Apply filters'));
    await page.waitForFunction(() => [...document.querySelectorAll('main [role=alert]')].some((e: any) => /tool must be one of/.test(e.textContent)), {
      timeout: 10_000,
    });
    await gw.putPolicy(TEAM, DEFAULT_POLICY);
  });

  it('keeps every saved policy version, per team, newest first', async () => {
    const admin = (team: string) => gw.token({ team, scopes: ['admin'], subject: `${team}-admin` });
    const history = async (team: string, q = '') =>
      (await fetch(`${gw.url}/admin/v1/policy/history${q}`, { headers: { Authorization: `Bearer ${await admin(team)}` } })).json() as Promise<any>;
    // The previous test saved a version without `ls`, then restored the default as the next one.
    const h = await history(TEAM);
    const latest = h.versions[0].version;
    expect(h.versions.map((v: { version: number }) => v.version)).toEqual(Array.from({ length: latest }, (_, i) => latest - i));
    expect(h.versions[0].policy.executables.allow).toContain('ls');
    expect(h.versions[1].policy.executables.allow).not.toContain('ls');
    expect(h.versions[1].updatedBy).toBe('dash-admin');
    expect((await history(TEAM, '?limit=1')).nextBefore).toBe(latest);
    expect((await history(TEAM, `?before=${latest}`)).versions[0].version).toBe(latest - 1);
    // Another team sees only its own (none).
    expect((await history('other-team')).versions).toEqual([]);
    expect((await history(TEAM, '?limit=0')).error.message).toMatch(/limit must be an integer from 1 to 100/);
  });

  it('pages through the audit log without gaps or repeats', async () => {
    for (let i = 0; i < 30; i++) await client.callTool({ name: 'policy_check', arguments: { command: 'echo', args: [`page-${i}`] } });
    await go('#/audit', 'Audit log');
    await page.select(aria('Per page'), '25');
    await page.select(aria('Decision'), '');
    await fill('Tool', 'policy_check');
    await page.click(aria('Apply filters'));
    const rows = () => page.$$eval('tbody tr', (trs: any[]) => trs.map((t) => t.cells[4].textContent as string));
    const onPage = async (n: number) => {
      await auditPage(n);
      return rows();
    };
    const p1 = await onPage(1);
    expect(p1).toHaveLength(25);
    expect(p1[0]).toBe('echo page-29');
    await page.click(aria('Older entries'));
    const p2 = await onPage(2);
    expect(p2.length).toBeGreaterThanOrEqual(5);
    expect(p2[0]).toBe('echo page-4');
    expect(p1.filter((x) => p2.includes(x))).toEqual([]);
    await shot('audit-page2');
    await page.click(aria('Back to the newest'));
    expect((await onPage(1))[0]).toBe('echo page-29');
    // The subject and time filters: the client's subject keeps its rows, another subject or a range around them none.
    const subjects = () => page.$$eval('tbody tr', (trs: any[]) => [...new Set(trs.map((t) => t.cells[3].textContent as string))]);
    await fill('Subject', 'test-dash');
    await page.click(aria('Apply filters'));
    await auditPage(1);
    expect(await subjects()).toEqual(['test-dash']);
    const setTime = (label: string, v: string) =>
      page.$eval(
        aria(label),
        (e: any, x: string) => {
          e.value = x;
        },
        v,
      );
    for (const [label, v] of [
      ['Since', '2099-01-01T00:00'],
      ['Until', '2001-01-01T00:00'],
    ]) {
      await setTime(label, v);
      await page.click(aria('Apply filters'));
      await page.waitForFunction(() => document.querySelector('main [role=status]')?.textContent === '0 entries on page 1', { timeout: 15_000 });
      expect(await page.$('tbody tr')).toBeNull();
      await setTime(label, '');
    }
    await fill('Subject', 'someone-else');
    await page.click(aria('Apply filters'));
    await page.waitForFunction(() => document.querySelector('main [role=status]')?.textContent === '0 entries on page 1', { timeout: 15_000 });
    await fill('Subject', '');
  });

  it('cannot be framed by another origin (clickjacking), while a frameable page of the same gateway can', async () => {
    const server: Server = createServer((_req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.end(
        `<iframe name="dash" src="${gw.url}/dashboard" onload="window.dashLoaded=true"></iframe>` +
          `<iframe name="health" src="${gw.url}/healthz" onload="window.healthLoaded=true"></iframe>`,
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const p = await browser.newPage();
    try {
      await p.goto(`http://localhost:${(server.address() as { port: number }).port}/`);
      await p.waitForFunction(() => window.dashLoaded && window.healthLoaded, { timeout: 15_000 });
      const frame = (name: string) => p.frames().find((f) => f.name() === name)!;
      // The control: a page without frame-ancestors loads in the frame, so the check below can fail.
      expect(await frame('health').evaluate(() => document.body.innerText)).toContain('"ok":true');
      // The dashboard is blocked: its document never appears in the frame.
      const dash = frame('dash');
      const hasApp = await dash.evaluate(() => !!document.getElementById('main')).catch(() => false);
      expect(hasApp).toBe(false);
    } finally {
      await p.close();
      server.close();
    }
  });

  it('labels every control and link of every page, and fits every page on a laptop screen (1366 × 768)', async () => {
    await page.setViewport({ width: 1366, height: 768 });
    const jobId = await page.evaluate(async (t: string) => {
      const r = await fetch('/admin/v1/jobs?limit=1', { headers: { Authorization: 'Bearer ' + t } });
      return ((await r.json()) as any).jobs[0].job_id as string;
    }, adminToken);
    const pages: [string, string][] = [
      ['#/overview', 'Overview'],
      ['#/agents', 'Agents'],
      ['#/jobs', 'Jobs'],
      [`#/jobs/${jobId}`, 'Job '],
      ['#/approvals', 'Approvals'],
      ['#/audit', 'Audit log'],
      ['#/policy', 'Policy'],
      ['#/tokens', 'Tokens'],
    ];
    const CONTROLS = new Set(['button', 'link', 'textbox', 'searchbox', 'combobox', 'listbox', 'checkbox', 'radio', 'spinbutton', 'slider', 'switch']);
    /** The controls of the page as assistive technology sees them, and those among them without a name. */
    const audit = async () => {
      const tree = await page.accessibility.snapshot();
      const unnamed: string[] = [];
      let controls = 0;
      const walk = (n: any) => {
        if (CONTROLS.has(n.role)) {
          controls++;
          if (!String(n.name ?? '').trim()) unnamed.push(`${n.role}${n.value ? ` (value ${n.value})` : ''}`);
        }
        for (const c of n.children ?? []) walk(c);
      };
      walk(tree);
      return { controls, unnamed };
    };
    // The check itself: an unlabelled field added to the page is caught.
    await go('#/agents', 'Agents');
    await page.evaluate(() => {
      const i = document.createElement('input');
      i.id = 'unlabelled-probe';
      document.getElementById('main').append(i);
    });
    expect((await audit()).unnamed).toContain('textbox');
    await page.evaluate(() => document.getElementById('unlabelled-probe').remove());
    for (const [hash, heading] of pages) {
      await go(hash, heading);
      // Let the page's first data arrive (its tables and forms are built from it).
      await page.waitForFunction(() => document.querySelector('main [aria-busy=true]') === null, { timeout: 15_000 });
      const { controls, unnamed } = await audit();
      expect(controls, hash).toBeGreaterThan(5);
      expect(unnamed, `${hash}: controls without an accessible name`).toEqual([]);
      // Readable on a laptop: nothing wider than the window, so no sideways scrolling.
      const widths = await page.evaluate(() => ({ doc: document.documentElement.scrollWidth, win: document.documentElement.clientWidth }));
      expect(widths.doc, `${hash} is ${widths.doc}px wide in a ${widths.win}px window`).toBeLessThanOrEqual(widths.win);
      await page.screenshot({ path: join(SHOTS, `dashboard-laptop-${hash.slice(2).replace(/\//g, '-').replace(jobId, 'one')}.png`) });
    }
    await page.setViewport({ width: 1366, height: 900 });
  });

  it('never puts the admin token in a URL and obeys its own CSP', () => {
    const tail = adminToken.slice(-24);
    expect(requested.filter((u) => u.includes(tail))).toEqual([]);
    expect(cspViolations).toEqual([]);
  });
});
