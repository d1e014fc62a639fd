/**
 * The quick start: `npm start` (scripts/start.ts), run as the README says, on a fresh state dir brings up the gateway and
 * one agent, prints the MCP URL, a dev token and a `claude mcp add` line — quietly, banner last —
 * and the official SDK client can list tools and run a job with that token. State (signing key,
 * D1) survives a restart. First contact: `/` explains itself, a near-miss MCP path gets a hint.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectMcp, freePort, ROOT, stopGroup } from './harness.ts';
import { readmeBlock } from '../cli/readme.ts';

const state = mkdtempSync(join(tmpdir(), 'gatehouse-start-'));
let proc: ChildProcess | null = null;

async function start(port: number): Promise<{ out: () => string; token: string }> {
  // `npm start` as the README says (npm runs scripts/start.ts on the pinned Node 22 of node_modules/.bin).
  const [quickStart] = readmeBlock('quick-start');
  expect(quickStart).toBe('npm install && npm start');
  proc = spawn('npm', ['start'], {
    cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PORT: String(port), GATEHOUSE_STATE_DIR: state, GATEHOUSE_INSPECTOR_PORT: String(await freePort()) },
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const until = Date.now() + 120_000;
  // The banner comes only once the agent has connected.
  while (!/dev client token: (\S+)[\s\S]*Ctrl-C stops everything\.\n─+\n/.test(out)) {
    if (proc.exitCode !== null) throw new Error(`npm start exited:\n${out}`);
    if (Date.now() > until) throw new Error(`npm start did not come up:\n${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { out: () => out, token: /dev client token: (\S+)/.exec(out)![1] };
}

afterAll(async () => {
  if (proc) await stopGroup(proc, 8000);
  rmSync(state, { recursive: true, force: true });
});

describe('npm start', () => {
  it('starts gateway + agent, prints a working MCP URL, token and claude line; state survives a restart', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/mcp`;
    const first = await start(port);
    expect(first.out()).toContain(`MCP URL:          ${url}`);
    expect(first.out()).toContain(`claude mcp add --transport http gatehouse ${url} --header "Authorization: Bearer ${first.token}"`);
    expect(first.out()).toMatch(/agent local-agent, sandbox: (gvisor|bwrap)\)/);
    expect(first.out()).toContain(`Dashboard:        http://127.0.0.1:${port}/dashboard`);
    // Quiet: a few lines of our own, then the banner, and nothing after it; no wrangler noise, no stack traces
    // (the offline lookup of workers.cloudflare.com for Request.cf is switched off).
    const text = first.out();
    expect(text.trimEnd().endsWith('─'.repeat(72))).toBe(true);
    // npm's own header (`> gatehouse@0.1.0 start`, `> node scripts/start.ts`) and warnings about this machine's npm
    // configuration are npm's, not ours.
    const before = text.slice(0, text.indexOf('─'.repeat(72))).trim().split('\n')
      .filter((l) => l.trim() && !/^> (gatehouse@\S+ start|node scripts\/start\.ts)$/.test(l) && !/^npm warn /.test(l));
    expect(before.length, text).toBeLessThanOrEqual(5);
    expect(before.every((l) => l.startsWith('[gatehouse] ')), text).toBe(true);
    expect(text).not.toMatch(/Request\.cf|ENOTFOUND|\n\s+at /);
    // The children's output went to the log files the banner names.
    expect(readFileSync(join(state, 'agent.log'), 'utf8')).toMatch(/connected to /);
    expect(readFileSync(join(state, 'gateway.log'), 'utf8')).not.toMatch(/Request\.cf|ENOTFOUND/);

    const c = await connectMcp(url, first.token);
    const toolNames = (await c.listTools()).tools.map((t) => t.name);
    expect(toolNames).toContain('execute');
    const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['quick start'] } });
    expect(r.structuredContent).toMatchObject({ stdout: 'quick start\n', exit_code: 0 });
    await c.close();
    // The agent logs one line per job: id, state, duration.
    const jobId = (r.structuredContent as { job_id: string }).job_id;
    expect(readFileSync(join(state, 'agent.log'), 'utf8')).toMatch(new RegExp(`job ${jobId} exited 0 in \\d+ ms`));

    // First contact: the home page says what this is and where /mcp and /dashboard are.
    const home = await fetch(`http://127.0.0.1:${port}/`, { headers: { Accept: 'text/html' } });
    expect(home.status).toBe(200);
    expect(home.headers.get('content-type')).toMatch(/text\/html/);
    expect(home.headers.get('content-security-policy')).toContain("default-src 'none'");
    const page = await home.text();
    expect(page).toContain('governed command execution');
    expect(page).toContain(url);
    expect(page).toContain('/dashboard');
    // …and the links on it lead somewhere.
    expect((await fetch(`http://127.0.0.1:${port}/dashboard`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource`)).status).toBe(200);
    // A near-miss MCP path gets the endpoint to use, with or without a token.
    for (const path of ['/mcp/', '/mcp/messages', '/sse']) {
      const miss = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
      expect(miss.status, path).toBe(404);
      const body = (await miss.json()) as { error: { message: string } };
      expect(body.error.message, path).toContain(`Use the MCP endpoint ${url}`);
    }
    const other = await fetch(`http://127.0.0.1:${port}/nothing-here`);
    expect(other.status).toBe(404);
    expect(((await other.json()) as { error: { message: string } }).error.message).toContain(`MCP endpoint ${url}`);
    await stopGroup(proc!, 8000);

    // Second start: same signing key, so the first run's token still works.
    const second = await start(port);
    const again = await connectMcp(url, first.token);
    expect((await again.listTools()).tools.map((t) => t.name)).toEqual(toolNames);
    await again.close();
    expect(second.out()).not.toContain('generated a dev signing key');
  }, 300_000);
});
