/**
 * Scripts calling MCP servers end to end: run_script through the official MCP client against real
 * `wrangler dev`, and a remote MCP server (the SDK's own, on 127.0.0.1) that requires a secret header.
 * The header is registered through the admin API, sealed in the team's object, sent only to that
 * server: never shown to admins, scripts or the audit log. The policy decides per server and tool.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startGateway, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { startRemoteMcpServer, type RemoteMcpServer } from '../support/remote-mcp-server.ts';
import { runCli } from '../support/cli.ts';
import { readmeBlock } from '../cli/readme.ts';

const TEAM = 'srv';
const SECRET = `sk-${randomBytes(12).toString('hex')}`;
let gw: Gateway;
let remote: RemoteMcpServer;
let client: Client;
let admin: string;

const policy = (servers?: Record<string, unknown>) =>
  gw.putPolicy(TEAM, { ...DEFAULT_POLICY, script: { enabled: true, cpuMs: 2_000, ...(servers ? { servers } : {}) } });

async function run(code: string) {
  const r = await client.callTool({ name: 'run_script', arguments: { code } }, undefined, { timeout: 60_000 });
  return { r, s: r.structuredContent as Record<string, any>, t: (r.content as { text: string }[])[0]?.text ?? '' };
}

/** A script that reports what a server call answered or threw. */
const attempt = (expr: string) => `try { return { ok: true, value: await ${expr} }; } catch (e) { return { ok: false, code: e.code, message: e.message }; }`;

async function adminFetch(path: string, init: RequestInit = {}) {
  return fetch(`${gw.url}/admin/v1${path}`, { ...init, headers: { Authorization: `Bearer ${admin}`, 'Content-Type': 'application/json' } });
}

async function register(id: string, body: unknown) {
  return adminFetch(`/servers/${id}`, { method: 'PUT', body: JSON.stringify(body) });
}

async function auditText(): Promise<{ rows: Array<Record<string, any>>; text: string }> {
  const res = await adminFetch('/audit?limit=200');
  expect(res.status).toBe(200);
  const text = await res.text();
  return { rows: (JSON.parse(text) as { entries: Array<Record<string, any>> }).entries, text };
}

beforeAll(async () => {
  remote = await startRemoteMcpServer({ header: 'X-Api-Key', secret: SECRET });
  gw = await startGateway({ vars: { GATEHOUSE_SECRETS_KEY: randomBytes(32).toString('base64') } });
  admin = await gw.token({ team: TEAM, scopes: ['admin'] });
  client = await gw.mcp(TEAM, ['execute']);
  await policy();
}, 400_000);

afterAll(async () => {
  await client?.close();
  await gw?.stop();
  await remote?.close();
});

