/**
 * The quick start: `npm start` (scripts/start.ts) on a fresh state dir brings up the gateway and
 * one agent, prints the MCP URL, a dev token and a `claude mcp add` line — and the official SDK
 * client can list tools and run a job with that token. State (signing key, D1) survives a restart.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectMcp, freePort, ROOT, stopGroup } from './harness.ts';

const state = mkdtempSync(join(tmpdir(), 'gatehouse-start-'));
let proc: ChildProcess | null = null;

async function start(port: number): Promise<{ out: () => string; token: string }> {
  proc = spawn(process.execPath, [join(ROOT, 'scripts/start.ts')], {
    cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PORT: String(port), GATEHOUSE_STATE_DIR: state, GATEHOUSE_INSPECTOR_PORT: String(await freePort()) },
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const until = Date.now() + 120_000;
  while (!(/dev client token: (\S+)/.test(out) && /connected to /.test(out))) {
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
    expect(first.out()).toMatch(/sandbox: (gvisor|bwrap)/);
    const c = await connectMcp(url, first.token);
    expect((await c.listTools()).tools.map((t) => t.name)).toContain('execute');
    const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['quick start'] } });
    expect(r.structuredContent).toMatchObject({ stdout: 'quick start\n', exit_code: 0 });
    await c.close();
    await stopGroup(proc!, 8000);

    // Second start: same signing key, so the first run's token still works.
    const second = await start(port);
    const again = await connectMcp(url, first.token);
    expect((await again.listTools()).tools.length).toBe(5);
    await again.close();
    expect(second.out()).not.toContain('generated a dev signing key');
  }, 300_000);
});
