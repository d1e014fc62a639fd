/**
 * Remote MCP servers that require OAuth, end to end and under attack: real `wrangler dev`, the official MCP
 * client calling run_script, the real `gatehouse` CLI, and an OAuth-protected MCP server on 127.0.0.1 built
 * from the MCP SDK's own server pieces (test/support/oauth-mcp-server.ts: protected-resource metadata, an
 * authorization server with discovery, dynamic registration, PKCE S256, refresh tokens; /authorize approves
 * at once, so following the authorization URL with `redirect: 'manual'` stands for the admin's browser).
 *
 * The gateway is the server's OAuth client: an admin registers the server (`--oauth`), connects the team
 * once (`servers connect` → the URL → the gateway's callback), and scripts call it; the gateway refreshes
 * the access token near its expiry and on a 401, and a refused refresh is `oauth_expired`. Attacks: a
 * forged, tampered, replayed, expired or misbound `state`; a code from another team's authorization; an
 * authorization server (or the MCP endpoint) answering with a redirect; a server that repeats the
 * credentials it was sent in an error. No token, refresh token, client secret or PKCE verifier shows up
 * in a listing, an audit row or export, a script's output or error, a callback page, the gateway's log,
 * or the emulator's stored state in readable form.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startGateway, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { startOAuthMcpServer, type OAuthMcpServer, type RedirectPoint } from '../support/oauth-mcp-server.ts';
import { runCli } from '../support/cli.ts';
import { objectRows, updateObjects } from '../support/emulator-state.ts';
import { readmeBlock } from '../cli/readme.ts';

const TEAM = 'oa';
const OTHER = 'ob';
const CALLBACK = '/oauth/servers/callback';
const NOT_CONNECTED = 'servers.docs: not connected to its OAuth server yet; an admin connects with gatehouse servers connect docs';
const EXPIRED = 'servers.docs: OAuth connection expired; an admin reconnects with gatehouse servers connect docs';

let gw: Gateway;
let remote: OAuthMcpServer;
let client: Client;
let admin: string;
let otherAdmin: string;
/** Everything the gateway answered an admin, a script or a browser: swept for credentials at the end. */
const shown: string[] = [];

async function scriptClient(team: string): Promise<Client> {
  return gw.mcp(team, ['execute']);
}

async function run(code: string, c: Client = client) {
  const r = await c.callTool({ name: 'run_script', arguments: { code } }, undefined, { timeout: 60_000 });
  shown.push(JSON.stringify(r));
  return { s: r.structuredContent as Record<string, any>, t: (r.content as { text: string }[])[0]?.text ?? '' };
}

/** A script that reports what a server call answered or threw. */
const attempt = (expr: string) => `try { return { ok: true, value: await ${expr} }; } catch (e) { return { ok: false, code: e.code, message: e.message }; }`;

