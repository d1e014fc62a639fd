/**
 * Jobs kept a day per table (src/dispatch/segments.ts, job-rows.ts): a job is found whatever day it
 * was written on, lists run across days newest first, and retention drops a day whole — once every
 * job of it ended more than JOB_RETENTION_MS ago, never while one of them is open — with DROP TABLE,
 * which writes no row where a DELETE writes one per row.
 */
import { describe, expect, it } from 'vitest';
import { JOB_RETENTION_MS } from '../../src/contracts/job-view.ts';
import { jobParts } from './job-parts.ts';
import { sqlHost } from './sql-host.ts';
import { exitOf, specOf } from './team-fixture.ts';

const DAY = 24 * 3600_000;
const T0 = 20_000 * DAY;
const agent = { id: 'a', subject: 'agent-a', sandbox: 'none' as const };

describe('jobs kept a day per table', () => {
  it('finds and lists jobs across days, and drops a day whole once its last job ended past retention', () => {
    const h = sqlHost();
    const { store, rows } = jobParts(h);
    const job = (id: string, at: number) =>
      store.create({
        spec: specOf(id),
        tool: 'execute',
        subject: 'alice',
        tokenId: 't',
        cancelKey: `k-${id}`,
        background: false,
        maxConcurrent: 9,
        deadline: at + 1000,
        now: at,
      });
    const end = (id: string, at: number) => {
      store.assign(id, agent, at);
      expect(store.finish(id, 'exited', at, { exit: exitOf(id, ''), fromAgent: 'a' })).toBe(true);
    };
    job('d0-a', T0 + 10);
    job('d0-b', T0 + 20);
    job('d1-a', T0 + DAY + 5);
    job('d2-a', T0 + 2 * DAY + 5);
    const tables = () =>
      (h.db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'jobs_d%' ORDER BY name`).all() as { name: string }[]).map(
        (r) => r.name,
      );
    expect(tables()).toEqual(['jobs_d20000', 'jobs_d20001', 'jobs_d20002']);
    // A new instance finds each job in its day, and lists them newest first across days.
    const again = jobParts(h).store;
    expect(again.get('d0-b')).toMatchObject({ id: 'd0-b', state: 'queued' });
    expect(again.list({ limit: 10 }).rows.map((r) => r.id)).toEqual(['d2-a', 'd1-a', 'd0-b', 'd0-a']);
    expect(again.list({ limit: 2 }).next).not.toBeNull();

    end('d0-a', T0 + 100);
    end('d1-a', T0 + DAY + 100);
    end('d2-a', T0 + 2 * DAY + 100);
    // Day 0 still has an open job: nothing is due, whatever the time.
    expect(store.oldestDayEnded()).toBeNull();
    expect(store.prune(T0 + 100 * DAY)).toBeNull();
    end('d0-b', T0 + DAY + 50);
    // Due when its last job (ended on day 1) is past retention: not a millisecond before.
    expect(store.oldestDayEnded()).toBe(T0 + DAY + 50);
    expect(store.prune(T0 + DAY + 50)).toBeNull();
    expect(store.prune(T0 + DAY + 51)).toEqual(expect.arrayContaining(['d0-a', 'd0-b']));
    expect(tables()).toEqual(['jobs_d20001', 'jobs_d20002']);
    expect(store.get('d0-a')).toBeNull();
    expect(rows.get('d1-a')).toMatchObject({ state: 'exited' });
    // The table from before days (empty here) went with the first day dropped.
    expect(h.db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'jobs'`).all()).toEqual([]);
    expect(
      jobParts(h)
        .store.list({ limit: 10 })
        .rows.map((r) => r.id),
    ).toEqual(['d2-a', 'd1-a']);
    expect(store.oldestDayEnded()! + JOB_RETENTION_MS).toBe(T0 + DAY + 100 + JOB_RETENTION_MS);
    // Every day dropped: the reads still answer (no rows).
    expect(store.prune(T0 + 30 * DAY)).toEqual(['d1-a']);
    expect(store.prune(T0 + 30 * DAY)).toEqual(['d2-a']);
    expect(store.prune(T0 + 30 * DAY)).toBeNull();
    expect(store.list({ limit: 10 }).rows).toEqual([]);
    expect(rows.countByState(0)).toEqual({});
    expect(rows.usageBetween(0, T0 * 2)).toEqual({ jobs: 0, jobMs: 0 });
  });
});
