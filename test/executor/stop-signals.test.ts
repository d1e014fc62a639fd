/**
 * `gatehouse agent` stops on SIGINT sent to its own pid (`kill -INT`), as on SIGTERM: through bin/gatehouse.mjs run by
 * the machine's Node 20, which starts the agent again on the package's Node 22 — the wrapper passes the signal on, and
 * after the stop neither the wrapper nor anything it started is left.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';
import { alive, descendants } from '../support/process-tree.ts';
import { until } from '../support/until.ts';

const SYSTEM_NODE = '/usr/bin/node';
const dirs: string[] = [];
const procs: ChildProcess[] = [];

afterAll(() => {
  for (const p of procs) if (p.pid && alive(p.pid)) process.kill(-p.pid, 'SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Starts `gatehouse agent` (gateway unreachable: it keeps retrying, which is running) and waits for its start-up lines. */
async function startAgent(node: string): Promise<{ p: ChildProcess; out: () => string }> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-agent-sigint-'));
  dirs.push(dir);
  const p = spawn(
    node,
    [join(ROOT, 'bin/gatehouse.mjs'), 'agent', '--url', 'http://127.0.0.1:9', '--root', join(dir, 'ws'), '--state-dir', join(dir, 'state'), '--sandbox', 'none', '--allow-no-isolation'],
    { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GATEHOUSE_AGENT_TOKEN: 'not.a.token', GATEHOUSE_REEXEC: '' } },
  );
  procs.push(p);
  let out = '';
  p.stdout!.on('data', (d) => (out += d));
  p.stderr!.on('data', (d) => (out += d));
  await until(async () => /info runtimes: /.test(out) || p.exitCode !== null, 120_000, "the agent's start-up");
  expect(p.exitCode, out).toBeNull();
  return { p, out: () => out };
}

describe.skipIf(!existsSync(SYSTEM_NODE))('gatehouse agent and SIGINT', () => {
  for (const [name, node] of [
    ['through the Node 20 wrapper (re-exec on Node 22)', SYSTEM_NODE],
    ['on Node 22 directly', process.execPath],
  ] as const) {
    it(`stops cleanly on kill -INT of its pid, ${name}, leaving no process behind`, async () => {
      const { p, out } = await startAgent(node);
      const tree = descendants(p.pid!);
      if (node === SYSTEM_NODE) expect(tree.length, 'the wrapper runs the agent as its child').toBeGreaterThan(0);
      const exited = new Promise<[number | null, NodeJS.Signals | null]>((res) => p.once('exit', (c, s) => res([c, s])));
      process.kill(p.pid!, 'SIGINT');
      const [code, signal] = await exited;
      expect(out()).toMatch(/SIGINT: stopping/);
      expect(out()).toMatch(/info stopped/);
      expect([code, signal]).toEqual([0, null]);
      await until(async () => tree.every((pid) => !alive(pid)), 20_000, 'the agent processes to end');
      expect(tree.filter(alive)).toEqual([]);
    }, 180_000);
  }
});
