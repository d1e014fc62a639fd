/**
 * The MCP Apps job viewer (`ui://gatehouse/job-output.html`) in a real browser: a minimal host page
 * built with the ext-apps host API (`AppBridge` + `PostMessageTransport`, bundled with esbuild)
 * renders the view in a sandboxed iframe, the way chat hosts do, and forwards its tools/call
 * requests to the official MCP client connected to the real gateway. The view has no network of
 * its own: it follows a real job (live tail, then the end) and searches its output through the host.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Browser, Frame, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { ROOT, startAgent, startGateway, type AgentProcess, type Gateway, testSandbox } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { JOB_VIEWER_URI } from '../../src/mcp/apps/job-viewer.ts';

// Callbacks given to page.evaluate/waitForFunction run in the browser; the project's types have no DOM lib.
declare const document: any, window: any;

requireChromium('MCP Apps viewer tests');
const SANDBOX = testSandbox();
const SHOTS = join(ROOT, 'test/screenshots');

/** The host page: the ext-apps AppBridge, the view in a sandboxed srcdoc iframe, tool calls sent to Node. */
const HOST_ENTRY = `
import { AppBridge, PostMessageTransport } from '@modelcontextprotocol/ext-apps/app-bridge';
window.startHost = async (html, toolInput, toolResult) => {
  const iframe = document.createElement('iframe');
  iframe.setAttribute('sandbox', 'allow-scripts');
  iframe.style.width = '900px';
  iframe.style.height = '700px';
  iframe.name = 'view';
  const bridge = new AppBridge(null, { name: 'gatehouse-test-host', version: '1.0.0' }, { serverTools: {} });
  window.toolCalls = [];
  bridge.oncalltool = async (params) => { window.toolCalls.push(params.name); return window.hostCallTool(params); };
  bridge.onsizechange = (p) => { window.lastSize = p; };
  const initialized = new Promise((r) => { bridge.oninitialized = r; });
  const loaded = new Promise((r) => { iframe.onload = r; });
  iframe.srcdoc = html;
  document.body.append(iframe);
  await loaded;
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  await initialized;
  await bridge.sendToolInput({ arguments: toolInput });
  await bridge.sendToolResult(toolResult);
};
`;

const TEAM = 'appview';
const TICKS = 'for i in 1 2 3 4 5 6; do echo tick-$i; sleep 1; done; echo done >&2';
/** About 2.8 MiB of stdout (lines 1..400000), then one line of stderr. */
const BIG = 'seq 1 400000; echo big-done >&2';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;
let browser: Browser;
let host: Server;
let hostUrl: string;

