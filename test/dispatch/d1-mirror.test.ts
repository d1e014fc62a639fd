/**
 * The D1 mirror of the team's jobs (src/dispatch/d1-mirror.ts): rows not copied yet go to D1 with
 * their audit rows, a pass that stops at its query budget asks for an alarm right away, and a
 * job copied once is not copied again until it changes.
 */
import { describe, expect, it } from 'vitest';
import type { JobSpec } from '../../src/contracts/agent-protocol.ts';
import { COPY_AGAIN_AFTER_MS, D1Mirror } from '../../src/dispatch/d1-mirror.ts';
import { copyQueryBudget } from '../../src/dispatch/d1-copy.ts';
import { JobStore } from '../../src/dispatch/job-store.ts';
import { dispatchHost } from './sql-host.ts';

function setup() {
  const statements: string[] = [];
  const stmt = (sql: string) => ({ sql, bind: () => stmt(sql) });
  const DB = { prepare: stmt, batch: async (s: { sql: string }[]) => (statements.push(...s.map((x) => x.sql)), s.map(() => ({ meta: {} }))) };
  const host = dispatchHost({ env: { DB: DB as never } });
  const store = new JobStore(host);
  const mirror = new D1Mirror(host, store, 'free');
  const add = (id: string) =>
    store.create({
      spec: {
        jobId: id,
        artifactHandle: `art_${id}`,
        mode: 'argv',
        command: 'true',
        args: [],
        cwd: '',
        env: {},
        timeoutMs: 1000,
        limits: { inlineBytes: 1000, artifactBytes: 1000 },
      } as JobSpec,
      tool: 'execute',
      subject: 'alice',
      tokenId: 't',
      cancelKey: `k-${id}`,
      background: false,
      maxConcurrent: 4,
      deadline: 1e9,
      now: 1,
      audit: { team: 'acme', subject: 'alice', tool: 'execute', decision: 'allowed' },
    });
  return { host, store, mirror, statements, add };
}

describe('D1 mirror', () => {
  it("copies a new job's index row and audit row once, and asks for no wake-up after", async () => {
    const t = setup();
    t.add('j');
    expect(t.mirror.nextWake(0)).toBe(t.host.heartbeatMs);
    await t.mirror.sync();
    expect(t.statements.length).toBe(4);
    await t.mirror.sync();
    expect(t.statements.length).toBe(4);
    expect(t.mirror.nextWake(0)).toBeNull();
  });

  it("stops at its share of the invocation's D1 queries and asks for an alarm right away for the rest", async () => {
    const t = setup();
    const budget = copyQueryBudget('free');
    for (let i = 0; i < budget; i++) t.add(`j${i}`);
    await t.mirror.sync();
    expect(t.statements.length).toBeLessThanOrEqual(budget);
    expect(t.host.wakeCalls).toBe(1);
    expect(t.mirror.nextWake(0)).toBe(COPY_AGAIN_AFTER_MS);
    while (t.store.unsynced(1).length) await t.mirror.sync();
    expect(t.mirror.nextWake(0)).toBeNull();
  });
});
