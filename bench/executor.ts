/**
 * Executor figures, in-process (no gateway): a bare `spawn('true')` from the agent process
 * (the baseline every sandbox is compared with), and `true` run through a real sandbox
 * driver + job runner (gVisor cold = no warm pool, gVisor warm = pooled sandboxes).
 * Each returns the samples in ms; bench/run.ts prints percentiles.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxKind } from '../src/contracts/agent-protocol.ts';
import { JobRunner } from '../executor/jobs/runner.ts';
import { silentLogger } from '../executor/log.ts';
import { probeRuntimes } from '../executor/runtimes/probe.ts';
import { startDriver } from '../executor/sandbox/index.ts';

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

/** CPU (ms) per `spawn('true')` until exit, this process and the child together: the agent's CPU baseline. */
export async function bareSpawnCpu(n: number): Promise<number> {
  const before = cpuWithChildren();
  await benchBareSpawn(n);
  return (cpuWithChildren() - before) / n;
}

function cpuWithChildren(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime, stime, cutime, cstime in clock ticks of 10 ms.
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10;
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
}

/** ms per job running `true` through `kind`'s driver and the job runner (accept → exit). */
export async function benchDriver(kind: SandboxKind, n: number, o: DriverBenchOptions = {}): Promise<number[]> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'gh-bench-ws-')));
  const stateDir = mkdtempSync(join(tmpdir(), 'gh-bench-state-'));
  const d = await startDriver(kind, { root, stateDir, warm: o.warm ?? 0 }, silentLogger);
  if (!d.ok) throw new Error(d.error.message);
  const driver = d.value;
  const runner = new JobRunner({
    driver, runtimes: await probeRuntimes(['shell']), root, spoolDir: join(stateDir, 'spool'), capacity: 4,
    ceilings: { maxTimeoutMs: 60_000, maxArtifactBytes: 1 << 20 }, upload: null, log: silentLogger,
  });
  const out: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      if (o.pauseMs) await new Promise((r) => setTimeout(r, o.pauseMs));
      const t = performance.now();
      const r = runner.start({
        jobId: `bench-${i}`, artifactHandle: `art_bench_${i}_000000`, mode: 'argv', command: 'true', args: [], cwd: '', env: {},
        timeoutMs: 30_000, limits: { inlineBytes: 40_000, artifactBytes: 1 << 20 },
      }, () => {});
      if (!r.accepted) throw new Error(r.error.message);
      const { exit } = await r.done;
      if (exit.state !== 'exited' || exit.exitCode !== 0) throw new Error(`bench job ended ${exit.state} ${exit.exitCode}`);
      out.push(performance.now() - t);
    }
  } finally {
    await driver.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  }
  return out;
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
}
