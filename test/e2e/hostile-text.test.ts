/**
 * Text that reorders itself, against the real gateway (`wrangler dev`) and Chromium: an OAuth
 * client named with U+202E (RIGHT-TO-LEFT OVERRIDE) must not flip the consent page's own heading;
 * an agent's `hello` whose id carries ESC or U+202E is refused, saying what an id may hold, and a
 * version that carries them shows escaped on the Agents page; a cwd with U+202E is refused with a
 * message that writes it as `\u202e`. The rule is src/contracts/visible-text.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rawAgent as rawAgentOf } from '../support/raw-agent.ts';
import type { Browser, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { aria, goTo } from '../support/dashboard-page.ts';
import { until } from '../support/until.ts';
import { ROOT, connectMcp, startGateway, type Gateway } from './harness.ts';
import { PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';

declare const document: any;

type S = Record<string, any>;

const TEAM = 'hostile-text';
const SHOTS = join(ROOT, 'test/screenshots');
/** What must never reach a page or a message raw: C0 (but the line ends a page may hold), DEL, C1 and the bidi controls. */
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;
const CLIENT_NAME = 'evil\u202Egnp.exe';
const HOSTILE_VERSION = '1.0\u202e\x1b[8mlive';

let gw: Gateway;
let adminToken: string;

beforeAll(async () => {
  gw = await startGateway();
  adminToken = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'text-admin' });
}, 180_000);

afterAll(async () => {
  await gw?.stop();
});

const rawAgent = (token: string) => rawAgentOf(gw.url, token);

const hello = (agentId: string, version = 'test') =>
  JSON.stringify({ type: 'hello', v: PROTOCOL_VERSION, agentId, version, capacity: 1, sandbox: 'none', runtimes: [], labels: [], running: [] });

async function agents(): Promise<S[]> {
  const r = await fetch(`${gw.url}/admin/v1/agents`, { headers: { Authorization: `Bearer ${adminToken}` } });
  return ((await r.json()) as { agents: S[] }).agents;
}

/** Registers an OAuth client as any MCP client may (dynamic registration) and gives the consent page's URL. */
async function consentUrl(clientName: string): Promise<string> {
  const redirect = 'http://127.0.0.1:9/callback';
  const reg = await fetch(`${gw.url}/oauth/register`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ client_name: clientName, redirect_uris: [redirect], token_endpoint_auth_method: 'none' }),
  });
  expect(reg.status).toBe(201);
  const { client_id } = (await reg.json()) as { client_id: string };
  const q = new URLSearchParams({
    response_type: 'code',
    client_id,
    redirect_uri: redirect,
    state: 's1',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
    resource: gw.mcpUrl,
  });
  return `${gw.url}/authorize?${q}`;
}

describe('the consent page', () => {
  it("isolates a client's name in <bdi> and shows U+202E as \\u202e", async () => {
    const html = await (await fetch(await consentUrl(CLIENT_NAME))).text();
    expect(html).toContain('<strong id="client-name"><bdi>evil\\u202egnp.exe</bdi></strong>');
    expect(html).toContain('<title>Authorize evil\\u202egnp.exe — Gatehouse</title>');
    expect(RAW.test(html.replace(/\n/g, ''))).toBe(false);
  });
});

describe('agent hello', () => {
  it.each([
    ['ESC', 'build\x1b[8m-1'],
    ['U+202E', 'build\u202e1-'],
  ])('refuses an agentId with %s, saying which characters an id may hold', async (_, agentId) => {
    const raw = await rawAgent(await gw.token({ team: TEAM, scopes: ['agent'], subject: `agent-${_}` }));
    try {
      const refusals = () =>
        gw.logs().split('rejected message: malformed message: agentId: agentId must be 1-128 characters of letters, digits, . _ - @ :').length;
      const before = refusals();
      raw.ws.send(hello(agentId));
      await until(async () => refusals() > before, 30_000, 'the refusal in the gateway log');
      expect(raw.messages.map((m) => m.type)).not.toContain('welcome');
      expect((await agents()).map((a) => a.agent_id)).not.toContain(agentId);
    } finally {
      raw.ws.close();
    }
  });
});

