/**
 * A script driving a stdio MCP server of the workspace's `.mcp.json` end to end: real `wrangler dev`, a real agent
 * with gVisor (`runsc`), the MCP SDK client, and a real server from npm (`@modelcontextprotocol/server-everything`,
 * bundled into the workspace so `node` inside the sandbox sees it). The server is a governed job, stopped when the
 * script ends; a server that never answers initialize fails the call and is stopped; a malformed `.mcp.json` is an
 * error naming the file and the key. A script's servers count against the team's `interactive.maxSessions` until it
 * ends; a server writing a line over the stdio transport's 4 MiB bound (test/e2e/fixtures/long-line-server.mjs) fails
 * that call and is stopped, while the script, its other servers and the agent go on.
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { PRESETS } from '../../src/policy/presets.ts';
import { requireTool } from '../executor/helpers.ts';

const RUNSC = requireTool('gvisor');
const TEAM = 'stdio';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;
let admin: string;

/** A server that reads stdin and never answers: the initialize timeout's target. */
const SILENT_SERVER = `process.stdin.on('data', () => {}); setInterval(() => {}, 1000);`;

async function policy(servers: Record<string, unknown>, interactive: Record<string, unknown> = {}) {
  const open = PRESETS.open.policy;
  // interactive.enabled off: a script's servers do not need it (they are not a client's interactive sessions).
  await gw.putPolicy(TEAM, {
    ...open,
    interactive: { ...open.interactive, enabled: false, ...interactive },
    script: { enabled: true, cpuMs: 5_000, servers },
  });
}

/** The small server of test/e2e/fixtures/long-line-server.mjs, under each of these ids. */
function longLineServers(...ids: string[]): void {
  mcpJson(Object.fromEntries(ids.map((id) => [id, { command: 'node', args: ['long-line-server.mjs'] }])));
}

function mcpJson(servers: unknown): void {
  writeFileSync(join(root, '.mcp.json'), typeof servers === 'string' ? servers : JSON.stringify({ mcpServers: servers }));
}

async function run(code: string) {
  const r = await client.callTool({ name: 'run_script', arguments: { code } }, undefined, { timeout: 240_000 });
  return { s: r.structuredContent as Record<string, any>, t: (r.content as { text: string }[])[0]?.text ?? '' };
}
const attempt = (expr: string) => `try { return { ok: true, value: await ${expr} }; } catch (e) { return { ok: false, code: e.code, message: e.message }; }`;

/** The team's jobs still queued or running (a script's servers must not outlive it). */
async function openJobs(): Promise<Array<Record<string, any>>> {
  const res = await fetch(`${gw.url}/admin/v1/jobs?limit=200`, { headers: { Authorization: `Bearer ${admin}` } });
  expect(res.status).toBe(200);
  const jobs = ((await res.json()) as { jobs: Array<Record<string, any>> }).jobs;
  return jobs.filter((j) => j.state === 'queued' || j.state === 'running');
}

/** Waits until no job of the team is open: the kill is sent when the script ends, the agent's exit follows. */
async function noOpenJobs(): Promise<Array<Record<string, any>>> {
  let open = await openJobs();
  for (let i = 0; i < 60 && open.length > 0; i++) {
    await new Promise((r) => setTimeout(r, 500));
    open = await openJobs();
  }
  return open;
}

beforeAll(async () => {
  if (!RUNSC) return;
  root = mkdtempSync(join(tmpdir(), 'gatehouse-stdio-'));
  // One file the sandbox's node runs: the package and its dependencies, bundled.
  execFileSync(
    join(process.cwd(), 'node_modules/.bin/esbuild'),
    [
      createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js'),
      '--bundle',
      '--platform=node',
      '--format=esm',
      `--outfile=${join(root, 'everything.mjs')}`,
      '--log-level=warning',
      "--banner:js=import{createRequire}from'module';const require=createRequire(import.meta.url);",
    ],
    { stdio: 'inherit' },
  );
  writeFileSync(join(root, 'silent.mjs'), SILENT_SERVER);
  copyFileSync(join(process.cwd(), 'test/e2e/fixtures/long-line-server.mjs'), join(root, 'long-line-server.mjs'));
  gw = await startGateway();
  admin = await gw.token({ team: TEAM, scopes: ['admin'] });
  await policy({ default: 'allow', initializeTimeoutMs: 3_000 });
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: 'gvisor', capacity: 4, agentId: 'agent-stdio' });
  await agent.ready.catch(async () => {
    for (let i = 0; i < 360 && !/connected to /.test(agent.logs()); i++) await new Promise((r) => setTimeout(r, 500));
    if (!/connected to /.test(agent.logs())) throw new Error(`agent did not connect:\n${agent.logs()}`);
  });
  client = await gw.mcp(TEAM, ['execute']);
}, 900_000);

