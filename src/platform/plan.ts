/**
 * The Cloudflare Workers plan the deployment runs on (`GATEHOUSE_WORKERS_PLAN`): it decides the
 * subrequest and D1 query budgets (src/platform/limits.ts). Read once per set of vars; a value
 * that is neither `free` nor `paid` is a configuration error for every call that depends on the
 * plan (run_script, a JSON-RPC batch's budget, a job submitted to the team's Durable Object),
 * never a guess.
 */
import type { Env } from '../env.ts';
import { SUBREQUESTS_PER_REQUEST, type WorkersPlan } from './limits.ts';

export type { WorkersPlan };
export const WORKERS_PLAN_NAMES: Readonly<Record<WorkersPlan, string>> = { free: 'Workers Free', paid: 'Workers Paid' };
export const WORKERS_PLAN_VAR = 'GATEHOUSE_WORKERS_PLAN';
/**
 * Unset means "paid": run_script needs the Worker Loader (Dynamic Workers), which Cloudflare
 * offers on the Workers Paid plan, so a deployment that can run scripts at all is on Paid.
 */
const DEFAULT_WORKERS_PLAN: WorkersPlan = 'paid';

export type PlanResult = { ok: true; plan: WorkersPlan } | { ok: false; code: 'config_error'; message: string };

type PlanVars = Pick<Env, 'GATEHOUSE_WORKERS_PLAN'>;
const parsed = new WeakMap<PlanVars, PlanResult>();

/** The configured plan, parsed once per `env` object. */
export function workersPlan(env: PlanVars): PlanResult {
  const r = parsed.get(env) ?? parsePlan(env.GATEHOUSE_WORKERS_PLAN);
  parsed.set(env, r);
  return r;
}

function parsePlan(value: string | undefined): PlanResult {
  const raw = (value ?? '').trim().toLowerCase();
  if (raw === '') return { ok: true, plan: DEFAULT_WORKERS_PLAN };
  if (raw === 'free' || raw === 'paid') return { ok: true, plan: raw };
  return {
    ok: false,
    code: 'config_error',
    message: `Error: ${WORKERS_PLAN_VAR} is "${value}"; allowed: "paid" (Workers Paid, ${SUBREQUESTS_PER_REQUEST.paid} subrequests per request) or "free" (Workers Free, ${SUBREQUESTS_PER_REQUEST.free}); set it in wrangler.toml [vars]`,
  };
}