async function adminFetch(path: string, init: RequestInit = {}, token = admin): Promise<{ status: number; text: string; json: any }> {
  const res = await fetch(`${gw.url}/admin/v1${path}`, { ...init, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' } });
  const text = await res.text();
  shown.push(text);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

async function cli(args: string[], token = admin) {
  const r = await runCli(gw.url, token, args);
  shown.push(r.stdout, r.stderr);
  return r;
}

const register = (id: string, body: unknown, token = admin) => adminFetch(`/servers/${id}`, { method: 'PUT', body: JSON.stringify(body) }, token);

/** The OAuth connection of a server as admins see it. */
async function view(id: string, token = admin): Promise<Record<string, any> | undefined> {
  const r = await adminFetch('/servers', {}, token);
  expect(r.status).toBe(200);
  return (r.json.servers as Array<Record<string, any>>).find((s) => s.id === id)?.oauth;
}

/** `POST /servers/:id/connect`: the authorization URL. */
async function startConnect(id: string, token = admin): Promise<string> {
  const r = await adminFetch(`/servers/${id}/connect`, { method: 'POST', body: '{}' }, token);
  expect(r.status, r.text).toBe(200);
  return r.json.authorizationUrl as string;
}

/** What the admin's browser does at the authorization server: follows the URL to the redirect it answers. */
async function authorize(url: string): Promise<string> {
  const res = await fetch(url, { redirect: 'manual' });
  expect(res.status).toBe(302);
  return res.headers.get('location')!;
}

/** The browser arriving back at the gateway. */
async function callback(url: string): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(url, { redirect: 'manual' });
  const text = await res.text();
  shown.push(text);
  return { status: res.status, text, headers: res.headers };
}

async function connect(id: string, token = admin): Promise<void> {
  const done = await callback(await authorize(await startConnect(id, token)));
  expect(done.status, done.text).toBe(200);
  expect(done.text).toContain(`servers.${id} is connected`);
}

/** A callback URL with its `state` replaced. */
function withState(url: string, state: string): string {
  const u = new URL(url);
  u.searchParams.set('state', state);
  return u.href;
}

function refused(r: { status: number; text: string }) {
  expect(r.status).toBe(400);
  expect(r.text).toContain('oauth_state_invalid');
  expect(r.text).toContain('The server was not connected');
}

async function auditRows(token = admin): Promise<Array<Record<string, any>>> {
  const r = await adminFetch('/audit?limit=500', {}, token);
  expect(r.status).toBe(200);
  return r.json.entries;
}

const commandOf = (row: Record<string, any>) => (typeof row.command === 'string' ? JSON.parse(row.command) : row.command);

beforeAll(async () => {
  remote = await startOAuthMcpServer();
  gw = await startGateway({ vars: { GATEHOUSE_SECRETS_KEY: randomBytes(32).toString('base64') }, logLevel: 'info' });
  admin = await gw.token({ team: TEAM, scopes: ['admin'] });
  otherAdmin = await gw.token({ team: OTHER, scopes: ['admin'] });
  client = await scriptClient(TEAM);
  for (const team of [TEAM, OTHER])
    await gw.putPolicy(team, { ...DEFAULT_POLICY, script: { enabled: true, cpuMs: 2_000, servers: { default: 'allow', maxCalls: 50 } } });
}, 400_000);

afterEach(() => remote?.reset());

afterAll(async () => {
  await client?.close();
  await gw?.stop();
  await remote?.close();
});

describe('a remote MCP server that requires OAuth', () => {
  it('the CLI block of docs/script-mode.md registers it, connects the team through the browser flow, and lists it connected', async () => {
    const lines = readmeBlock('servers-oauth-cli');
    expect(lines.map((l) => l.split(' ').slice(0, 3).join(' '))).toEqual(['gatehouse servers add', 'gatehouse servers connect', 'gatehouse servers list']);
    const args = (line: string) =>
      line
        .replace(/^gatehouse /, '')
        .replace('https://mcp.example.com/mcp', remote.url)
        .match(/"[^"]*"|\S+/g)!
        .map((a) => a.replace(/^"|"$/g, ''));

    // Registered: not connected yet, and a script says so without the server hearing of it.
    const add = await cli(args(lines[0]!));
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toContain(`registered docs: ${remote.url}`);
    expect(add.stdout).toContain('connect the team with: gatehouse servers connect docs');
    const before = await cli(['servers', 'list']);
    expect(before.stdout).toMatch(/docs\s+http:\/\/127\.0\.0\.1:\d+\/mcp\s+-\s+oauth:not_connected\s/);
    expect(await view('docs')).toEqual({ state: 'not_connected', expiresAt: null, scopes: [], connectedAt: null, connectedBy: null });
    const early = await run(attempt(`servers.docs.listTools()`));
    expect(early.s.result).toEqual({ ok: false, code: 'oauth_not_connected', message: NOT_CONNECTED });
    expect(remote.requests).toEqual([]);

    // `servers connect` prints the URL: discovery and registration happened, the request is PKCE S256 with a sealed state.
    const started = await cli(args(lines[1]!));
    expect(started.code, started.stderr).toBe(0);
    expect(started.stderr).toMatch(/open the URL above in a browser and sign in before \d{4}-\d{2}-\d{2}T/);
    const url = new URL(started.stdout.trim());
    expect(url.origin + '/').toBe(remote.issuer);
    expect(url.pathname).toBe('/authorize');
    const q = Object.fromEntries(url.searchParams);
    expect(q).toMatchObject({
      response_type: 'code',
      code_challenge_method: 'S256',
      redirect_uri: `${gw.url}${CALLBACK}`,
      resource: remote.url,
      scope: 'read write',
    });
    expect(q.code_challenge).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(remote.issued.clientIds).toContain(q.client_id);
    // The state names team and server only sealed: nothing readable in it.
    expect(q.state!.length).toBeGreaterThan(60);
    expect(Buffer.from(q.state!, 'base64').toString('latin1')).not.toMatch(/docs|"team"|nonce/);
    expect(remote.seen('resource').map((r) => `${r.method} ${r.path}`)).toContain('GET /.well-known/oauth-protected-resource/mcp');
    expect(remote.seen('authorization').map((r) => `${r.method} ${r.path}`)).toEqual(
      expect.arrayContaining(['GET /.well-known/oauth-authorization-server', 'POST /register']),
    );
    expect(remote.grants('authorization_code')).toEqual([]);

    // The browser: the authorization server approves and sends it back to the gateway, which exchanges the code.
    const back = await authorize(url.href);
    expect(back.startsWith(`${gw.url}${CALLBACK}?`)).toBe(true);
    expect(new URL(back).searchParams.get('state')).toBe(q.state);
    const done = await callback(back);
    expect(done.status, done.text).toBe(200);
    expect(done.text).toContain('servers.docs is connected');
    expect(done.headers.get('cache-control')).toBe('no-store');
    expect(done.headers.get('referrer-policy')).toBe('no-referrer');
    const [exchange, ...more] = remote.grants('authorization_code');
    expect(more).toEqual([]);
    // The SDK's token handler checked the verifier against the S256 challenge before answering 200.
    expect(exchange).toMatchObject({ status: 200, body: { code: new URL(back).searchParams.get('code'), client_id: q.client_id } });
    expect(exchange!.body!.code_verifier).toMatch(/^[A-Za-z0-9._~-]{43,128}$/);
    expect(exchange!.body!.client_secret).toBe(remote.issued.clientSecrets.at(-1));

    const listed = await cli(args(lines[2]!));
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/docs\s+http:\/\/127\.0\.0\.1:\d+\/mcp\s+-\s+oauth:connected, expires \d{4}-\d{2}-\d{2}T[\d:.]+Z, scopes read write\s/);
    const v = await view('docs');
    expect(v).toMatchObject({ state: 'connected', scopes: ['read', 'write'], connectedBy: `test-${TEAM}` });
    expect(Math.abs(Date.parse(v!.expiresAt) - (Date.now() + 3600_000))).toBeLessThan(120_000);
    const json = await cli(['servers', 'list', '--json']);
    expect(JSON.parse(json.stdout).servers[0]).toMatchObject({ id: 'docs', auth: 'oauth', oauth: { state: 'connected' } });

    const rows = await auditRows();
    const begun = rows.find((r) => r.tool === 'admin.server_connect');
    expect(begun && commandOf(begun)).toEqual({ server: 'docs', url: remote.url, client: 'registered' });
    const connected = rows.find((r) => r.tool === 'oauth.server_connected');
    expect(connected && commandOf(connected)).toEqual({ server: 'docs', scopes: ['read', 'write'] });
    expect(connected!.subject).toBe(`test-${TEAM}`);
    expect(remote.seen('trap')).toEqual([]);
  });

  it('a script lists and calls its tools; only the server receives the access token', async () => {
    const from = remote.requests.length;
    const out = await run(`
      const r = await servers.docs.call('echo', { text: 'over oauth' });
      const { tools } = await servers.docs.listTools();
      return { text: r.content[0].text, tools: tools.map((t) => t.name).sort() };`);
    expect(out.s.status, out.t).toBe('success');
    expect(out.s.result).toEqual({ text: 'echo: over oauth', tools: ['add', 'echo'] });
    const mcp = remote.seen('resource', from).filter((r) => r.path === '/mcp');
    expect(mcp.length).toBeGreaterThan(0);
    expect(new Set(mcp.map((r) => r.authorization))).toEqual(new Set([`Bearer ${remote.issued.accessTokens.at(-1)}`]));
    expect(mcp.every((r) => r.status !== 401)).toBe(true);
    // A fresh token: no refresh.
    expect(remote.grants('refresh_token', from)).toEqual([]);
  });

  it('an access token the server refuses as expired is refreshed once (401, refresh, retry) and the call works', async () => {
    const oldAccess = remote.issued.accessTokens.at(-1)!;
    const oldRefresh = remote.issued.refreshTokens.at(-1)!;
    const before = await view('docs');
    // The gateway still believes the token good for an hour; the server no longer does. The next one is said to last 6 s.
    remote.expireAccessTokens();
    remote.settings.announcedTtlSeconds = 6;
    const from = remote.requests.length;
    const out = await run(`return (await servers.docs.call('add', { a: 2, b: 3 })).content[0].text`);
    expect(out.s.status, out.t).toBe('success');
    expect(out.s.result).toBe('5');
    const refreshes = remote.grants('refresh_token', from);
    expect(refreshes).toHaveLength(1);
    expect(refreshes[0]).toMatchObject({ status: 200, body: { refresh_token: oldRefresh, resource: remote.url } });
    const mcp = remote.seen('resource', from).filter((r) => r.path === '/mcp');
    expect(mcp[0]).toMatchObject({ authorization: `Bearer ${oldAccess}`, status: 401 });
    expect(mcp[0]!.wwwAuthenticate).toMatch(
      /^Bearer error="invalid_token".*resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/,
    );
    const newAccess = remote.issued.accessTokens.at(-1)!;
    expect(mcp.slice(1).every((r) => r.authorization === `Bearer ${newAccess}` && r.status !== 401)).toBe(true);
    // The new tokens were sealed back: the listing shows the new expiry.
    const after = await view('docs');
    expect(after!.state).toBe('connected');
    expect(Date.parse(after!.expiresAt)).toBeLessThan(Date.parse(before!.expiresAt));
    expect(Math.abs(Date.parse(after!.expiresAt) - (Date.now() + 6_000))).toBeLessThan(5_000);
  });

  it('an access token near its expiry is refreshed before it is sent', async () => {
    // The token stored by the last test was said to last 6 s (the server would still take it): past half of that, it is
    // refreshed first (a minute before expiry, or half the lifetime of a shorter-lived token).
    const nearExpiry = remote.issued.accessTokens.at(-1)!;
    const expiresAt = Date.parse((await view('docs'))!.expiresAt);
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - 3_000 - Date.now()) + 500));
    const from = remote.requests.length;
    const out = await run(`return (await servers.docs.call('echo', { text: 'fresh' })).content[0].text`);
    expect(out.s.result).toBe('echo: fresh');
    expect(remote.grants('refresh_token', from)).toHaveLength(1);
    const mcp = remote.seen('resource', from).filter((r) => r.path === '/mcp');
    expect(mcp.length).toBeGreaterThan(0);
    expect(mcp.some((r) => r.authorization === `Bearer ${nearExpiry}`)).toBe(false);
    expect(mcp.every((r) => r.authorization === `Bearer ${remote.issued.accessTokens.at(-1)}` && r.status !== 401)).toBe(true);
    expect(Date.parse((await view('docs'))!.expiresAt)).toBeGreaterThan(Date.now() + 3000_000);
  });

  it("a connection's requests that find the token stale together share one refresh", async () => {
    // Stored tokens said to last 4 s: the script's calls after a 2.5 s sleep find them due for a refresh, all at once.
    remote.settings.announcedTtlSeconds = 4;
    remote.expireAccessTokens();
    expect((await run(`return (await servers.docs.call('echo', { text: 'prime' })).content[0].text`)).s.result).toBe('echo: prime');
    const from = remote.requests.length;
    const out = await run(`
      await servers.docs.call('echo', { text: 'first' });
      await sleep(2500);
      const all = await Promise.all(['a', 'b', 'c', 'd'].map((text) => servers.docs.call('echo', { text })));
      return all.map((r) => r.content[0].text);`);
    expect(out.s.result, out.t).toEqual(['echo: a', 'echo: b', 'echo: c', 'echo: d']);
    const refreshes = remote.grants('refresh_token', from);
    expect(refreshes.length).toBeGreaterThanOrEqual(1);
    // A second refresh at the same time would have spent a refresh token already rotated, and been refused.
    expect(refreshes.map((g) => g.status)).toEqual(refreshes.map(() => 200));
    expect((await view('docs'))!.state).toBe('connected');
  });

  it('scripts refreshing the same connection at once all go on, and the connection stays connected', async () => {
    remote.expireAccessTokens();
    // The first refresh's answer is slow: the others are refused (its rotation spent the refresh token) before its
    // tokens are saved, and must wait for them rather than call the connection expired.
    remote.settings.refreshDelayMs = 300;
    const from = remote.requests.length;
    const outs = await Promise.all(['a', 'b', 'c'].map((text) => run(attempt(`servers.docs.call('echo', { text: '${text}' })`))));
    expect(outs.map((o) => o.s.result)).toEqual(
      ['a', 'b', 'c'].map((text) => ({ ok: true, value: expect.objectContaining({ content: [{ type: 'text', text: `echo: ${text}` }] }) })),
    );
    const statuses = remote.grants('refresh_token', from).map((g) => g.status);
    expect(statuses.filter((x) => x === 200)).toHaveLength(1);
    expect(statuses).toContain(400);
    expect((await view('docs'))!.state).toBe('connected');
    expect((await run(`return (await servers.docs.call('echo', { text: 'later' })).content[0].text`)).s.result).toBe('echo: later');
  });

  it('a refused refresh fails the call with oauth_expired and the reconnect message; the listing says expired; reconnecting mends it', async () => {
    remote.settings.refuseRefresh = true;
    remote.expireAccessTokens();
    let from = remote.requests.length;
    const out = await run(attempt(`servers.docs.call('echo', { text: 'x' })`));
    expect(out.s.result).toEqual({ ok: false, code: 'oauth_expired', message: EXPIRED });
    expect(remote.grants('refresh_token', from)).toMatchObject([{ status: 400 }]);
    const listed = await cli(['servers', 'list']);
    expect(listed.stdout).toMatch(/docs\s+\S+\s+-\s+oauth:expired/);
    expect((await view('docs'))!.state).toBe('expired');

    // Later calls fail at once, asking neither server; uncaught, the script fails with the same message.
    from = remote.requests.length;
    const again = await run(`return await servers.docs.listTools()`);
    expect(again.t).toContain(`Sandbox error: ${EXPIRED}`);
    expect(remote.requests.slice(from)).toEqual([]);
    const rows = await auditRows();
    const failed = rows.find((r) => r.tool === 'run_script' && r.reason === EXPIRED);
    expect(failed).toBeDefined();
    expect(failed!.decision).toBe('failed');
    expect(commandOf(failed!)).toMatchObject({ mode: 'server_call', server: 'docs' });

    remote.settings.refuseRefresh = false;
    await connect('docs');
    expect((await view('docs'))!.state).toBe('connected');
    const ok = await run(`return (await servers.docs.call('echo', { text: 'back' })).content[0].text`);
    expect(ok.s.result).toBe('echo: back');
  });

  it('a reconnect uses the client registered before; --new-client registers another for an authorization server that forgot it', async () => {
    expect((await view('docs'))!.state).toBe('connected');
    const clients = remote.issued.clientIds.length;
    const start = async (body: string) => adminFetch('/servers/docs/connect', { method: 'POST', body }, admin);

    // Reconnecting: the same client, no registration; the connection works with the new tokens.
    const again = await start('');
    expect(again.status, again.text).toBe(200);
    expect(again.json.client).toBe('reused');
    const done = await callback(await authorize(again.json.authorizationUrl));
    expect(done.status, done.text).toBe(200);
    expect(remote.issued.clientIds).toHaveLength(clients);
    expect((await run(`return (await servers.docs.call('echo', { text: 'same client' })).content[0].text`)).s.result).toBe('echo: same client');

    // The authorization server forgets its clients: the reused one is refused at its page, and nothing changes here.
    remote.forgetClients();
    const stale = await start('{}');
    expect(stale.json.client).toBe('reused');
    const page = await fetch(stale.json.authorizationUrl, { redirect: 'manual' });
    expect(page.status).toBe(400);
    await page.text();
    expect((await view('docs'))!.state).toBe('connected');

    // --new-client registers a new one, and the connection is made with it.
    const cliOut = await cli(['servers', 'connect', 'docs', '--new-client']);
    expect(cliOut.code, cliOut.stderr).toBe(0);
    expect(cliOut.stderr).toContain('(a newly registered OAuth client)');
    expect(remote.issued.clientIds).toHaveLength(clients + 1);
    const fresh = await callback(await authorize(cliOut.stdout.trim()));
    expect(fresh.status, fresh.text).toBe(200);
    expect((await run(`return (await servers.docs.call('echo', { text: 'new client' })).content[0].text`)).s.result).toBe('echo: new client');
    const begun = (await auditRows()).filter((r) => r.tool === 'admin.server_connect').slice(0, 3);
    expect(begun.map((r) => commandOf(r).client)).toEqual(['registered', 'reused', 'reused']);

    // A body that is not {} or {"newClient": true} is refused with the shape expected.
    for (const body of ['{"newClient": "yes"}', '{"client": "new"}', '[]']) {
      const bad = await start(body);
      expect(bad.status, body).toBe(400);
      expect(bad.json.error).toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('expected {} or {"newClient": true}') });
    }
  });

  it('a server registered again at another URL loses its connection', async () => {
    const r = await register('moving', { url: remote.url, auth: 'oauth' });
    expect(r.status).toBe(201);
    await connect('moving');
    expect((await view('moving'))!.state).toBe('connected');
    expect((await register('moving', { url: `${remote.url}/v2`, auth: 'oauth' })).status).toBe(200);
    expect((await view('moving'))!.state).toBe('not_connected');
    const out = await run(attempt(`servers.moving.listTools()`));
    expect(out.s.result).toMatchObject({ ok: false, code: 'oauth_not_connected' });
    expect((await adminFetch('/servers/moving', { method: 'DELETE' })).status).toBe(200);
  });
});