afterAll(async () => {
  await client?.close();
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe.skipIf(!RUNSC)('stdio MCP servers in a script', () => {
  it('lists tools and calls echo of server-everything, started from .mcp.json; the server job is gone after the script', async () => {
    mcpJson({ everything: { command: 'node', args: ['everything.mjs', 'stdio'] } });
    const out = await run(`
      const tools = await servers.everything.listTools();
      const r = await servers.everything.call('echo', { message: 'from a script' });
      return { names: tools.tools.map((t) => t.name), text: r.content[0].text };`);
    expect(out.s?.status, out.t).toBe('success');
    expect(out.s.result.names).toContain('echo');
    expect(out.s.result.text).toContain('from a script');
    expect(await noOpenJobs()).toEqual([]);
  }, 300_000);

  it('a server that never answers initialize fails the call after initializeTimeoutMs and is stopped', async () => {
    mcpJson({ silent: { command: 'node', args: ['silent.mjs'] } });
    const out = await run(attempt(`servers.silent.listTools()`));
    expect(out.s.result).toMatchObject({ ok: false, code: 'upstream_error' });
    expect(out.s.result.message).toMatch(/^servers\.silent\.listTools: could not connect to stdio server silent/);
    expect(out.s.result.message).toMatch(/initializeTimeoutMs = 3000\); the server was stopped/);
    expect(await noOpenJobs()).toEqual([]);
  }, 300_000);

  it('a malformed .mcp.json is an error naming the file and the key', async () => {
    mcpJson({ broken: { args: ['x'] } });
    const out = await run(attempt(`servers.broken.listTools()`));
    expect(out.s.result).toMatchObject({ ok: false, code: 'invalid_argument' });
    expect(out.s.result.message).toMatch(/^servers\.broken\.listTools: \.mcp\.json: mcpServers\.broken\.command: /);
    mcpJson('{ not json');
    const bad = await run(attempt(`servers.any.listTools()`));
    expect(bad.s.result.message).toMatch(/\.mcp\.json: not valid JSON/);
  });

  it('a script starts at most script.servers.maxServers servers', async () => {
    await policy({ default: 'allow', initializeTimeoutMs: 3_000, maxServers: 0 });
    mcpJson({ everything: { command: 'node', args: ['everything.mjs', 'stdio'] } });
    const out = await run(attempt(`servers.everything.listTools()`));
    expect(out.s.result).toMatchObject({ ok: false, code: 'limit_reached' });
    expect(out.s.result.message).toMatch(/script\.servers\.maxServers = 0/);
    await policy({ default: 'allow', initializeTimeoutMs: 3_000 });
  });
});

describe.skipIf(!RUNSC)("a script's stdio servers and the team's budgets", () => {
  it('count against interactive.maxSessions: one server over the budget is refused naming it, and the budget is free when the script answers', async () => {
    await policy({ default: 'allow', initializeTimeoutMs: 30_000 }, { maxSessions: 1 });
    longLineServers('first', 'second');
    const out = await run(`
      const first = await servers.first.call('ping', {});
      const second = await (async () => { ${attempt(`servers.second.call('ping', {})`)} })();
      return { first: first.content[0].text, second };`);
    expect(out.s?.status, out.t).toBe('success');
    expect(out.s.result.first).toBe('pong');
    expect(out.s.result.second).toMatchObject({ ok: false, code: 'session_limit' });
    expect(out.s.result.second.message).toBe(
      "servers.second.call: could not start 'node': the team has 1 interactive session open (interactive.maxSessions = 1); " +
        "end one with job_input eof or job_kill, or raise the limit; each stdio server a script runs is one of the team's interactive sessions until the script ends",
    );
    // The script's end stopped its server, and its answer waited for the server's job to end: the session is free
    // for a script started at once (no wait here), not only a moment later.
    expect(await openJobs()).toEqual([]);
    const next = await run(`return (await servers.second.call('ping', {})).content[0].text;`);
    expect(next.s?.status, next.t).toBe('success');
    expect(next.s.result).toBe('pong');
    expect(await noOpenJobs()).toEqual([]);
  }, 300_000);

  it('a line over the 4 MiB stdio bound fails that call (payload_too_large) and stops the server; the script, its other server and the agent go on', async () => {
    await policy({ default: 'allow', initializeTimeoutMs: 30_000, callTimeoutMs: 120_000 });
    longLineServers('long', 'other');
    const out = await run(`
      const before = (await servers.long.call('ping', {})).content[0].text;
      const flood = await (async () => { ${attempt(`servers.long.call('flood', { bytes: 5 * 1024 * 1024 })`)} })();
      const again = await (async () => { ${attempt(`servers.long.call('ping', {})`)} })();
      const other = (await servers.other.call('ping', {})).content[0].text;
      return { before, flood, again, other, after: 'the script goes on' };`);
    expect(out.s?.status, out.t).toBe('success');
    const why = "the server wrote a line longer than 4194304 bytes (4 MiB, the stdio transport's limit of one JSON-RPC message); it was stopped";
    expect(out.s.result).toMatchObject({
      before: 'pong',
      flood: { ok: false, code: 'payload_too_large', message: `servers.long.call: ${why}` },
      again: { ok: false, code: 'payload_too_large', message: `servers.long.call: ${why}` },
      other: 'pong',
      after: 'the script goes on',
    });
    expect(await noOpenJobs()).toEqual([]);
    // The stopped server's job carries the reason it was stopped.
    const res = await fetch(`${gw.url}/admin/v1/jobs?limit=20`, { headers: { Authorization: `Bearer ${admin}` } });
    const jobs = ((await res.json()) as { jobs: Array<Record<string, any>> }).jobs;
    expect(jobs.some((j) => j.state === 'cancelled' && j.error?.message?.includes(why))).toBe(true);
    // The agent takes the next call as usual.
    const r = await client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['the agent goes on'] } }, undefined, { timeout: 120_000 });
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    expect((r.structuredContent as { stdout: string }).stdout).toBe('the agent goes on\n');
  }, 300_000);
});

