/**
 * Script mode keeps one request under Cloudflare's per-request limits: subrequests (50 on Workers
 * Free, 10,000 on Workers Paid) and Dynamic Workers in flight (4 per Worker request).
 */
import { describe, expect, it } from 'vitest';
import {
  REFUSAL_AUDIT_SUBREQUESTS,
  REQUEST_SUBREQUESTS,
  RequestLedger,
  SCRIPT_END_SUBREQUESTS,
  SCRIPT_START_SUBREQUESTS,
  SUBPROCESS_BASE_SUBREQUESTS,
  effectiveSubprocessCap,
} from '../../src/script/request-budget.ts';
import { QUERY_OUTPUT_SUBREQUESTS } from '../../src/governed/query-output.ts';
import { DYNAMIC_WORKERS_PER_WORKER_REQUEST, SUBREQUESTS_PER_REQUEST } from '../../src/platform/limits.ts';
import { workersPlan } from '../../src/platform/plan.ts';

const FIXED = REQUEST_SUBREQUESTS + SCRIPT_START_SUBREQUESTS + SCRIPT_END_SUBREQUESTS + REFUSAL_AUDIT_SUBREQUESTS;

describe('Workers plan setting', () => {
  it("names Cloudflare's numbers: 50 subrequests per request on Free, 10,000 on Paid; 4 Dynamic Workers per Worker request", () => {
    expect(SUBREQUESTS_PER_REQUEST).toEqual({ free: 50, paid: 10_000 });
    expect(DYNAMIC_WORKERS_PER_WORKER_REQUEST).toBe(4);
  });

  it('defaults to paid (the Worker Loader needs Workers Paid), accepts free, refuses anything else with the allowed values', () => {
    expect(workersPlan({})).toEqual({ ok: true, plan: 'paid' });
    expect(workersPlan({ GATEHOUSE_WORKERS_PLAN: ' Free ' })).toEqual({ ok: true, plan: 'free' });
    const bad = workersPlan({ GATEHOUSE_WORKERS_PLAN: 'enterprise' });
    expect(bad.ok).toBe(false);
    if (!bad.ok)
      expect(bad.message).toBe(
        'Error: GATEHOUSE_WORKERS_PLAN is "enterprise"; allowed: "paid" (Workers Paid, 10000 subrequests per request) or "free" (Workers Free, 50); set it in wrangler.toml [vars]',
      );
  });
});

describe('subprocess cap', () => {
  it('is min(policy cap, floor((limit - fixed) / per-subprocess cost))', () => {
    expect(FIXED).toBe(16);
    expect(SUBPROCESS_BASE_SUBREQUESTS).toBe(3);
    expect(effectiveSubprocessCap('free', 1000, 0)).toBe(Math.floor((50 - 16) / 3)); // 11
    expect(effectiveSubprocessCap('free', 3, 0)).toBe(3);
    // Each remote OPA evaluator is one more fetch per subprocess.
    expect(effectiveSubprocessCap('free', 1000, 2)).toBe(Math.floor(34 / 5));
    // On Paid the policy's largest cap (1000) is honoured even with a few OPA evaluators.
    expect(effectiveSubprocessCap('paid', 1000, 5)).toBe(1000);
  });

  it('a script never spends past the limit, however many subprocesses it asks for or how often it is refused', () => {
    const ledger = new RequestLedger('free');
    const opened = ledger.openScript(1000, 0);
    if (!opened.ok) throw new Error(opened.message);
    const slot = opened.slot;
    let started = 0;
    let refusal: string | null = null;
    for (let i = 0; i < 100 && !refusal; i++) {
      refusal = slot.beforeSubprocess(started);
      if (!refusal) started += 1;
    }
    expect(started).toBe(11);
    expect(refusal).toBe(
      'subprocess: limit reached — Cloudflare allows 50 subrequests per request on the Workers Free plan (GATEHOUSE_WORKERS_PLAN = "free"); ' +
        "each subprocess costs up to 3 (D1, Durable Object) and this script's output and audit need their share, so it may start at most 11 subprocesses in one request (script.subprocess.maxCount allows more); it has started 11",
    );
    // The first refusal is audited from the reserve; later ones only while there is room.
    let audited = 0;
    for (let i = 0; i < 100; i++) if (slot.takeRefusalAudit()) audited += 1;
    expect(audited).toBeGreaterThanOrEqual(1);
    slot.close();
    expect(ledger.used).toBeLessThanOrEqual(50);
    expect(ledger.reserved).toBe(0);
  });

  it('queryOutput is refused, not run, once the request has no room for it', () => {
    const ledger = new RequestLedger('free');
    const opened = ledger.openScript(1000, 0);
    if (!opened.ok) throw new Error(opened.message);
    let n = 0;
    while (!opened.slot.beforeQueryOutput()) n += 1;
    expect(n).toBe(Math.floor((50 - FIXED) / QUERY_OUTPUT_SUBREQUESTS));
    expect(opened.slot.beforeQueryOutput()).toMatch(/^queryOutput: limit reached — Cloudflare allows 50 subrequests per request on the Workers Free plan/);
  });
});

describe('one request, several scripts (a JSON-RPC batch)', () => {
  it('a fifth script in flight in one request is refused, and a slot frees when a script ends', () => {
    const ledger = new RequestLedger('paid');
    const slots = [];
    for (let i = 0; i < 4; i++) {
      const o = ledger.openScript(10, 0);
      if (!o.ok) throw new Error(o.message);
      slots.push(o.slot);
    }
    const fifth = ledger.openScript(10, 0);
    expect(fifth.ok).toBe(false);
    if (!fifth.ok)
      expect(fifth.message).toContain('Cloudflare allows 4 Dynamic Workers in flight per Worker request and this request already runs 4 run_script calls');
    slots[0].close();
    expect(ledger.openScript(10, 0).ok).toBe(true);
  });

  it('scripts in one request share its subrequests: a script opened after another spent them cannot start', () => {
    const ledger = new RequestLedger('free');
    const a = ledger.openScript(1000, 0);
    if (!a.ok) throw new Error(a.message);
    let ran = 0;
    while (!a.slot.beforeSubprocess(ran)) ran += 1;
    expect(ran).toBe(11);
    const b = ledger.openScript(1000, 0);
    expect(b.ok).toBe(false);
    if (!b.ok)
      expect(b.message).toMatch(
        /^Error: subrequest limit: Cloudflare allows 50 subrequests per request on the Workers Free plan \(GATEHOUSE_WORKERS_PLAN = "free"\); this request has \d+ left/,
      );
    a.slot.close();
    expect(ledger.used).toBeLessThanOrEqual(50);
  });
});