describe('the callback under attack', () => {
  it('a forged, tampered, truncated or missing state is refused (oauth_state_invalid) and changes nothing', async () => {
    const before = await view('docs');
    const pending = await authorize(await startConnect('docs'));
    const state = new URL(pending).searchParams.get('state')!;
    const from = remote.requests.length;
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    for (const forged of [
      randomBytes(90).toString('base64url'),
      flip(state, Math.floor(state.length / 2)),
      flip(state, 3),
      flip(state, state.length - 2),
      state.slice(0, -8),
      '',
    ])
      refused(await callback(withState(pending, forged)));
    refused(await callback(`${gw.url}${CALLBACK}?code=whatever`));
    // None of them reached the authorization server, and the connection is the one it was.
    expect(remote.requests.slice(from)).toEqual([]);
    expect(await view('docs')).toEqual(before);
  });

  it('a callback URL works once: its replay is refused and never reaches the authorization server', async () => {
    const back = await authorize(await startConnect('docs'));
    const first = await callback(back);
    expect(first.status, first.text).toBe(200);
    const connected = await view('docs');
    const from = remote.requests.length;
    refused(await callback(back));
    expect(remote.requests.slice(from)).toEqual([]);
    expect(await view('docs')).toEqual(connected);
  });

  it('a state for a server that was re-registered, or whose authorization failed, is spent', async () => {
    await register('notes', { url: remote.url, auth: 'oauth' });
    const back = await authorize(await startConnect('notes'));
    // Registered again at another URL before the browser came back: the started authorization went with the old one.
    await register('notes', { url: `${remote.url}/other`, auth: 'oauth' });
    refused(await callback(back));
    expect((await view('notes'))!.state).toBe('not_connected');
    // An authorization the server refused (error=access_denied) spends its state too.
    await register('notes', { url: remote.url, auth: 'oauth' });
    const denied = new URL(await authorize(await startConnect('notes')));
    const code = denied.searchParams.get('code')!;
    denied.searchParams.delete('code');
    denied.searchParams.set('error', 'access_denied');
    const r = await callback(denied.href);
    expect(r.status).toBe(400);
    expect(r.text).toContain('upstream_error: servers.notes: the authorization server refused: access_denied');
    denied.searchParams.delete('error');
    denied.searchParams.set('code', code);
    refused(await callback(denied.href));
    expect((await view('notes'))!.state).toBe('not_connected');
    await adminFetch('/servers/notes', { method: 'DELETE' });
  });

  it("another team's authorization connects only that team; a code from it in this team's callback is refused", async () => {
    expect((await register('docs', { url: remote.url, auth: 'oauth' }, otherAdmin)).status).toBe(201);
    const mine = await view('docs');
    const ours = new URL(await authorize(await startConnect('docs')));
    const theirs = new URL(await authorize(await startConnect('docs', otherAdmin)));
    // Code injection: their code with our state. Our client and PKCE verifier do not match it: nothing connects.
    const from = remote.requests.length;
    const swapped = new URL(ours);
    swapped.searchParams.set('code', theirs.searchParams.get('code')!);
    const r = await callback(swapped.href);
    expect(r.status).toBe(400);
    expect(r.text).toContain('upstream_error: servers.docs: the token exchange failed');
    expect(remote.grants('authorization_code', from).every((g) => g.status === 400)).toBe(true);
    expect(await view('docs')).toEqual(mine);
    expect((await view('docs', otherAdmin))!.state).toBe('not_connected');
    // Our state is spent by that attempt: with our own code it is refused now.
    refused(await callback(ours.href));

    // Their callback, as it came: their team is connected, ours untouched.
    const done = await callback(theirs.href);
    expect(done.status, done.text).toBe(200);
    expect((await view('docs', otherAdmin))!.state).toBe('connected');
    expect(await view('docs')).toEqual(mine);
    // Each team's scripts send that team's own token.
    const otherClient = await scriptClient(OTHER);
    try {
      const at = remote.requests.length;
      const out = await run(`return (await servers.docs.call('echo', { text: 'b' })).content[0].text`, otherClient);
      expect(out.s.result).toBe('echo: b');
      const theirToken = remote.seen('resource', at).find((q) => q.path === '/mcp')!.authorization;
      const at2 = remote.requests.length;
      expect((await run(`return (await servers.docs.call('echo', { text: 'a' })).content[0].text`)).s.result).toBe('echo: a');
      const ourToken = remote.seen('resource', at2).find((q) => q.path === '/mcp')!.authorization;
      expect(theirToken).not.toBe(ourToken);
    } finally {
      await otherClient.close();
    }
    // Their audit has their connection; ours has no row of theirs.
    expect((await auditRows(otherAdmin)).some((row) => row.tool === 'oauth.server_connected')).toBe(true);
    expect((await auditRows()).every((row) => row.team === undefined || row.team === TEAM)).toBe(true);
  });
});

