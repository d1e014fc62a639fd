import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/policy/engine.ts';

describe('policy sandbox.reuse', () => {
  it('is off unless set: every job gets a fresh sandbox', () => {
    const r = parsePolicy({ version: 1 });
    expect(r.ok && r.value.sandbox.reuse).toBeUndefined();
  });
  it('takes a job count and a lifetime', () => {
    const r = parsePolicy({ version: 1, sandbox: { minimum: 'gvisor', reuse: { jobs: 50, seconds: 300 } } });
    expect(r.ok && r.value.sandbox).toEqual({ minimum: 'gvisor', reuse: { jobs: 50, seconds: 300 } });
  });
  it('refuses values that are not a bounded reuse, naming the path and what is allowed', () => {
    for (const [reuse, path] of [
      [{ jobs: 1, seconds: 10 }, 'sandbox.reuse.jobs'],
      [{ jobs: 5000, seconds: 10 }, 'sandbox.reuse.jobs'],
      [{ jobs: 10, seconds: 0 }, 'sandbox.reuse.seconds'],
      [{ jobs: 10, seconds: 86_400 }, 'sandbox.reuse.seconds'],
      [{ jobs: 10 }, 'sandbox.reuse.seconds'],
      [true, 'sandbox.reuse'],
    ] as const) {
      const r = parsePolicy({ version: 1, sandbox: { reuse } });
      expect(r.ok, JSON.stringify(reuse)).toBe(false);
      if (!r.ok) expect(r.error.message).toContain(path);
    }
    const one = parsePolicy({ version: 1, sandbox: { reuse: { jobs: 1, seconds: 10 } } });
    if (!one.ok) expect(one.error.message).toContain('at least 2');
  });
});
