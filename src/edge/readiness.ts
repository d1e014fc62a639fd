/**
 * `GET /readyz`: can this deployment serve calls? One D1 query, one R2 head and one Durable Object
 * round trip, each timed, in parallel: 200 `{ok: true, checks: {d1, r2, do}}` with `{ok, ms}` each,
 * or 503 naming the check that failed by an error code only (`timeout`, `upstream_error`); what
 * went wrong is logged, not answered. A misconfigured gateway (what the config guard refuses
 * every other route for) is not ready: 503 with the config error.
 *
 * No authentication (load balancers and uptime checks have no token), so the answer is kept per
 * isolate for READY_CACHE_MS, and while one check runs other probes get the last answer: however
 * often it is asked, an isolate runs one check at a time and at most one per period. (The answer
 * is kept, not the check's promise: workerd does not let one request wait on another's I/O.)
 * `/healthz` stays the cheap liveness answer that touches nothing.
 *
 * ```ts
 * app.get('/readyz', readiness());   // before the config guard: it answers a broken config itself
 * ```
 */
import type { Context, Handler } from 'hono';
import type { AppEnv, Env } from '../env.ts';
import { configGuard } from '../auth/index.ts';
import { pingDispatcher } from '../dispatch/client.ts';

/** How long one isolate reuses its last answer. */
const READY_CACHE_MS = 5000;
/** A check slower than this has failed (`timeout`): a probe must answer in bounded time. */
const CHECK_TIMEOUT_MS = 3000;
/** The R2 key the probe heads: never written, so the answer is "no such object" after one class B operation. */
const R2_PROBE_KEY = 'readiness-probe';

type CheckName = 'd1' | 'r2' | 'do';
type Check = { ok: true; ms: number } | { ok: false; ms: number; error: 'timeout' | 'upstream_error' };
type Readiness = { ok: boolean; checks: Record<CheckName, Check> };

const PROBES: Record<CheckName, (env: Env) => Promise<unknown>> = {
  // A table every migrated database has: an unmigrated one is not ready either.
  d1: (env) => env.DB.prepare('SELECT 1 FROM teams LIMIT 1').first(),
  r2: (env) => env.ARTIFACTS.head(R2_PROBE_KEY),
  do: (env) => pingDispatcher(env),
};

let last: { at: number; answer: Readiness } | null = null;
let checking = false;

export function readiness(): Handler<AppEnv> {
  return async (c) => {
    const refused = await configRefusal(c);
    if (refused) return c.json({ ok: false, error: refused }, 503, { 'Cache-Control': 'no-store' });
    let r = last && (checking || Date.now() - last.at < READY_CACHE_MS) ? last.answer : null;
    if (!r) {
      checking = true;
      try {
        r = await checkAll(c.env);
        last = { at: Date.now(), answer: r };
      } finally {
        checking = false;
      }
    }
    return c.json(r, r.ok ? 200 : 503, { 'Cache-Control': 'no-store' });
  };
}

/** The config guard's refusal (its code and message), or null when it would let a request through. */
async function configRefusal(c: Context<AppEnv>): Promise<{ code: string; message: string } | null> {
  let passed = false;
  const res = await configGuard()(c, async () => {
    passed = true;
  });
  if (passed || !res) return null;
  const body = (await res.json()) as { error: { code: string; message: string } };
  return body.error;
}

async function checkAll(env: Env): Promise<Readiness> {
  const names = Object.keys(PROBES) as CheckName[];
  const results = await Promise.all(names.map((n) => timed(n, () => PROBES[n](env))));
  const checks = Object.fromEntries(names.map((n, i) => [n, results[i]])) as Record<CheckName, Check>;
  return { ok: results.every((r) => r.ok), checks };
}

async function timed(name: CheckName, probe: () => Promise<unknown>): Promise<Check> {
  const t0 = Date.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<'timeout'>((res) => {
    timer = setTimeout(() => res('timeout'), CHECK_TIMEOUT_MS);
  });
  try {
    const r = await Promise.race([probe().then(() => 'ok' as const), timeout]);
    const ms = Date.now() - t0;
    if (r === 'ok') return { ok: true, ms };
    console.error(`readyz: ${name} did not answer within ${CHECK_TIMEOUT_MS} ms`);
    return { ok: false, ms, error: 'timeout' };
  } catch (e) {
    console.error(`readyz: ${name} failed: ${(e as Error).message}`);
    return { ok: false, ms: Date.now() - t0, error: 'upstream_error' };
  } finally {
    clearTimeout(timer);
  }
}
