/**
 * The Workers plan is read once from the vars, and a value that is no plan is one configuration
 * error naming the variable (the same answer for run_script, a batch's budget and a job submit).
 */
import { describe, expect, it } from 'vitest';
import { D1_QUERIES_PER_INVOCATION, SUBREQUESTS_PER_REQUEST } from '../../src/platform/limits.ts';
import { WORKERS_PLAN_VAR, workersPlan } from '../../src/platform/plan.ts';

describe('workers plan', () => {
  it('refuses a value that is neither free nor paid as a config_error that names the var and the allowed values', () => {
    const r = workersPlan({ GATEHOUSE_WORKERS_PLAN: 'enterprise' });
    expect(r).toEqual({
      ok: false,
      code: 'config_error',
      message: `Error: ${WORKERS_PLAN_VAR} is "enterprise"; allowed: "paid" (Workers Paid, 10000 subrequests per request) or "free" (Workers Free, 50); set it in wrangler.toml [vars]`,
    });
  });

  it('parses a set of vars once: the same answer object every time', () => {
    const env = { GATEHOUSE_WORKERS_PLAN: 'free' };
    const first = workersPlan(env);
    expect(first).toEqual({ ok: true, plan: 'free' });
    expect(workersPlan(env)).toBe(first);
  });

  it('keeps the limits the dispatch budgets with per plan', () => {
    expect(SUBREQUESTS_PER_REQUEST).toEqual({ free: 50, paid: 10_000 });
    expect(D1_QUERIES_PER_INVOCATION).toEqual({ free: 50, paid: 1000 });
  });
});