describe('redirects from the OAuth side are not followed', () => {
  it.each<RedirectPoint>(['resource-metadata', 'authorization-metadata', 'register'])(
    'discovery or registration answered with a redirect (%s) fails the connect and nothing reaches the target',
    async (point) => {
      await register('redir', { url: remote.url, auth: 'oauth' });
      remote.settings.redirect.add(point);
      const r = await adminFetch('/servers/redir/connect', { method: 'POST', body: '{}' });
      expect(r.status).toBe(503);
      expect(r.json.error.code).toBe('upstream_error');
      expect(r.json.error.message).toMatch(/^servers\.redir: could not start OAuth with http:\/\/127\.0\.0\.1:\d+: /);
      expect(r.json.error.message).toContain(`redirect (307) to ${remote.trap}; not followed`);
      expect(remote.seen('trap')).toEqual([]);
      expect((await view('redir'))!.state).toBe('not_connected');
      await adminFetch('/servers/redir', { method: 'DELETE' });
    },
  );

  it('a token endpoint answering the code exchange with a redirect gets the code and verifier nowhere', async () => {
    const before = await view('docs');
    const back = await authorize(await startConnect('docs'));
    remote.settings.redirect.add('token');
    const r = await callback(back);
    expect(r.status).toBe(400);
    expect(r.text).toContain('upstream_error: servers.docs: the token exchange failed');
    expect(r.text).toContain(`redirect (307) to ${remote.trap}; not followed`);
    expect(remote.seen('trap')).toEqual([]);
    expect(await view('docs')).toEqual(before);
  });

  it('a token endpoint answering a refresh with a redirect gets the refresh token nowhere; the connection stays', async () => {
    remote.expireAccessTokens();
    remote.settings.redirect.add('token');
    const out = await run(attempt(`servers.docs.call('echo', { text: 'x' })`));
    expect(out.s.result).toMatchObject({ ok: false, code: 'upstream_error' });
    expect(out.s.result.message).toMatch(/^servers\.docs\.call: could not refresh its OAuth token: /);
    expect(out.s.result.message).toContain(`redirect (307) to ${remote.trap}; not followed`);
    expect(remote.seen('trap')).toEqual([]);
    // Not a refusal: the connection is still good, and the next call refreshes.
    expect((await view('docs'))!.state).toBe('connected');
    remote.settings.redirect.clear();
    expect((await run(`return (await servers.docs.call('echo', { text: 'y' })).content[0].text`)).s.result).toBe('echo: y');
  });

  it('the MCP endpoint redirecting to another origin does not get the token sent there', async () => {
    remote.settings.redirect.add('mcp');
    const out = await run(attempt(`servers.docs.listTools()`));
    expect(out.s.result).toMatchObject({ ok: false, code: 'upstream_error' });
    expect(out.s.result.message).toMatch(/^servers\.docs\.listTools: could not connect: /);
    expect(out.s.result.message).toContain(`Redirect to ${remote.trap}/mcp not followed`);
    expect(remote.seen('trap')).toEqual([]);
  });
});

