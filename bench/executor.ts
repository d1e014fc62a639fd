/**
 * Executor figures, in-process (no gateway): a bare `spawn('true')` from the agent process
 * (the baseline every sandbox is compared with), and `true` run through a real sandbox
 * driver + job runner (gVisor cold = no warm pool, gVisor warm = pooled sandboxes).
 * Each returns the samples in ms; bench/run.ts prints percentiles.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxKind } from '../src/contracts/agent-protocol.ts';
import { JobRunner } from '../executor/jobs/runner.ts';
import { silentLogger } from '../executor/log.ts';
import { probeRuntimes } from '../executor/runtimes/probe.ts';
import { startDriver } from '../executor/sandbox/index.ts';
import type { SandboxReuse } from '../src/contracts/sandbox-reuse.ts';
import { DISCARD_LIVE } from '../executor/jobs/relay.ts';

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
  const c = cpuSplit();
  return c.self + c.children;
}

/**
 * CPU (ms) of this process's whole tree so far: itself, every live descendant (runsc's sandbox
 * and gofer processes run a gVisor job's work, and are not reaped until the sandbox ends) and
 * what each reaped of its children. A process that ended unreaped by the tree is missed.
 */
export function treeCpu(): number {
  const procs = new Map<number, { ppid: number; cpu: number }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      procs.set(Number(name), { ppid: Number(f[1]), cpu: (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10 });
    } catch {
      /* gone */
    }
  }
  let total = 0;
  for (const [pid, p] of procs) {
    for (let x: number | undefined = pid; x !== undefined && x > 1; x = procs.get(x)?.ppid) {
      if (x === process.pid) {
        total += p.cpu;
        break;
      }
    }
  }
  return total;
}

/** CPU (ms) of this process and of its waited-for children so far (/proc/self/stat, 10 ms ticks). */
function cpuSplit(): { self: number; children: number } {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime, stime, cutime, cstime in clock ticks of 10 ms.
  return { self: (Number(f[11]) + Number(f[12])) * 10, children: (Number(f[13]) + Number(f[14])) * 10 };
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
  /** gVisor: false starts reused sandboxes' jobs with posix_spawn instead of the compiled start. */
  compiledStart?: boolean;
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

/**
 * The agent's CPU per `true` job through `kind`'s driver and the job runner (ms, the agent
 * itself and the processes it starts, apart), against a bare `spawn('true')` measured in the
 * same process right before: the agent's share of a job's cost, without the gateway.
 */
export async function driverCpu(
  kind: SandboxKind,
  n: number,
  o: DriverBenchOptions = {},
): Promise<{ self: number; children: number; tree: number; bare: number; bareSelf: number }> {
  let start = cpuSplit();
  await benchBareSpawn(n);
  const afterBare = cpuSplit();
  const bareSelf = (afterBare.self - start.self) / n;
  const bare = bareSelf + (afterBare.children - start.children) / n;
  let treeStart = 0;
  // Counted from the first timed job on (the driver's start-up and warm-up are not per job).
  const r = await benchDriverRun(kind, n, {
    ...o,
    onTimedStart: () => {
      start = cpuSplit();
      treeStart = treeCpu();
    },
  });
  const end = r.endCpu;
  return { self: (end.self - start.self) / n, children: (end.children - start.children) / n, tree: (r.endTree - treeStart) / n, bare, bareSelf };
}

async function benchDriverRun(
  kind: SandboxKind,
  n: number,
  o: DriverBenchOptions & { onTimedStart?: () => void },
): Promise<{ samples: number[]; wallMs: number; endCpu: { self: number; children: number }; endTree: number }> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'gh-bench-ws-')));
  const stateDir = mkdtempSync(join(tmpdir(), 'gh-bench-state-'));
  const d = await startDriver(kind, { root, stateDir, warm: o.warm ?? 0, ...(o.compiledStart === false ? { compiledStart: false } : {}) }, silentLogger);
  if (!d.ok) throw new Error(d.error.message);
  const driver = d.value;
  const clients = o.clients ?? 1;
  const runner = new JobRunner({
    driver,
    runtimes: await probeRuntimes(['shell']),
    root,
    spoolDir: join(stateDir, 'spool'),
    capacity: Math.max(4, clients),
    ceilings: { maxTimeoutMs: 60_000, maxArtifactBytes: 1 << 20 },
    upload: null,
    log: silentLogger,
  });
  const out: number[] = [];
  let seq = 0;
  const client = async (count: number) => {
    for (let i = 0; i < count; i++) {
      if (o.pauseMs) await new Promise((r) => setTimeout(r, o.pauseMs));
      const id = seq++;
      const t = performance.now();
      const r = runner.start(
        {
          jobId: `bench-${id}`,
          artifactHandle: `art_bench_${id}_000000`,
          mode: 'argv',
          command: 'true',
          args: [],
          cwd: '',
          env: {},
          timeoutMs: 30_000,
          limits: { inlineBytes: 40_000, artifactBytes: 1 << 20 },
          ...(o.reuse ? { reuse: o.reuse } : {}),
        },
        DISCARD_LIVE,
      );
      if (!r.accepted) throw new Error(r.error.message);
      const { exit } = await r.done;
      if (exit.state !== 'exited' || exit.exitCode !== 0) throw new Error(`bench job ended ${exit.state} ${exit.exitCode}`);
      out.push(performance.now() - t);
    }
  };
  try {
    // Each client's first job pays a cold sandbox when reusing: one warm-up job per client, not timed.
    if (o.reuse || o.onTimedStart) {
      await Promise.all(Array.from({ length: clients }, () => client(1)));
      out.length = 0;
    }
    o.onTimedStart?.();
    const start = performance.now();
    await Promise.all(Array.from({ length: clients }, () => client(n)));
    const wallMs = performance.now() - start;
    // Teardown runs in the background after each exit: let the last one finish inside the count.
    await driver.idle();
    const endTree = o.onTimedStart ? treeCpu() : 0;
    return { samples: out, wallMs, endCpu: cpuSplit(), endTree };
  } finally {
    await driver.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  }
}

