/**
 * The gateway the benchmarks run against: `wrangler dev` with the repository's configuration,
 * except that the per-token/per-team rate limits are raised far above what a benchmark sends.
 * Rate limits are a tenant policy, not capacity: with them, 2,000 jobs of one team would
 * measure the limiter (300 MCP requests per minute per token). The limiter still runs on every
 * request (its cost is in the figures); it just never says no.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, startGateway, type Gateway, type GatewayOptions } from '../test/e2e/harness.ts';

/**
 * Lives beside wrangler.toml so its relative paths (main, migrations) resolve the same; git-ignored.
 * One per process: `wrangler dev` reloads when its configuration file changes, so two benchmarks
 * sharing one file would restart each other's gateway mid-run.
 */
const BENCH_CONFIG = join(ROOT, `wrangler.bench-${process.pid}.toml`);
const BENCH_RATE_LIMIT = 1_000_000;

/** Writes this process's bench configuration (wrangler.toml with the rate limits raised) and answers its path. */
export function writeBenchConfig(): string {
  const toml = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8').replace(
    /simple = \{ limit = \d+, period = (\d+) \}/g,
    `simple = { limit = ${BENCH_RATE_LIMIT}, period = $1 }`,
  );
  writeFileSync(BENCH_CONFIG, toml);
  return BENCH_CONFIG;
}

/** Removes the file writeBenchConfig wrote. */
export function removeBenchConfig(): void {
  rmSync(BENCH_CONFIG, { force: true });
}

/**
 * `trace`: the Worker is built with the hot-path trace (src/contracts/trace.ts), which no other build
 * has; `node bench/hotpath.ts --trace` reads its lines.
 */
export async function startBenchGateway(o: GatewayOptions & { trace?: boolean } = {}): Promise<Gateway> {
  writeBenchConfig();
  const { trace, ...gateway } = o;
  const traced = trace ? ['--define', 'GATEHOUSE_TRACE:true'] : [];
  const gw = await startGateway({ ...gateway, extraArgs: ['--config', BENCH_CONFIG, ...traced, ...(o.extraArgs ?? [])] });
  const stop = gw.stop.bind(gw);
  return {
    ...gw,
    stop: async () => {
      await stop();
      removeBenchConfig();
    },
  };
}
