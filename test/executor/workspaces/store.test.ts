/**
 * The workspace store's size accounting (executor/workspaces/store.ts): a job's start takes the size its workspace had
 * at the last job's end instead of walking the tree again, each job's end walks it, and a workspace made anew (created,
 * or deleted and made again) is walked when it is made. The quota this feeds is tested end to end in
 * test/e2e/workspaces.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkspaceStore } from '../../../executor/workspaces/store.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function store(): WorkspaceStore {
  const d = mkdtempSync(join(tmpdir(), 'gh-ws-store-'));
  dirs.push(d);
  return new WorkspaceStore(d);
}

const ws = { id: 'build', quotaBytes: 1 << 20, idleMs: 60_000 };

async function startJob(s: WorkspaceStore) {
  const p = await s.prepare(ws);
  if (!p.ok) throw new Error(p.error.message);
  return p.value;
}

describe('workspace sizes', () => {
  it("a job's start takes what the last job's end measured; the next end measures again", async () => {
    const s = store();
    const first = await startJob(s);
    expect(first.bytes).toBe(0);
    writeFileSync(join(first.hostDir, 'a'), 'x'.repeat(1000)); // the job writes
    expect(await s.bytes(ws.id)).toBe(1000); // its end
    first.release(true);

    // Beside the jobs (the host's admin): not walked at the next start, seen at its end.
    writeFileSync(join(first.hostDir, 'b'), 'y'.repeat(500));
    const second = await startJob(s);
    expect(second.bytes).toBe(1000);
    expect(await s.bytes(ws.id)).toBe(1500);
    second.release(true);
    expect((await startJob(s)).bytes).toBe(1500);
  });

  it('a walk of many files gives the event loop its turns (a large checkout never stalls the agent)', async () => {
    const s = store();
    const job = await startJob(s);
    for (let i = 0; i < 5000; i++) writeFileSync(join(job.hostDir, `f${i}`), 'x');
    let turns = 0;
    let walking = true;
    const spin = () => {
      turns++;
      if (walking) setImmediate(spin);
    };
    setImmediate(spin);
    const bytes = await s.bytes(ws.id);
    walking = false;
    expect(bytes).toBe(5000);
    expect(turns).toBeGreaterThanOrEqual(4);
  });

  it('a workspace deleted and made again is measured anew', async () => {
    const s = store();
    const first = await startJob(s);
    writeFileSync(join(first.hostDir, 'a'), 'x'.repeat(1000));
    expect(await s.bytes(ws.id)).toBe(1000);
    first.release(true);
    expect(s.delete(ws.id)).toEqual({ ok: true });
    expect((await startJob(s)).bytes).toBe(0);
  });
});
