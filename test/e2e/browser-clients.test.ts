/**
 * Browser-based MCP clients against the real gateway (a development gateway on 127.0.0.1): CORS on
 * /mcp, the metadata documents and the OAuth endpoints, answered before authentication for allowed
 * origins only; any loopback origin is allowed on a development gateway, a foreign origin gets a 403
 * and no CORS grant. Then a page served from another loopback origin runs the official SDK v2 client,
 * bundled for the browser with esbuild, in Debian's Chromium: it lists the tools and runs a job.
 * Screenshots go to test/screenshots/.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import type { Browser } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { promisify } from 'node:util';
import { hasCommand, ROOT, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { readmeBlock } from '../cli/readme.ts';

// Callbacks given to page.evaluate run in the browser; the project's types have no DOM lib.
declare const window: any, document: any;

requireChromium('browser MCP client tests');
const SHOTS = join(ROOT, 'test/screenshots');
const TEAM = 'browser';
const INSPECTOR_ORIGIN = 'http://localhost:6274';

let gw: Gateway;
let agent: AgentProcess;
let root: string;

beforeAll(async () => {
  gw = await startGateway();
  root = mkdtempSync(join(tmpdir(), 'gatehouse-browser-'));
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: testSandbox(), capacity: 2 });
  await agent.ready;
}, 180_000);

afterAll(async () => {
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

const preflight = (path: string, origin: string, method = 'POST', headers = 'authorization, content-type, mcp-protocol-version') =>
  fetch(`${gw.url}${path}`, {
    method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers },
  });

describe('CORS on the MCP endpoint', () => {
  it('answers a preflight from a loopback origin on another port before authentication, with the grant the protocol needs', async () => {
    const r = await preflight('/mcp', INSPECTOR_ORIGIN);
    expect(r.status).toBe(204);
    expect(r.headers.get('access-control-allow-origin')).toBe(INSPECTOR_ORIGIN);
    const allowHeaders = (r.headers.get('access-control-allow-headers') ?? '').toLowerCase();
    for (const h of ['authorization', 'content-type', 'mcp-protocol-version', 'mcp-method', 'mcp-name', 'last-event-id']) expect(allowHeaders).toContain(h);
    expect(r.headers.get('access-control-allow-methods')).toContain('POST');
    expect(Number(r.headers.get('access-control-max-age'))).toBeGreaterThan(0);
  });

  it.skipIf(!hasCommand('curl') && process.env.CI !== 'true')(
    'the docs/clients.md preflight line, run as written, answers 204 with the grant; a foreign origin gets none',
    async () => {
      const [line] = readmeBlock('cors-preflight');
      const run = async (cmd: string) =>
        (await promisify(execFile)('/bin/sh', ['-ec', cmd], { cwd: ROOT, env: { ...process.env, GATEHOUSE_URL: gw.url }, timeout: 30_000 })).stdout;
      const granted = await run(line);
      expect(granted).toMatch(/^HTTP\/1\.1 204/);
      expect(granted).toMatch(/^access-control-allow-origin: http:\/\/localhost:6274\r?$/im);
      const foreign = await run(line.replace('http://localhost:6274', 'http://evil.example.com'));
      expect(foreign).toMatch(/^HTTP\/1\.1 403/);
      expect(foreign).not.toMatch(/^access-control-/im);
    },
  );

  it('grants the real request and exposes WWW-Authenticate, so a browser client can discover OAuth from a 401', async () => {
    const r = await fetch(`${gw.url}/mcp`, { method: 'POST', headers: { Origin: INSPECTOR_ORIGIN, 'Content-Type': 'application/json' }, body: '{}' });
    expect(r.status).toBe(401);
    expect(r.headers.get('access-control-allow-origin')).toBe(INSPECTOR_ORIGIN);
    expect((r.headers.get('access-control-expose-headers') ?? '').toLowerCase()).toContain('www-authenticate');
    expect(r.headers.get('www-authenticate')).toContain('resource_metadata=');
  });

  it('a foreign origin gets 403 with the reason and no CORS grant, preflight or not', async () => {
    for (const r of [
      await preflight('/mcp', 'http://evil.example.com'),
      await fetch(`${gw.url}/mcp`, {
        method: 'POST',
        headers: {
          Origin: 'http://evil.example.com',
          'Content-Type': 'application/json',
          Authorization: `Bearer ${await gw.token({ team: TEAM, scopes: ['execute'] })}`,
        },
        body: '{}',
      }),
    ]) {
      expect(r.status).toBe(403);
      expect(r.headers.get('access-control-allow-origin')).toBeNull();
      expect(JSON.stringify(await r.json())).toContain('Origin \\"http://evil.example.com\\" is not allowed');
    }
  });

  it('the metadata documents are readable from any origin', async () => {
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp', '/.well-known/jwks.json']) {
      const r = await fetch(`${gw.url}${path}`, { headers: { Origin: 'https://any.example' } });
      expect(r.status, path).toBe(200);
      expect(r.headers.get('access-control-allow-origin'), path).toBe('*');
    }
    const p = await preflight('/.well-known/oauth-protected-resource', 'https://any.example', 'GET', 'mcp-protocol-version');
    expect(p.status).toBe(204);
    expect(p.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('the OAuth endpoints answer browser clients (metadata, registration, token)', async () => {
    const meta = await fetch(`${gw.url}/.well-known/oauth-authorization-server`, { headers: { Origin: INSPECTOR_ORIGIN } });
    expect(meta.status).toBe(200);
    expect(meta.headers.get('access-control-allow-origin')).toBeTruthy();
    for (const path of ['/oauth/register', '/oauth/token']) {
      const r = await preflight(path, INSPECTOR_ORIGIN, 'POST', 'content-type');
      expect(r.status, path).toBeLessThan(300);
      expect(r.headers.get('access-control-allow-origin'), path).toBe(INSPECTOR_ORIGIN);
    }
  });
});

describe.skipIf(!HAVE_CHROMIUM)('the SDK v2 client in a real browser, from another loopback origin', () => {
  let browser: Browser;
  let page: Server;
  let pageUrl: string;
  let profile: string;

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    const bundle = await build({
      stdin: {
        contents: `import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
          window.runMcp = async (url, token) => {
            const client = new Client({ name: 'browser-page', version: '1.0.0' });
            await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: 'Bearer ' + token } } }));
            const tools = (await client.listTools()).tools.map((t) => t.name);
            const run = await client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['hello from a browser'] } });
            await client.close();
            return { tools, run: run.structuredContent };
          };`,
        resolveDir: ROOT,
        loader: 'js',
      },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      logLevel: 'warning',
    });
    const js = bundle.outputFiles[0].text;
    page = createServer((req, res) => {
      if (req.url === '/client.js') {
        res.setHeader('Content-Type', 'text/javascript');
        res.end(js);
        return;
      }
      res.setHeader('Content-Type', 'text/html');
      res.end('<!doctype html><title>browser MCP client</title><pre id="out">running…</pre><script type="module" src="/client.js"></script>');
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', () => r()));
    // Another origin than the gateway's: the name differs (localhost vs 127.0.0.1) and so does the port.
    pageUrl = `http://localhost:${(page.address() as { port: number }).port}/`;
    profile = mkdtempSync(join(tmpdir(), 'gatehouse-chromium-'));
    browser = await launchChromium(profile);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((r) => (page ? page.close(() => r()) : r()));
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it('lists the tools and runs a job through CORS', async () => {
    const tab = await browser.newPage();
    await tab.goto(pageUrl);
    await tab.waitForFunction(() => typeof window.runMcp === 'function', { timeout: 15_000 });
    const token = await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'] });
    const out = (await tab.evaluate(
      (url: string, t: string) =>
        window.runMcp(url, t).then((r: unknown) => {
          document.getElementById('out').textContent = JSON.stringify(r, null, 2);
          return r;
        }),
      gw.mcpUrl,
      token,
    )) as { tools: string[]; run: { stdout: string; exit_code: number } };
    expect(out.tools).toEqual(expect.arrayContaining(['execute', 'runtime_execute', 'query_output']));
    expect(out.run).toMatchObject({ stdout: 'hello from a browser\n', exit_code: 0 });
    await tab.screenshot({ path: join(SHOTS, 'browser-sdk-client.png'), fullPage: true });
  }, 120_000);
});