describe('credentials stay with the gateway', () => {
  it('a server repeating the credentials it was sent in an error shows them to nobody', async () => {
    // The MCP endpoint repeats the Authorization header.
    remote.settings.echoOnError.add('mcp');
    const call = await run(attempt(`servers.docs.call('echo', { text: 'x' })`));
    expect(call.s.result).toMatchObject({ ok: false, code: 'upstream_error' });
    expect(call.s.result.message).toContain('resource failed for: Bearer [redacted]');
    remote.reset();

    // The token endpoint repeats the refresh request (refresh token, client secret).
    remote.expireAccessTokens();
    remote.settings.echoOnError.add('token');
    const refresh = await run(attempt(`servers.docs.call('echo', { text: 'x' })`));
    expect(refresh.s.result).toMatchObject({ ok: false, code: 'upstream_error' });
    expect(refresh.s.result.message).toMatch(/^servers\.docs\.call: could not refresh its OAuth token: /);
    expect(refresh.s.result.message).toContain('refresh_token=[redacted]');
    expect(refresh.s.result.message).toContain('client_secret=[redacted]');

    // The token endpoint repeats the code exchange (code, verifier, client secret) on the callback page.
    const back = await authorize(await startConnect('docs'));
    const page = await callback(back);
    expect(page.status).toBe(400);
    expect(page.text).toContain('upstream_error: servers.docs: the token exchange failed');
    expect(page.text).toContain('client_secret=[redacted]');
    expect(page.text).toContain('code_verifier=[redacted]');
    remote.reset();
    await connect('docs');
    for (const text of [call.t, refresh.t, page.text])
      for (const s of remote.secrets()) for (const form of [s, encodeURIComponent(s)]) expect(text).not.toContain(form);
  });

  it('a script cannot reach a token: not through servers, globals or an environment', async () => {
    const out = await run(`
      const seen = [];
      const dump = (v) => { try { return JSON.stringify(v, (k, x) => (typeof x === 'function' ? String(x) : x)) ?? String(v); } catch (e) { return 'unserializable ' + e.message; } };
      seen.push(dump(servers), String(Object.getOwnPropertyNames(servers)), dump(servers.docs), String(Object.getOwnPropertyNames(servers.docs)));
      for (const k of ['token', 'accessToken', 'access_token', 'headers', 'auth', 'authProvider', 'client', 'transport', 'secrets', 'oauth', 'connection', '__proto__', 'constructor'])
        try { seen.push(k + '=' + dump(servers.docs[k]) + '/' + dump(servers[k])); } catch (e) { seen.push(k + '!' + e.message); }
      seen.push(String(servers.docs.call), String(servers.docs.listTools));
      for (const k of Reflect.ownKeys(globalThis)) try { seen.push(String(k) + ':' + dump(globalThis[k])); } catch (e) { seen.push(String(k) + '!'); }
      seen.push(typeof process, typeof env, typeof require, dump(vars));
      const r = await servers.docs.call('echo', { text: 'probe' });
      seen.push(dump(r));
      try { await servers.docs.call('echo', { text: 'x'.repeat(10) }, { headers: { Authorization: 'mine' } }); } catch (e) { seen.push(e.message); }
      console.log(seen.join('\\n'));
      return seen.join('\\n');`);
    expect(out.s.status, out.t).toBe('success');
    expect(out.s.result).toContain('echo: probe');
    for (const s of remote.secrets()) {
      expect(out.t).not.toContain(s);
      expect(JSON.stringify(out.s)).not.toContain(s);
    }
  });

  it('no token, refresh token, client secret or verifier is in a listing, an audit row or export, a page, the log or the stored state', async () => {
    // Each as sent and as a form or URL carries it (a verifier may hold `~`, encoded `%7E`).
    const secrets = [...new Set(remote.secrets().flatMap((s) => [s, encodeURIComponent(s), new URLSearchParams({ s }).toString().slice(2)]))];
    expect(remote.issued.accessTokens.length).toBeGreaterThan(3);
    expect(remote.issued.refreshTokens.length).toBeGreaterThan(3);
    expect(remote.issued.clientSecrets.length).toBeGreaterThan(3);
    expect(secrets.some((s) => !s.startsWith('at-') && !s.startsWith('rt-') && !s.startsWith('cs-'))).toBe(true); // verifiers are in
    for (const token of [admin, otherAdmin]) {
      await adminFetch('/servers', {}, token);
      await adminFetch('/audit?limit=500', {}, token);
      await adminFetch('/audit/export', {}, token);
      await cli(['servers', 'list'], token);
      await cli(['servers', 'list', '--json'], token);
    }
    const texts = [...shown, gw.logs()];
    const everything = texts.join('\n');
    for (const s of secrets) expect(everything.includes(s), `a credential (${s.slice(0, 3)}…) was shown`).toBe(false);
    // The audit export and listings were really read (not empty answers).
    expect(everything).toContain('oauth.server_connected');
    expect(everything).toContain('oauth:connected');

    // Stored sealed: the team objects' and D1's files never hold one in readable form.
    expect(objectRows(gw.stateDir, 'remote_mcp_oauth_connections', 'SELECT server_id, sealed FROM remote_mcp_oauth_connections').length).toBeGreaterThanOrEqual(
      2,
    );
    const files = (dir: string): string[] => readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? files(join(dir, f)) : [join(dir, f)]));
    const stored = files(join(gw.stateDir, 'state'));
    expect(stored.length).toBeGreaterThan(0);
    for (const f of stored) {
      const bytes = readFileSync(f).toString('latin1');
      for (const s of secrets) expect(bytes.includes(s), `${f} holds a credential (${s.slice(0, 3)}…)`).toBe(false);
    }
  });

  it('a state past its ten minutes is refused, and changes nothing', async () => {
    const before = await view('docs');
    const back = await authorize(await startConnect('docs'));
    // The started authorization's expiry moved into the past (instead of waiting ten minutes); the restarted object reads it.
    expect(updateObjects(gw.stateDir, 'remote_mcp_oauth_pending', 'UPDATE remote_mcp_oauth_pending SET expires_at = 1')).toBeGreaterThanOrEqual(1);
    await client.close();
    await gw.restart();
    client = await scriptClient(TEAM);
    const from = remote.requests.length;
    refused(await callback(back));
    expect(remote.requests.slice(from)).toEqual([]);
    expect(await view('docs')).toEqual(before);
    // The connection itself survived the restart.
    expect((await run(`return (await servers.docs.call('echo', { text: 'after' })).content[0].text`)).s.result).toBe('echo: after');
  });
});