describe('a cwd with U+202E', () => {
  it('is refused with a message that writes it as \\u202e, never the raw character', async () => {
    const client = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'] }));
    try {
      const r = (await client.callTool({ name: 'execute', arguments: { command: 'ls', cwd: '/etc\u202egnp.exe' } })) as S;
      expect(r.isError).toBe(true);
      const text = r.content[0].text as string;
      expect(text).toContain('Relative CWD "/etc\\u202egnp.exe" contains path traversal or absolute path components');
      expect(RAW.test(text)).toBe(false);
      expect(r.structuredContent.error).toEqual({ code: 'policy_denied', message: text });
    } finally {
      await client.close();
    }
  });
});

describe.skipIf(!HAVE_CHROMIUM)('in Chromium', () => {
  let browser: Browser;

  beforeAll(async () => {
    requireChromium('hostile-text browser tests');
    browser = await launchChromium(mkdtempSync(join(tmpdir(), 'gatehouse-chromium-')));
    mkdirSync(SHOTS, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
  });

  it("a client named with U+202E does not reorder the consent page's heading", async () => {
    const page = await browser.newPage();
    try {
      await page.goto(await consentUrl(CLIENT_NAME));
      const seen = await page.$eval('h1', (h1: any) => {
        const last = h1.lastChild; // the heading's own words after the client's name: " to use Gatehouse?"
        const boxes: { left: number; top: number }[] = [];
        for (let i = 0; i < last.data.length; i++) {
          if (last.data[i] === ' ') continue;
          const r = document.createRange();
          r.setStart(last, i);
          r.setEnd(last, i + 1);
          const b = r.getBoundingClientRect();
          boxes.push({ left: b.left, top: Math.round(b.top) });
        }
        return { tail: last.data, boxes, name: h1.querySelector('#client-name > bdi')?.textContent ?? null, text: h1.textContent };
      });
      expect(seen.tail).toBe(' to use Gatehouse?');
      expect(seen.name).toBe('evil\\u202egnp.exe');
      expect(seen.text).toBe('Allow evil\\u202egnp.exe to use Gatehouse?');
      // Read left to right, as written: each character of the heading's own words lies right of the one before, or starts the next line.
      for (let i = 1; i < seen.boxes.length; i++) {
        const [a, b] = [seen.boxes[i - 1], seen.boxes[i]];
        expect(b.top > a.top || (b.top === a.top && b.left > a.left), `character ${i} of ${JSON.stringify(seen.tail)}: ${JSON.stringify([a, b])}`).toBe(true);
      }
      await page.screenshot({ path: join(SHOTS, 'consent-bidi-client-name.png'), fullPage: true });
    } finally {
      await page.close();
    }
  }, 120_000);

  it('the Agents page shows an agent version with ESC and U+202E as escapes, isolated', async () => {
    const raw = await rawAgent(await gw.token({ team: TEAM, scopes: ['agent'], subject: 'agent-version' }));
    const page: Page = await browser.newPage();
    try {
      raw.ws.send(hello('hostile-version', HOSTILE_VERSION));
      await until(async () => raw.messages.some((m) => m.type === 'welcome'), 30_000, 'the welcome');
      await page.setViewport({ width: 1366, height: 900 });
      await page.goto(`${gw.url}/dashboard`);
      await page.waitForSelector(aria('Admin token'));
      await page.keyboard.type(adminToken);
      await page.keyboard.press('Enter');
      await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
      await goTo(page, '#/agents', 'Agents');
      await page.waitForSelector('tr[data-agent="hostile-version"]', { timeout: 15_000 });
      const row = await page.$eval('tr[data-agent="hostile-version"] th', (th: any) => ({
        version: th.querySelector('bdi.version')?.textContent ?? null,
        id: th.querySelector('bdi.agent-id')?.textContent ?? null,
      }));
      expect(row).toEqual({ version: '1.0\\u202e\\x1b[8mlive', id: 'hostile-version' });
      expect(RAW.test(await page.$eval('main', (m: any) => m.textContent))).toBe(false);
      await page.screenshot({ path: join(SHOTS, 'agents-hostile-version.png'), fullPage: true });
    } finally {
      await page.close();
      raw.ws.close();
    }
  }, 120_000);
});
