/**
 * Cloudflare's limits that Gatehouse plans around, each with the page it comes from. The plan
 * (Workers Free or Paid) is read once from the deployment's vars: src/platform/plan.ts.
 * The sizes the agent protocol derives from them are in src/contracts/limits.ts. The local
 * emulator (workerd under `wrangler dev`) does not enforce all of these, so code checks against
 * them and tests prove it stays below them.
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

// ---- Workers ----

/**
 * CPU time of one invocation: 30 s by default, and at most 5 minutes when configured
 * (https://developers.cloudflare.com/workers/platform/limits/#cpu-time).
 */
export const WORKER_CPU_DEFAULT_MS = 30_000;
export const WORKER_CPU_MAX_MS = 300_000;

/**
 * "The maximum serialized RPC limit is 32 MiB" (https://developers.cloudflare.com/workers/runtime-apis/rpc/,
 * Limitations): a value returned over Workers RPC, e.g. from a Worker Loader isolate.
 */
export const RPC_MAX_SERIALIZED_BYTES = 32 * 1024 * 1024;

/**
 * The periods the Workers Rate Limiting binding counts in: "Must be either 10 or 60" seconds
 * (https://developers.cloudflare.com/workers/runtime-apis/bindings/rate-limit/).
 */
export const RATE_LIMIT_PERIODS_S = [10, 60] as const;

// ---- Durable Objects: https://developers.cloudflare.com/durable-objects/platform/limits/ ----

/**
 * `WebSocket.serializeAttachment()` throws above this many bytes (structured-clone size)
 * (https://developers.cloudflare.com/durable-objects/api/websockets/).
 */
export const HIBERNATION_ATTACHMENT_MAX_BYTES = 16_384;

/**
 * Largest WebSocket message a Durable Object receives: 32 MiB ("WebSocket message size", received
 * messages only, on the page this section names); a larger one closes the socket with 1009.
 */
export const WEBSOCKET_MESSAGE_MAX_BYTES = 32 * 1024 * 1024;

/** Largest row, and largest string or BLOB value, in a SQLite-backed Durable Object. */
export const SQLITE_ROW_MAX_BYTES = 2 * 1000 * 1000;

/** Bound parameters one SQL statement of a SQLite-backed Durable Object may carry. */
export const SQLITE_BOUND_PARAMETERS_MAX = 100;

/** Storage of one SQLite-backed Durable Object. */
export const DO_STORAGE_MAX_BYTES = 10 * 1000 * 1000 * 1000;

// ---- requests and R2 ----

/**
 * Largest request body Cloudflare lets through to a Worker on the Free and Pro plans (Business:
 * 200 MB, Enterprise: 500 MB by default); a larger one is refused with HTTP 413 before the Worker
 * runs. The smallest plan's figure, so an upload that fits here fits everywhere.
 * Workers limits (request limits): https://developers.cloudflare.com/workers/platform/limits/
 */
export const REQUEST_BODY_MAX_BYTES = 100 * 1000 * 1000;

/**
 * R2 multipart uploads: every part but the last is the same size and at least 5 MiB (the last may
 * be smaller, not larger), a part is at most 5 GiB, an upload has at most 10,000 parts.
 * R2 limits: https://developers.cloudflare.com/r2/platform/limits/ and multipart objects:
 * https://developers.cloudflare.com/r2/objects/multipart-objects/
 */
export const R2_MULTIPART_MIN_PART_BYTES = 5 * 1024 * 1024;
export const R2_MULTIPART_MAX_PART_BYTES = 5 * 1024 * 1024 * 1024;
export const R2_MULTIPART_MAX_PARTS = 10_000;