describe('servers in a script', () => {
  it('a team with no servers gives the script an empty catalog: any id is not in it', async () => {
    await policy({ default: 'allow' });
    const out = await run(attempt(`servers.docs.call('echo', { text: 'hi' })`));
    expect(out.s.result).toMatchObject({ ok: false, code: 'not_found' });
    expect(out.s.result.message).toMatch(/^servers\.docs: not in the catalog — the catalog is empty/);
    // Uncaught, it fails the script with the runner's prefix.
    const uncaught = await run(`return await servers.nope.listTools()`);
    expect(uncaught.t).toMatch(/Sandbox error: servers\.nope: not in the catalog/);
  });

  it('an admin registers a remote server; its header values are never shown back', async () => {
    const bad = await register('docs', { url: 'ftp://example.com', headers: { 'Content-Type': 'x' } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error.message).toMatch(/url must be http: or https:/);
    const creds = await register('docs', { url: 'http://user:pw@127.0.0.1/mcp' });
    expect(((await creds.json()) as any).error.message).toMatch(/must not carry credentials/);
    const ok = await register('docs', { url: remote.url, headers: { 'X-Api-Key': SECRET }, description: 'test docs' });
    expect(ok.status).toBe(201);
    expect(await ok.text()).not.toContain(SECRET);
    const list = await adminFetch('/servers');
    const text = await list.text();
    expect(text).not.toContain(SECRET);
    expect(JSON.parse(text).servers).toEqual([expect.objectContaining({ id: 'docs', url: remote.url, headerNames: ['X-Api-Key'] })]);
  });

  it('without a script.servers section every call is denied by policy', async () => {
    await policy();
    const out = await run(attempt(`servers.docs.call('echo', { text: 'hi' })`));
    expect(out.s.result).toMatchObject({ ok: false, code: 'policy_denied' });
    expect(out.s.result.message).toMatch(/^servers\.docs\.call: denied by policy: the team policy has no script\.servers section/);
  });

  it('calls an allowed tool and lists tools, the secret header reaching only the server', async () => {
    await policy({ rules: [{ server: 'docs', tools: ['add'], decision: 'deny', reason: 'no arithmetic' }], default: 'allow' });
    const before = remote.requests.length;
    const out = await run(`
      const r = await servers.docs.call('echo', { text: 'from a script' });
      const tools = await servers['docs'].listTools();
      return { text: r.content[0].text, tools: tools.tools.map((t) => t.name), seen: typeof globalThis.servers };`);
    expect(out.s.status).toBe('success');
    // `add` is denied by the policy, so the listing leaves it out.
    expect(out.s.result).toEqual({ text: 'echo: from a script', tools: ['echo'], seen: 'object' });
    const mine = remote.requests.slice(before);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((q) => q.authorized)).toBe(true);
  });

  it('a denied tool and an ask rule are refused with the policy reason', async () => {
    await policy({
      rules: [
        { server: 'docs', tools: ['add'], decision: 'deny', reason: 'no arithmetic' },
        { server: '*', tools: ['echo'], decision: 'ask', reason: 'echo needs a person' },
      ],
    });
    const denied = await run(attempt(`servers.docs.call('add', { a: 1, b: 2 })`));
    expect(denied.s.result).toEqual({ ok: false, code: 'policy_denied', message: 'servers.docs.call: denied by policy: no arithmetic' });
    const asked = await run(attempt(`servers.docs.call('echo', { text: 'x' })`));
    expect(asked.s.result).toMatchObject({ ok: false, code: 'approval_required' });
    expect(asked.s.result.message).toMatch(/^servers\.docs\.call: approval required by policy: echo needs a person/);
  });

  it('every call is an audit row with server, tool, argument digest, duration and outcome — and no secret', async () => {
    await policy({ default: 'allow' });
    const out = await run(`return (await servers.docs.call('echo', { text: 'arg-never-stored' })).content[0].text`);
    expect(out.s.result).toBe('echo: arg-never-stored');
    const { rows, text } = await auditText();
    expect(text).not.toContain(SECRET);
    const call = rows.find((r) => r.parent_job_id === out.s.scriptId || r.parentJobId === out.s.scriptId);
    expect(call).toBeDefined();
    const cmd = typeof call!.command === 'string' ? JSON.parse(call!.command) : call!.command;
    expect(cmd).toMatchObject({ mode: 'server_call', server: 'docs', tool: 'echo', argsSha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(text).not.toContain('arg-never-stored');
    expect(call!.decision).toBe('allowed');
    expect(call!.exit_status ?? call!.exitStatus).toBe('success');
    expect(typeof (call!.duration_ms ?? call!.durationMs)).toBe('number');
    const denials = rows.filter((r) => /servers\.docs\.call: denied by policy/.test(r.reason ?? ''));
    expect(denials.length).toBeGreaterThan(0);
  });

  it('a server that refuses the registered header fails the call without revealing it', async () => {
    await register('wrong', { url: remote.url, headers: { 'X-Api-Key': `${SECRET}-old` } });
    const out = await run(attempt(`servers.wrong.call('echo', { text: 'x' })`));
    expect(out.s.result).toMatchObject({ ok: false, code: 'upstream_error' });
    expect(out.s.result.message).toMatch(/^servers\.wrong\.call: could not connect/);
    expect(out.t).not.toContain(SECRET);
    const rm = await adminFetch('/servers/wrong', { method: 'DELETE' });
    expect(rm.status).toBe(200);
    const gone = await run(attempt(`servers.wrong.listTools()`));
    expect(gone.s.result.message).toMatch(/^servers\.wrong: not in the catalog — it has docs/);
  });

  it('the CLI block of docs/script-mode.md registers, lists and removes a server', async () => {
    const lines = readmeBlock('servers-cli');
    const outputs: string[] = [];
    for (const line of lines) {
      const exported = /^export (\w+)=(.*)$/.exec(line);
      if (exported) {
        // The documented key stands for the test server's real one.
        process.env[exported[1]!] = SECRET;
        continue;
      }
      const args = line
        .replace(/^gatehouse /, '')
        .replace('https://mcp.example.com/mcp', remote.url)
        .match(/"[^"]*"|\S+/g)!
        .map((a) => a.replace(/^"|"$/g, ''));
      const r = await runCli(gw.url, admin, args);
      expect(r.code, `${line}: ${r.stderr}`).toBe(0);
      outputs.push(r.stdout);
      if (args[0] === 'servers' && args[1] === 'add') {
        const out = await run(`return (await servers.docs.call('echo', { text: 'via cli' })).content[0].text`);
        expect(out.s.result).toBe('echo: via cli');
      }
    }
    expect(outputs.join('')).not.toContain(SECRET);
    expect(outputs[1]).toMatch(/docs\s+http:\/\/127\.0\.0\.1:\d+\/mcp\s+X-Api-Key/);
    expect(outputs[2]).toBe('removed docs\n');
  });
});
