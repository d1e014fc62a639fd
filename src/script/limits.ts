/**
 * Limits of script mode. The script-facing ones keep the script runner's documented values; the
 * platform's (Cloudflare's RPC and CPU limits) are in src/platform/limits.ts.
 */

/** Code larger than this is refused before anything runs. */
export const CODE_MAX_BYTES = 51_200;
/** Console output kept per script; past it one `[output truncated]` line and nothing more. */
export const CONSOLE_MAX_BYTES = 10 * 1024 * 1024;
/** The script's return value, serialized as JSON. */
export const RETURN_MAX_BYTES = 10 * 1024 * 1024;
/**
 * Room for the report's other fields and the serializer's framing: the isolate's report — the console as one
 * string plus the return value's JSON — must fit in one RPC return (RPC_MAX_SERIALIZED_BYTES, src/platform/limits.ts).
 */
export const REPORT_OVERHEAD_BYTES = 64 * 1024;

/** A script's error message as the caller sees it (a script can throw a string of any size). */
export const ERROR_MAX_BYTES = 16 * 1024;

/** One `sleep(ms)` call waits at most this long (longer requests are silently capped). */
export const SLEEP_MAX_MS = 30_000;

/**
 * Loop/call budget per CPU millisecond for the isolate's execution guard. workerd enforces the
 * Worker Loader's `limits.cpuMs` on Cloudflare, but local `wrangler dev` does not, and a spinning
 * isolate there blocks the whole runtime thread; so every loop iteration and function entry of
 * the script also counts against a budget of `cpuMs × TICKS_PER_CPU_MS`.
 */
export const TICKS_PER_CPU_MS = 20_000;

/** The compatibility date the script's isolate runs with (fixed: a script must not change meaning between deploys). */
export const ISOLATE_COMPATIBILITY_DATE = '2026-11-01';

/** The binding name run_script needs, and what to tell an operator when it is missing. */
const LOADER_BINDING = 'LOADER';
export const LOADER_MISSING_MESSAGE =
  `Error: run_script needs the Worker Loader binding "${LOADER_BINDING}" ([[worker_loaders]] binding = "${LOADER_BINDING}" in wrangler.toml). ` +
  'On Cloudflare this is the Dynamic Workers feature (Worker Loader), available on the Workers Paid plan; ' +
  'add the binding and redeploy, or use execute / runtime_execute instead.';