describe.skipIf(!RUNSC)('workspace scripts (.gatehouse/scripts/<name>.ts)', () => {
  const byName = async (name: string) => {
    const r = await client.callTool({ name: 'run_script', arguments: { name } }, undefined, { timeout: 240_000 });
    return { s: r.structuredContent as Record<string, any>, t: (r.content as { text: string }[])[0]?.text ?? '', isError: r.isError };
  };
  const scriptsDir = () => join(root, '.gatehouse', 'scripts');

  it('runs a workspace script when the policy allows it and the team library has no such name', async () => {
    const open = PRESETS.open.policy;
    await gw.putPolicy(TEAM, { ...open, script: { enabled: true, cpuMs: 5_000, workspaceScripts: true } });
    mkdirSync(scriptsDir(), { recursive: true });
    writeFileSync(join(scriptsDir(), 'hello.ts'), `return 'hello from the workspace';`);
    const out = await byName('hello');
    expect(out.s?.status, out.t).toBe('success');
    expect(out.s.result).toBe('hello from the workspace');
  });

  it('refuses it when script.workspaceScripts is off', async () => {
    const open = PRESETS.open.policy;
    await gw.putPolicy(TEAM, { ...open, script: { enabled: true, cpuMs: 5_000, workspaceScripts: false } });
    const out = await byName('hello');
    expect(out.isError).toBe(true);
    expect(out.t).toMatch(/no script named "hello" .*workspace scripts: off by policy/);
  });

  it('refuses a symlink, even to a file inside the workspace', async () => {
    const open = PRESETS.open.policy;
    await gw.putPolicy(TEAM, { ...open, script: { enabled: true, cpuMs: 5_000, workspaceScripts: true } });
    writeFileSync(join(root, 'elsewhere.ts'), `return 'must not run';`);
    symlinkSync('../../elsewhere.ts', join(scriptsDir(), 'linked.ts'));
    const out = await byName('linked');
    expect(out.isError).toBe(true);
    expect(out.t).toMatch(/\.gatehouse\/scripts\/linked\.ts is a symbolic link: only a regular file reached through directories \(no symlink\) is read/);
    expect(out.t).not.toContain('must not run');
  });
});