export interface GatewayGvisorFigures {
  /** ms per `execute true`, back to back, no pause: sandbox none (the gateway's own share), gVisor single-use, gVisor reuse. */
  none: number[];
  single: number[];
  reuse: number[];
  /** jobs/s of `clients` concurrent MCP clients. */
  singleRate: { perS: number; errors: number };
  reuseRate: { perS: number; errors: number };
}

/**
 * `execute true` end to end (MCP client → local gateway → DO → agent → gVisor) for a team
 * without and a team with `sandbox.reuse`, each with its own agent (`--warm 4`, capacity 16),
 * in one run: `n` calls back to back, then `clients` clients × `perClient` calls.
 */
export async function benchGatewayGvisor(n: number, clients: number, perClient: number): Promise<GatewayGvisorFigures> {
  const { startBenchGateway } = await import('./gateway.ts');
  const { startAgent } = await import('../test/e2e/harness.ts');
  const { DEFAULT_POLICY } = await import('../src/policy/default-policy.ts');
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
  const agents: { stop(): Promise<unknown> }[] = [];
  const roots: string[] = [];
  const launch = async (team: string, sandbox: 'none' | 'gvisor', reuse?: SandboxReuse) => {
    const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
    roots.push(root);
    await gw.putPolicy(team, {
      ...DEFAULT_POLICY,
      limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 16, queueWaitMs: 60_000 },
      sandbox: { minimum: 'none', ...(reuse ? { reuse } : {}) },
    });
    const a = startAgent(gw, {
      token: await gw.token({ team, scopes: ['agent'] }),
      root,
      sandbox,
      capacity: 16,
      agentId: `bench-${team}`,
      extraArgs: sandbox === 'gvisor' ? ['--warm', '4'] : [],
    });
    agents.push(a);
    await a.ready;
    return gw.mcp(team, ['execute', 'artifacts:read']);
  };
  const call = async (c: Awaited<ReturnType<typeof launch>>) => {
    const r = await c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } }, undefined, { timeout: 120_000 });
    if (r.isError) throw new Error(`execute failed: ${JSON.stringify(r.content).slice(0, 300)}`);
  };
  const backToBack = async (c: Awaited<ReturnType<typeof launch>>, count: number) => {
    const out: number[] = [];
    for (let i = 0; i < count; i++) {
      const t = performance.now();
      await call(c);
      out.push(performance.now() - t);
    }
    return out;
  };
  const rate = async (team: string) => {
    const cs = await Promise.all(Array.from({ length: clients }, () => gw.mcp(team, ['execute', 'artifacts:read'])));
    let errors = 0;
    const t = performance.now();
    await Promise.all(
      cs.map(async (c) => {
        for (let i = 0; i < perClient; i++)
          await call(c).catch(() => {
            errors++;
          });
      }),
    );
    const perS = (clients * perClient) / ((performance.now() - t) / 1000);
    await Promise.all(cs.map((c) => c.close()));
    return { perS, errors };
  };
  try {
    const none = await launch('bx-none', 'none');
    const single = await launch('bx-single', 'gvisor');
    const reuse = await launch('bx-reuse', 'gvisor', BENCH_REUSE);
    for (const c of [none, single, reuse]) await backToBack(c, 5); // warm-up (the reuse team's first sandbox)
    const figures: GatewayGvisorFigures = {
      none: await backToBack(none, n),
      single: await backToBack(single, n),
      reuse: await backToBack(reuse, n),
      singleRate: await rate('bx-single'),
      reuseRate: await rate('bx-reuse'),
    };
    await Promise.all([none, single, reuse].map((c) => c.close()));
    return figures;
  } finally {
    for (const a of agents) await a.stop();
    await gw.stop();
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  }
}

