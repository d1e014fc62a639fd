/**
 * The DO's background copy into D1, pass by pass (src/dispatch/d1-copy.ts). The store is a list
 * and D1 a function that may refuse: what a refused row does to the rows behind it.
 */
import { describe, expect, it } from 'vitest';
import { D1_COPY_MAX_FAILURES_IN_A_ROW, copyPending, copyQueryBudget } from '../../src/dispatch/d1-copy.ts';
import { D1_QUERIES_PER_INVOCATION } from '../../src/platform/limits.ts';

function store(ids: string[], refuses: (id: string) => boolean, maxQueries = copyQueryBudget('paid')) {
  const pending = new Set(ids);
  const calls: string[] = [];
  return {
    calls,
    pending,
    pass: {
      pending: () => [...pending].slice(0, 50).map((id) => ({ id })),
      copy: async (r: { id: string }) => {
        calls.push(r.id);
        if (refuses(r.id)) throw new Error(`D1 refused ${r.id}`);
        pending.delete(r.id);
      },
      onError: () => {},
      cost: (r: { id: string }) => (r.id.startsWith('new') ? 4 : 2),
      maxQueries,
    },
  };
}

describe('the background D1 copy', () => {
  it('copies the rows behind one that D1 keeps refusing, and tries that one again on the next pass', async () => {
    const s = store(['a', 'bad', 'b', 'c'], (id) => id === 'bad');
    expect(await copyPending(s.pass)).toEqual({ copied: 3, refused: ['bad'] });
    expect([...s.pending]).toEqual(['bad']);
    expect(s.calls.filter((c) => c === 'bad')).toHaveLength(1); // once per pass, not once per round
    await copyPending(s.pass);
    expect(s.calls.filter((c) => c === 'bad')).toHaveLength(2);
  });

  it('stops a pass after a few refusals in a row (D1 down) instead of calling it for every pending row', async () => {
    const s = store(
      Array.from({ length: 40 }, (_, i) => `j${i}`),
      () => true,
    );
    const r = await copyPending(s.pass);
    expect(r.copied).toBe(0);
    expect(s.calls).toHaveLength(D1_COPY_MAX_FAILURES_IN_A_ROW);
    expect(s.pending.size).toBe(40);
  });

  it('copies more than one page of rows in one pass', async () => {
    const s = store(
      Array.from({ length: 120 }, (_, i) => `j${i}`),
      () => false,
    );
    expect((await copyPending(s.pass)).copied).toBe(120);
    expect(s.pending.size).toBe(0);
  });

  it("stops a pass before it spends its share of the invocation's D1 queries (50 on Workers Free), and the next pass goes on", async () => {
    expect(D1_QUERIES_PER_INVOCATION).toEqual({ free: 50, paid: 1000 });
    const budget = copyQueryBudget('free');
    expect(budget).toBeLessThan(D1_QUERIES_PER_INVOCATION.free);
    // New jobs: 4 statements each (create both rows, then complete them).
    const s = store(
      Array.from({ length: 30 }, (_, i) => `new${i}`),
      () => false,
      budget,
    );
    const first = await copyPending(s.pass);
    expect(first.copied).toBe(Math.floor(budget / 4));
    expect(s.calls.length * 4).toBeLessThanOrEqual(budget);
    const second = await copyPending(s.pass);
    expect(second.copied).toBe(Math.floor(budget / 4));
    expect(s.pending.size).toBe(30 - 2 * Math.floor(budget / 4));
  });
});
