/**
 * Cloudflare's limits that Gatehouse plans around, each with the page it comes from. The plan
 * (Workers Free or Paid) is read once from the deployment's vars: src/platform/plan.ts.
 * Limits of the agent protocol that both sides check (hibernation attachment, WebSocket message,
 * SQLite row) are shared with the agent in src/contracts/limits.ts.
 */
/** The Workers plans Cloudflare gives these limits for. */
export type WorkersPlan = 'free' | 'paid';

/**
 * Subrequests per incoming request: 50 on Workers Free, 10,000 on Workers Paid; calls to D1, R2,
 * Durable Objects and service bindings count ("Subrequests",
 * https://developers.cloudflare.com/workers/platform/limits/).
 */
export const SUBREQUESTS_PER_REQUEST: Readonly<Record<WorkersPlan, number>> = { free: 50, paid: 10_000 };

/**
 * D1 queries one invocation (of a Worker or a Durable Object) may make: "Queries per Worker
 * invocation: 1000 (Workers Paid) / 50 (Free)" (https://developers.cloudflare.com/d1/platform/limits/).
 * Each statement of a batch is counted as one, since the page does not say a batch counts once.
 */
export const D1_QUERIES_PER_INVOCATION: Readonly<Record<WorkersPlan, number>> = { free: 50, paid: 1000 };

/**
 * Distinct Dynamic Workers with requests in flight in one Worker request's I/O context: 4
 * (https://developers.cloudflare.com/dynamic-workers/platform/limits/). run_script loads one per call.
 */
export const DYNAMIC_WORKERS_PER_WORKER_REQUEST = 4;