const invokedDirectly = process.argv[1]?.endsWith('bench/executor.ts');
if (invokedDirectly && process.argv.includes('--e2e')) {
  const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
  const show = (name: string, xs: number[]) =>
    console.log(`${name.padEnd(44)} p50 ${pct(xs, 50).toFixed(1)} ms  p99 ${pct(xs, 99).toFixed(1)} ms  (n=${xs.length})`);
  const n = Number(process.argv[process.argv.indexOf('--e2e') + 1] ?? 200) || 200;
  const r = await benchGatewayGvisor(n, 16, Math.max(2, Math.round(n / 16)));
  show(`e2e execute true, sandbox none, ${n} back-to-back`, r.none);
  show(`e2e execute true, gvisor single-use, ${n} back-to-back`, r.single);
  show(`e2e execute true, gvisor reuse, ${n} back-to-back`, r.reuse);
  console.log(`e2e 16 clients, gvisor single-use: ${r.singleRate.perS.toFixed(1)} jobs/s (${r.singleRate.errors} errors)`);
  console.log(`e2e 16 clients, gvisor reuse: ${r.reuseRate.perS.toFixed(1)} jobs/s (${r.reuseRate.errors} errors)`);
} else if (invokedDirectly && process.argv.includes('--cpu')) {
  // `node bench/executor.ts --cpu [n] [driver…]`; add --cpu-prof to node's flags for a profile.
  const i = process.argv.indexOf('--cpu');
  const n = Number(process.argv[i + 1]) || 200;
  const kinds = process.argv.slice(i + 2).filter((a) => !/^\d+$/.test(a) && !a.startsWith('--')) as SandboxKind[];
  for (const kind of kinds.length ? kinds : (['none'] as SandboxKind[])) {
    const c = await driverCpu(kind, n);
    console.log(
      `agent CPU per true job, driver ${kind}: ${(c.self + c.children).toFixed(2)} ms (itself ${c.self.toFixed(2)}, children ${c.children.toFixed(2)}; whole process tree ${c.tree.toFixed(2)}); bare spawn('true') ${c.bare.toFixed(2)} ms (itself ${c.bareSelf.toFixed(2)})  (n=${n}, load ${loadavg()[0].toFixed(1)})`,
    );
  }
  if (process.argv.includes('--reuse')) {
    // gVisor with sandbox reuse: the sandbox (runsc's processes) outlives the jobs, so only the tree figure is whole.
    // The init's two ways to start a job, alternately (the host drifts between minutes): compiled, and posix_spawn
    // as on a host without a C compiler.
    const trees: Record<string, number[]> = { compiled: [], posix_spawn: [] };
    for (let round = 0; round < 3; round++) {
      for (const start of ['compiled', 'posix_spawn'] as const) {
        const c = await driverCpu('gvisor', n, { warm: 0, reuse: BENCH_REUSE, compiledStart: start === 'compiled' });
        trees[start].push(c.tree);
        console.log(
          `CPU per true job, gvisor sandbox.reuse, ${start} start: whole process tree ${c.tree.toFixed(2)} ms (agent itself ${c.self.toFixed(2)})  (n=${n}, load ${loadavg()[0].toFixed(1)})`,
        );
      }
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    console.log(
      `gvisor sandbox.reuse, mean of 3 alternate runs: compiled start ${mean(trees.compiled).toFixed(2)} ms, posix_spawn start ${mean(trees.posix_spawn).toFixed(2)} ms (ratio ${(mean(trees.compiled) / mean(trees.posix_spawn)).toFixed(2)})`,
    );
  }
} else if (invokedDirectly) {
  const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
  const show = (name: string, xs: number[]) =>
    console.log(`${name.padEnd(34)} p50 ${pct(xs, 50).toFixed(1)} ms  p99 ${pct(xs, 99).toFixed(1)} ms  (n=${xs.length})`);
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
