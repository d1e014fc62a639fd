import { describe, expect, it } from 'vitest';
import { SubprocessBudget } from '../../src/script/subprocess-budget.ts';

const reserve = (b: SubprocessBudget, want: number) => {
  const r = b.reserve(want);
  if (!r.ok) throw new Error(r.message);
  return r.grant;
};

describe('maxTotalMs holds for subprocesses that run at once', () => {
  it('four subprocesses started together share 2000 ms: the first gets it all, the others are refused', () => {
    const b = new SubprocessBudget({ maxCount: 50, maxTotalMs: 2000 });
    const first = b.reserve(30_000);
    expect(first).toMatchObject({ ok: true, grant: { ordinal: 1, timeoutMs: 2000, limited: true } });
    for (let i = 0; i < 3; i++) {
      const r = b.reserve(30_000);
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.message).toBe(
          "subprocess: limit reached — this script's subprocesses already ran 0 ms and the 1 still running hold 2000 ms of the 2000 ms allowed " +
            '(script.subprocess.maxTotalMs), so no time is left; give subprocesses that run at once a smaller timeoutMs',
        );
      }
    }
    expect(b.started).toBe(1);
  });

  it('smaller timeouts run side by side; the last one gets what is left as its timeout', () => {
    const b = new SubprocessBudget({ maxCount: 50, maxTotalMs: 2000 });
    const grants = [reserve(b, 800), reserve(b, 800), reserve(b, 800)];
    expect(grants.map((g) => [g.timeoutMs, g.limited])).toEqual([
      [800, false],
      [800, false],
      [400, true],
    ]);
    expect(b.leftMs).toBe(0);
    expect(b.reserve(800).ok).toBe(false);
  });

  it('what a subprocess did not use comes back when it settles; what it used stays used', () => {
    const b = new SubprocessBudget({ maxCount: 50, maxTotalMs: 2000 });
    const g = reserve(b, 2000);
    expect(b.leftMs).toBe(0);
    b.settle(g, 300);
    expect(b.totalMs).toBe(300);
    expect(b.leftMs).toBe(1700);
    expect(reserve(b, 30_000).timeoutMs).toBe(1700);
  });

  it('the total counts the governed path around the process, so it may pass the cap by that much', () => {
    const b = new SubprocessBudget({ maxCount: 50, maxTotalMs: 1000 });
    b.settle(reserve(b, 30_000), 1270);
    expect(b.totalMs).toBe(1270);
    const r = b.reserve(10);
    expect(r.ok).toBe(false);
    if (!r.ok)
      expect(r.message).toBe(
        "subprocess: limit reached — this script's subprocesses already ran 1270 ms of the 1000 ms allowed (script.subprocess.maxTotalMs)",
      );
  });

  it('settling twice, or a grant it never gave, changes nothing', () => {
    const b = new SubprocessBudget({ maxCount: 50, maxTotalMs: 2000 });
    const g = reserve(b, 500);
    b.settle(g, 100);
    b.settle(g, 100);
    b.release(g);
    expect([b.totalMs, b.started, b.running, b.leftMs]).toEqual([100, 1, 0, 1900]);
  });
});

describe('maxCount holds for subprocesses that run at once', () => {
  it('counts reservations, not ended subprocesses', () => {
    const b = new SubprocessBudget({ maxCount: 2, maxTotalMs: 600_000 });
    reserve(b, 1000);
    reserve(b, 1000);
    const r = b.reserve(1000);
    expect(r).toEqual({ ok: false, message: 'subprocess: limit reached — a script may start at most 2 subprocesses (script.subprocess.maxCount)' });
  });

  it('a grant released before its subprocess started does not count', () => {
    const b = new SubprocessBudget({ maxCount: 1, maxTotalMs: 600_000 });
    b.release(reserve(b, 1000));
    expect([b.started, b.leftMs]).toEqual([0, 600_000]);
    expect(reserve(b, 1000).ordinal).toBe(1);
  });
});
