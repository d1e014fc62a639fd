/**
 * Warm sandboxes of per-task workspaces under gVisor reuse (docs/workspaces.md, "Isolation and the
 * sandbox"): the pool keeps at most MAX_PARKED_WORKSPACE idle ones and stops the least recently used
 * to park another, and the agent's idle time-to-live sweep deletes a workspace and stops its warm
 * sandbox. Real runsc: the sandboxes still running are read from `runsc list` and their bundles.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { GvisorDriver } from '../../../executor/sandbox/gvisor.ts';
import { MAX_PARKED_WORKSPACE } from '../../../executor/sandbox/gvisor-reuse/pool.ts';
import { WorkspaceSweeper } from '../../../executor/workspaces/sweep.ts';
import { silentLogger } from '../../../executor/log.ts';
import { requireTool, suiteRig } from '../helpers.ts';

const d = requireTool('gvisor') ? describe : describe.skip;
const REUSE = { jobs: 100, seconds: 600 };
const IDLE_MS = 3_600_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

d('warm sandboxes of workspaces', () => {
  let now = 1_000_000;
  const rig = suiteRig('gvisor', { warm: 0, capacity: 2, workspaces: { now: () => now } });

  /** The workspace directory each running sandbox has mounted at /workspace (null: the shared root). */
  function mounted(): (string | null)[] {
    const root = (rig.driver as GvisorDriver).runscRoot;
    const list = JSON.parse(execFileSync('runsc', ['--root', root, 'list', '--format', 'json'], { encoding: 'utf8' }) || '[]') as
      | { id: string; status: string; bundle: string }[]
      | null;
    return (list ?? [])
      .filter((c) => c.status === 'running' && existsSync(join(c.bundle, 'config.json')))
      .map((c) => {
        const spec = JSON.parse(readFileSync(join(c.bundle, 'config.json'), 'utf8')) as { mounts: { destination: string; source: string }[] };
        const src = spec.mounts.find((m) => m.destination === '/workspace')?.source ?? null;
        return src?.startsWith(rig.workspaces!.dir) ? src.slice(rig.workspaces!.dir.length + 1) : null;
      });
  }

  /** Waits for the sandboxes a discard is stopping to be gone (a stop takes a moment; no timing is asserted). */
  async function settledMounts(want: (m: (string | null)[]) => boolean): Promise<(string | null)[]> {
    for (let i = 0; i < 100 && !want(mounted()); i++) await sleep(200);
    return mounted();
  }

  /** The boot id of the sandbox that ran a job in `ws`: the same id means the same sandbox. */
  async function sandboxOf(ws: string): Promise<string> {
    const { exit } = await rig.run({
      command: 'cat',
      args: ['/proc/sys/kernel/random/boot_id'],
      reuse: REUSE,
      workspace: { id: ws, quotaBytes: 1 << 20, idleMs: IDLE_MS },
    });
    expect(exit, exit.stderr).toMatchObject({ state: 'exited', exitCode: 0 });
    return exit.stdout;
  }

  it(`keeps at most ${MAX_PARKED_WORKSPACE} idle workspace sandboxes: the next one parked stops the least recently used`, async () => {
    const ids = Array.from({ length: MAX_PARKED_WORKSPACE + 1 }, (_, i) => `ws-${i + 1}`);
    const first = new Map<string, string>();
    for (const ws of ids) first.set(ws, await sandboxOf(ws));
    // The 9th parked stopped the 1st (used longest ago); the other eight stay warm.
    const warm = await settledMounts((m) => m.length === MAX_PARKED_WORKSPACE && !m.includes('ws-1'));
    expect(warm.sort()).toEqual(ids.slice(1).sort());
    // ws-9 is served by its warm sandbox (and becomes the most recently used)…
    expect(await sandboxOf('ws-9')).toBe(first.get('ws-9'));
    // …ws-1 starts a new one, whose parking stops the least recently used now: ws-2.
    expect(await sandboxOf('ws-1')).not.toBe(first.get('ws-1'));
    const after = await settledMounts((m) => !m.includes('ws-2') && m.includes('ws-1'));
    expect(after).not.toContain('ws-2');
    expect(after).toHaveLength(MAX_PARKED_WORKSPACE);
    expect(await sandboxOf('ws-3')).toBe(first.get('ws-3'));
    expect(await sandboxOf('ws-2')).not.toBe(first.get('ws-2'));
  }, 180_000);

  it('deletes a workspace idle past its time-to-live and stops its warm sandbox; a workspace used since stays', async () => {
    const sweeper = new WorkspaceSweeper(rig.workspaces!, (dir) => rig.driver.dropWorkspace?.(dir) ?? Promise.resolve(), silentLogger);
    await sandboxOf('old');
    now += IDLE_MS / 2;
    await sandboxOf('fresh');
    expect(await settledMounts((m) => m.includes('old') && m.includes('fresh'))).toEqual(expect.arrayContaining(['old', 'fresh']));
    // Not idle long enough yet: nothing goes.
    expect(await sweeper.sweep()).toEqual([]);
    now += IDLE_MS / 2;
    // The earlier test's workspaces were last used with `old`: they go with it.
    const gone = await sweeper.sweep();
    expect(gone).toContain('old');
    expect(gone).not.toContain('fresh');
    expect(existsSync(join(rig.workspaces!.dir, 'old'))).toBe(false);
    expect(existsSync(join(rig.workspaces!.dir, 'fresh'))).toBe(true);
    // dropWorkspace awaited the stop: no sandbox holds the deleted workspace mounted.
    expect(mounted()).not.toContain('old');
    expect(mounted()).toContain('fresh');
    now += IDLE_MS;
    expect(await sweeper.sweep()).toContain('fresh');
    expect(mounted()).not.toContain('fresh');
  }, 120_000);
});