describe.skipIf(!HAVE_CHROMIUM)('MCP Apps job viewer', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    const bundle = await build({
      stdin: { contents: HOST_ENTRY, resolveDir: ROOT, loader: 'js' },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      logLevel: 'warning',
    });
    const js = bundle.outputFiles[0].text;
    host = createServer((req, res) => {
      if (req.url === '/host.js') {
        res.setHeader('Content-Type', 'text/javascript');
        res.end(js);
        return;
      }
      res.setHeader('Content-Type', 'text/html');
      res.end('<!doctype html><title>test host</title><script type="module" src="/host.js"></script>');
    });
    await new Promise<void>((r) => host.listen(0, '127.0.0.1', () => r()));
    hostUrl = `http://127.0.0.1:${(host.address() as { port: number }).port}/`;
    gw = await startGateway();
    root = mkdtempSync(join(tmpdir(), 'gatehouse-appview-'));
    agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: SANDBOX, capacity: 2 });
    await agent.ready;
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, shell: { enabled: true, allow: [TICKS, BIG] } });
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    host?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('the job tools point to the ui:// view, served as an MCP App resource', async () => {
    const { tools } = await client.listTools();
    for (const name of ['execute', 'runtime_execute']) {
      const t = tools.find((x) => x.name === name)!;
      expect((t._meta as { ui?: { resourceUri?: string } })?.ui?.resourceUri, name).toBe(JOB_VIEWER_URI);
    }
    const r = await client.readResource({ uri: JOB_VIEWER_URI });
    const c = r.contents[0] as { mimeType: string; text: string };
    expect(c.mimeType).toBe('text/html;profile=mcp-app');
    expect(c.text).toMatch(/^<!doctype html>/);
    // No network of its own: no fetch, no external script, style or image.
    expect(c.text).not.toMatch(/\bfetch\(|XMLHttpRequest|WebSocket|\bsrc="http|href="http/);
  });

  it('follows a background job live through the host, then searches its output', async () => {
    const page: Page = await browser.newPage();
    const blocked: string[] = [];
    page.on('request', (req) => {
      if (!req.url().startsWith(hostUrl) && !req.url().startsWith('about:')) blocked.push(req.url());
    });
    await page.exposeFunction('hostCallTool', async (params: { name: string; arguments?: Record<string, unknown> }) =>
      client.callTool({ name: params.name, arguments: params.arguments ?? {} }, undefined, { timeout: 60_000 }),
    );
    await page.goto(hostUrl);
    await page.waitForFunction(() => typeof window.startHost === 'function', { timeout: 15_000 });
    const html = ((await client.readResource({ uri: JOB_VIEWER_URI })).contents[0] as { text: string }).text;
    const args = { command: TICKS, background: true };
    const started = await client.callTool({ name: 'execute', arguments: args });
    expect((started.structuredContent as { state: string }).state).toMatch(/queued|running/);
    await page.evaluate((h: string, a: unknown, r: unknown) => window.startHost(h, a, r), html, args, started);
    const view = (): Frame => page.frames().find((f) => f.name() === 'view')!;
    const text = (id: string) => view().$eval(`#${id}`, (e: any) => e.textContent as string);
    // Live: the first ticks arrive while the job still runs.
    await view().waitForFunction(() => /tick-2/.test(document.getElementById('stdout').textContent), { timeout: 30_000 });
    expect(await text('state')).toMatch(/running/);
    expect(await text('job')).toBe((started.structuredContent as { job_id: string }).job_id);
    // Then the end: every line once, the exit code, stderr.
    await view().waitForFunction(() => /exited/.test(document.getElementById('state').textContent), { timeout: 30_000 });
    // The state shows first; the last reads of both streams follow in the same round.
    await view().waitForFunction(() => document.getElementById('stderr').textContent === 'done\n', { timeout: 15_000 });
    expect((await text('stdout')).match(/tick-\d/g)).toEqual(['tick-1', 'tick-2', 'tick-3', 'tick-4', 'tick-5', 'tick-6']);
    expect(await text('stdout')).toBe('tick-1\ntick-2\ntick-3\ntick-4\ntick-5\ntick-6\n');
    expect(await text('stderr')).toBe('done\n');
    expect(await text('state')).toContain('exit 0');
    expect(await view().$eval('#state', (e: any) => e.className)).toBe('state ok');
    // Search through query_output, via the host.
    await view().type('#terms', 'tick-5');
    await view().click('#go');
    await view().waitForFunction(() => document.querySelector('#results mark') || document.getElementById('error').textContent, { timeout: 15_000 });
    expect(await text('error')).toBe('');
    expect(await view().$eval('#results mark', (e: any) => e.textContent)).toBe('tick-5');
    expect(await text('found')).toMatch(/^1 matching line in 7 lines/);
    await page.screenshot({ path: join(SHOTS, 'mcp-app-job-viewer.png'), fullPage: true });
    // Everything went through the host: only the tools it forwarded, and no request from the view.
    const calls: string[] = await page.evaluate(() => window.toolCalls);
    expect(new Set(calls)).toEqual(new Set(['job_status', 'job_output', 'query_output']));
    expect(blocked).toEqual([]);
    expect(await page.evaluate(() => window.lastSize?.height)).toBeGreaterThan(0);
    await page.close();
  });

  it('shows the tail of a 2.8 MiB stream and stderr without reading the whole stream, and pages back on demand', async () => {
    const page: Page = await browser.newPage();
    const reads: { stream?: unknown; offset?: unknown; max_bytes?: unknown }[] = [];
    await page.exposeFunction('hostCallTool', async (params: { name: string; arguments?: Record<string, unknown> }) => {
      if (params.name === 'job_output') reads.push(params.arguments ?? {});
      return client.callTool({ name: params.name, arguments: params.arguments ?? {} }, undefined, { timeout: 60_000 });
    });
    await page.goto(hostUrl);
    await page.waitForFunction(() => typeof window.startHost === 'function', { timeout: 15_000 });
    const html = ((await client.readResource({ uri: JOB_VIEWER_URI })).contents[0] as { text: string }).text;
    const args = { command: BIG };
    const ran = await client.callTool({ name: 'execute', arguments: args }, undefined, { timeout: 120_000 });
    expect((ran.structuredContent as { exit_code: number }).exit_code).toBe(0);
    await page.evaluate((h: string, a: unknown, r: unknown) => window.startHost(h, a, r), html, args, ran);
    const view = page.frames().find((f) => f.name() === 'view')!;
    const text = (id: string) => view.$eval(`#${id}`, (e: any) => e.textContent as string);
    await view.waitForFunction(() => document.getElementById('stderr').textContent === 'big-done\n', { timeout: 30_000 });
    await view.waitForFunction(() => document.getElementById('stdout').textContent.endsWith('\n400000\n'), { timeout: 30_000 });
    const total = Array.from({ length: 400000 }, (_, i) => `${i + 1}\n`).join('').length;
    // Only the tail was read: 64 KiB of stdout, nothing from its start.
    const tail = await text('stdout');
    expect(tail.length).toBe(64 * 1024);
    expect(tail.startsWith('1\n2\n3\n')).toBe(false);
    const stdoutBytesRead = reads.filter((r) => r.stream === 'stdout' && r.max_bytes !== 1).length;
    expect(stdoutBytesRead).toBe(1);
    const earlier = () => view.$eval('#stdout-earlier', (e: any) => ({ hidden: e.hidden, label: e.textContent as string }));
    expect(await earlier()).toEqual({ hidden: false, label: `Load earlier stdout (${Math.ceil((total - 64 * 1024) / 1024)} KiB not shown)` });
    expect(await view.$eval('#stderr-earlier', (e: any) => e.hidden)).toBe(true);
    await page.screenshot({ path: join(SHOTS, 'mcp-app-job-viewer-tail.png'), fullPage: true });
    // One click: the page before it, joined seamlessly to what was shown.
    await view.click('#stdout-earlier');
    await view.waitForFunction((n: number) => document.getElementById('stdout').textContent.length === n, { timeout: 15_000 }, 128 * 1024);
    const all = Array.from({ length: 400000 }, (_, i) => `${i + 1}\n`).join('');
    expect(await text('stdout')).toBe(all.slice(total - 128 * 1024));
    expect(await text('error')).toBe('');
    await page.close();
  }, 180_000);

  it("shows a denial as the call's error, with no job to follow", async () => {
    const page: Page = await browser.newPage();
    await page.exposeFunction('hostCallTool', async () => {
      throw new Error('the view must not call tools for a denied call');
    });
    await page.goto(hostUrl);
    await page.waitForFunction(() => typeof window.startHost === 'function', { timeout: 15_000 });
    const html = ((await client.readResource({ uri: JOB_VIEWER_URI })).contents[0] as { text: string }).text;
    const args = { command: 'curl', args: ['http://127.0.0.1/'] };
    const denied = await client.callTool({ name: 'execute', arguments: args });
    expect(denied.isError).toBe(true);
    await page.evaluate((h: string, a: unknown, r: unknown) => window.startHost(h, a, r), html, args, denied);
    const view = page.frames().find((f) => f.name() === 'view')!;
    await view.waitForFunction(() => /not in the allowed executables list/.test(document.getElementById('error').textContent), { timeout: 15_000 });
    expect(await page.evaluate(() => window.toolCalls)).toEqual([]);
    await page.close();
  });
});
