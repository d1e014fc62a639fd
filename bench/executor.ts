/**
 * Executor figures, in-process (no gateway): a bare `spawn('true')` from the agent process
 * (the baseline every sandbox is compared with), and `true` run through a real sandbox
 * driver + job runner (gVisor cold = no warm pool, gVisor warm = pooled sandboxes).
 * Each returns the samples in ms; bench/run.ts prints percentiles.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxKind } from '../src/contracts/agent-protocol.ts';
import { JobRunner } from '../executor/jobs/runner.ts';
import { silentLogger } from '../executor/log.ts';
import { probeRuntimes } from '../executor/runtimes/probe.ts';
import { startDriver } from '../executor/sandbox/index.ts';
import type { SandboxReuse } from '../src/contracts/sandbox-reuse.ts';

/** ms per `spawn('true')` until exit, sequentially. */
export async function benchBareSpawn(n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await new Promise<void>((resolve, reject) => {
      const p = spawn('true', [], { stdio: 'ignore' });
      p.once('error', reject);
      p.once('exit', () => resolve());
    });
    out.push(performance.now() - t);
  }
  return out;
}

/** Jobs/s of `concurrency` loops each spawning `true` `perLoop` times (the baseline for concurrent clients). */
export async function bareSpawnThroughput(concurrency: number, perLoop: number): Promise<number> {
  const t = performance.now();
  await Promise.all(Array.from({ length: concurrency }, () => benchBareSpawn(perLoop)));
  return (concurrency * perLoop) / ((performance.now() - t) / 1000);
}

export interface DriverBenchOptions {
  /** gVisor: sandboxes kept pre-started (0 = cold: `runsc run` per job). */
  warm?: number;
  /** Pause between jobs (lets a warm pool refill, like an interactive client). */
  pauseMs?: number;
  /** The team's sandbox.reuse (gVisor runs jobs one after another in one sandbox). */
  reuse?: SandboxReuse;
  /** Clients submitting at once, each `n` jobs back to back (the runner's capacity matches). */
  clients?: number;
}

/** What the benchmark's reuse rows use: a sandbox runs up to 100 jobs within 5 minutes. */
export const BENCH_REUSE: SandboxReuse = { jobs: 100, seconds: 300 };

/** ms per job running `true` through `kind`'s driver and the job runner (accept → exit). */
export async function benchDriver(kind: SandboxKind, n: number, o: DriverBenchOptions = {}): Promise<number[]> {
  return (await benchDriverRun(kind, n, o)).samples;
}

/** Jobs/s of `clients` concurrent clients each running `perClient` `true` jobs back to back. */
export async function driverThroughput(kind: SandboxKind, clients: number, perClient: number, o: DriverBenchOptions = {}): Promise<number> {
  const r = await benchDriverRun(kind, perClient, { ...o, clients });
  return r.samples.length / (r.wallMs / 1000);
}

async function benchDriverRun(kind: SandboxKind, n: number, o: DriverBenchOptions): Promise<{ samples: number[]; wallMs: number }> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'gh-bench-ws-')));
  const stateDir = mkdtempSync(join(tmpdir(), 'gh-bench-state-'));
  const d = await startDriver(kind, { root, stateDir, warm: o.warm ?? 0 }, silentLogger);
  if (!d.ok) throw new Error(d.error.message);
  const driver = d.value;
  const clients = o.clients ?? 1;
  const runner = new JobRunner({
    driver, runtimes: await probeRuntimes(['shell']), root, spoolDir: join(stateDir, 'spool'), capacity: Math.max(4, clients),
    ceilings: { maxTimeoutMs: 60_000, maxArtifactBytes: 1 << 20 }, upload: null, log: silentLogger,
  });
  const out: number[] = [];
  let seq = 0;
  const client = async (count: number) => {
    for (let i = 0; i < count; i++) {
      if (o.pauseMs) await new Promise((r) => setTimeout(r, o.pauseMs));
      const id = seq++;
      const t = performance.now();
      const r = runner.start({
        jobId: `bench-${id}`, artifactHandle: `art_bench_${id}_000000`, mode: 'argv', command: 'true', args: [], cwd: '', env: {},
        timeoutMs: 30_000, limits: { inlineBytes: 40_000, artifactBytes: 1 << 20 }, ...(o.reuse ? { reuse: o.reuse } : {}),
      }, () => {});
      if (!r.accepted) throw new Error(r.error.message);
      const { exit } = await r.done;
      if (exit.state !== 'exited' || exit.exitCode !== 0) throw new Error(`bench job ended ${exit.state} ${exit.exitCode}`);
      out.push(performance.now() - t);
    }
  };
  const t0 = performance.now();
  try {
    // Each client's first job pays a cold sandbox when reusing: one warm-up job per client, not timed.
    if (o.reuse) {
      await Promise.all(Array.from({ length: clients }, () => client(1)));
      out.length = 0;
    }
    const start = performance.now();
    await Promise.all(Array.from({ length: clients }, () => client(n)));
    return { samples: out, wallMs: performance.now() - start };
  } finally {
    await driver.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  }
}

const invokedDirectly = process.argv[1]?.endsWith('bench/executor.ts');
if (invokedDirectly) {
  const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
  const show = (name: string, xs: number[]) => console.log(`${name.padEnd(34)} p50 ${pct(xs, 50).toFixed(1)} ms  p99 ${pct(xs, 99).toFixed(1)} ms  (n=${xs.length})`);
  const n = Number(process.argv[2] ?? 30);
  show("bare spawn('true')", await benchBareSpawn(n));
  show('driver none', await benchDriver('none', n));
  show('driver bwrap', await benchDriver('bwrap', n));
  show('driver gvisor cold (warm 0)', await benchDriver('gvisor', Math.min(n, 15)));
  show('driver gvisor warm (pool 4, 150 ms pace)', await benchDriver('gvisor', n, { warm: 4, pauseMs: 150 }));
  const b2b = Number(process.argv[3] ?? 200);
  show(`driver gvisor single-use, ${b2b} back-to-back`, await benchDriver('gvisor', b2b, { warm: 4 }));
  show(`driver gvisor reuse, ${b2b} back-to-back`, await benchDriver('gvisor', b2b, { warm: 0, reuse: BENCH_REUSE }));
  const per = Math.max(2, Math.round(b2b / 16));
  const rate = (name: string, v: number) => console.log(`${name.padEnd(34)} ${v.toFixed(1)} jobs/s`);
  rate('16 clients, gvisor single-use', await driverThroughput('gvisor', 16, per, { warm: 4 }));
  rate('16 clients, gvisor reuse', await driverThroughput('gvisor', 16, per, { warm: 0, reuse: BENCH_REUSE }));
}
