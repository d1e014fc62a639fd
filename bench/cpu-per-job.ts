/**
 * CPU per job, per component, on the user's path: `npm start` (bundled agent, default policy) driven
 * by the MCP SDK client, for the default path (reused gVisor), strict (single-use gVisor), bubblewrap
 * and no sandbox. Each batch of jobs alternates with a batch of the emulator floor's `/op/path` (an
 * execute call's binding operations in local workerd with no Gatehouse code, bench/emulator-floor.ts),
 * so the gateway's figure and its floor see the same load. CPU per job barely moves with other
 * processes' load; the wall-clock rows beside it (default path: sustained p50/p99, 16 clients, 64
 * clients) do, by ±30 % between minutes on a shared 2-CPU host.
 *
 *   node bench/cpu-per-job.ts [--quick]     (also part of `npm run bench`)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand } from '../test/e2e/harness.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';
import { startEmulatorFloor, type RunningFloor } from './emulator-floor.ts';
import { removeBenchConfig, writeBenchConfig } from './gateway.ts';
import { COMPONENT_NAMES, COMPONENTS, SANDBOX_PARTS, addCpu, sampleCpu, type CpuPerJob } from './job-cpu.ts';
import { previousFigure } from './previous.ts';
import { startUserSetup, type StartSandbox, type UserSetup } from './user-setup.ts';

/** The paths measured, with the sandbox npm start is asked for and the team policy. */
const PATHS = [
  { name: 'default (reused gVisor)', sandbox: 'gvisor', policy: DEFAULT_POLICY },
  { name: 'strict (single-use gVisor)', sandbox: 'gvisor', policy: { ...DEFAULT_POLICY, sandbox: { minimum: 'none' } } },
  { name: 'bubblewrap', sandbox: 'bwrap', policy: DEFAULT_POLICY },
  { name: 'none', sandbox: 'none', policy: DEFAULT_POLICY },
] as const;
type PathName = (typeof PATHS)[number]['name'];

/** Targets (issue: CPU per job as the figure that travels): Gatehouse's CPU per job, all components. */
const CPU_TARGET_MS: Partial<Record<PathName, number>> = { 'default (reused gVisor)': 20, 'strict (single-use gVisor)': 120 };
const GATEWAY_OVER_FLOOR_TARGET_MS = 3;

interface PathCpu {
  path: PathName;
  cpu: CpuPerJob;
  /** The emulator floor's workerd CPU per `/op/path`, measured in the batches between. */
  floor: number;
  /** hostReference() just before the path was measured (ms). */
  reference?: number;
}

/** Everything of a job but wrangler's local proxy and the local emulation's floor: what a deployment would run. */
function ownTotal(p: PathCpu): number {
  const c = p.cpu.perJob;
  return c.client + (c.gateway - p.floor) + c.agent + c.sandbox;
}

const call = async (c: Client) => {
  const r = await c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } }, undefined, { timeout: 120_000 });
  if (r.isError) throw new Error(`execute failed: ${JSON.stringify(r.content).slice(0, 300)}`);
};

/** How a path's jobs are counted: `warm` jobs first (not counted), then `rounds` batches of `batch` jobs. */
interface Window {
  warm: number;
  rounds: number;
  batch: number;
}

/**
 * The jobs counted per path. A reused sandbox is replaced every `reuse.jobs` jobs (a `runsc` start,
 * ~100 ms of CPU): the default path counts a multiple of that many jobs, starting half-way through
 * its first sandbox's life, so each replacement and its start land inside the window, once per
 * `reuse.jobs` jobs, as they do for a team's steady stream of calls. A window shorter than the reuse
 * count would leave the replacement out in some runs and in others charge it to too few jobs.
 */
function windowOf(path: (typeof PATHS)[number], quick: boolean): Window {
  const reuse = 'reuse' in path.policy.sandbox ? path.policy.sandbox.reuse : undefined;
  if (path.sandbox === 'gvisor' && reuse) {
    const batch = quick ? 10 : 20;
    return { warm: Math.ceil(reuse.jobs / 2), rounds: Math.round((reuse.jobs * (quick ? 1 : 2)) / batch), batch };
  }
  return { warm: 10, rounds: quick ? 3 : 5, batch: quick ? 10 : 20 };
}

/** The path's window of jobs (windowOf), each batch followed by as many floor requests. */
async function measurePath(setup: UserSetup, floor: RunningFloor, path: PathName, { warm, rounds, batch }: Window): Promise<PathCpu> {
  const c = await setup.connect();
  try {
    for (let i = 0; i < warm; i++) await call(c);
    for (let i = 0; i < 10; i++) await floor.get('path');
    let cpu: CpuPerJob | null = null;
    let floorSum = 0;
    for (let r = 0; r < rounds; r++) {
      const before = sampleCpu(setup);
      // The client's CPU is this process's, taken around the calls only (reading /proc is the bench's, not the client's).
      const c0 = process.cpuUsage();
      for (let i = 0; i < batch; i++) await call(c);
      const c1 = process.cpuUsage(c0);
      const after = sampleCpu(setup);
      after.at.client = before.at.client + (c1.user + c1.system) / 1000;
      cpu = addCpu(cpu, before, after, batch);
      floorSum += (await floor.measure('path', batch)).cpu ?? Number.NaN;
    }
    return { path, cpu: cpu!, floor: floorSum / rounds };
  } finally {
    await c.close();
  }
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

interface Wall {
  sustained: number[];
  clients16: { perS: number; errors: number };
  clients64: { perS: number; errors: number; firstError: string };
}

/** Jobs/s of `clients` concurrent SDK clients making `perClient` calls each; failures counted. */
async function concurrent(setup: UserSetup, clients: number, perClient: number) {
  const cs = await Promise.all(Array.from({ length: clients }, () => setup.connect()));
  let errors = 0;
  let firstError = '';
  const t = performance.now();
  await Promise.all(
    cs.map(async (c) => {
      for (let i = 0; i < perClient; i++) {
        await call(c).catch((e: Error) => {
          errors += 1;
          firstError ||= e.message;
        });
      }
    }),
  );
  const perS = (clients * perClient * 1000) / (performance.now() - t);
  await Promise.all(cs.map((c) => c.close()));
  return { perS, errors, firstError };
}

async function measureWall(setup: UserSetup, quick: boolean): Promise<Wall> {
  const c = await setup.connect();
  const sustained: number[] = [];
  try {
    for (let i = 0; i < 5; i++) await call(c);
    for (let i = 0; i < (quick ? 40 : 200); i++) {
      const t = performance.now();
      await call(c);
      sustained.push(performance.now() - t);
    }
  } finally {
    await c.close();
  }
  const clients16 = await concurrent(setup, 16, quick ? 5 : 20);
  const clients64 = await concurrent(setup, 64, quick ? 2 : 5);
  return { sustained, clients16, clients64 };
}

interface CpuBench {
  paths: PathCpu[];
  wall: Wall | null;
  skipped: string[];
  load: number;
  /** hostReference() before each path and at the end (ms). */
  reference: number[];
}

/** A 1 KiB JSON-RPC message, as the components above parse and write them all the time. */
const REFERENCE_TEXT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'execute', arguments: { command: 'true', args: ['a', 'b'], env: { PATH: '/usr/bin:/bin' } }, _meta: { progressToken: 42 } },
  extra: Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: i * 3.25, text: 'x'.repeat(i) })),
});

/**
 * The host's speed, as the CPU time of a fixed piece of work in this process (10,000 JSON parses and
 * writes of REFERENCE_TEXT, after a warm-up). On a shared VM the same code's CPU per job moves by a
 * third between minutes (the MCP client's too, which is the same work every run): this row says how
 * fast the host was while the figures above were taken, so two runs' figures can be read side by side.
 */
function hostReference(): number {
  const run = (n: number) => {
    const c0 = process.cpuUsage();
    let size = 0;
    for (let i = 0; i < n; i++) size += JSON.stringify(JSON.parse(REFERENCE_TEXT)).length;
    const c = process.cpuUsage(c0);
    return size > 0 ? (c.user + c.system) / 1000 : 0;
  };
  run(10_000);
  return run(10_000);
}

/** Runs every path there is a sandbox for on this machine; `skipped` says which were not and why. */
export async function benchCpuPerJob(quick: boolean): Promise<CpuBench> {
  const state = mkdtempSync(join(tmpdir(), 'gatehouse-cpu-bench-'));
  const config = writeBenchConfig();
  const floor = await startEmulatorFloor();
  const paths: PathCpu[] = [];
  const skipped: string[] = [];
  const reference: number[] = [];
  let wall: Wall | null = null;
  try {
    const have: Record<StartSandbox, boolean> = { gvisor: hasCommand('runsc'), bwrap: hasCommand('bwrap'), none: true };
    for (const sandbox of ['gvisor', 'bwrap', 'none'] as const) {
      const mine = PATHS.filter((p) => p.sandbox === sandbox);
      if (!have[sandbox]) {
        skipped.push(...mine.map((p) => `${p.name}: no ${sandbox === 'gvisor' ? 'runsc' : 'bwrap'} on this machine`));
        continue;
      }
      const setup = await startUserSetup(state, sandbox, config);
      try {
        for (const p of mine) {
          const before = hostReference();
          reference.push(before);
          await setup.putPolicy(p.policy);
          paths.push({ ...(await measurePath(setup, floor, p.name, windowOf(p, quick))), reference: before });
          // The user's wall-clock figures, on the default path only.
          if (p.name === 'default (reused gVisor)') wall = await measureWall(setup, quick);
        }
      } finally {
        await setup.stop();
      }
    }
  } finally {
    await floor.stop();
    removeBenchConfig();
    rmSync(state, { recursive: true, force: true });
  }
  reference.push(hostReference());
  return { paths, wall, skipped, load: loadavg()[0], reference };
}

const ms = (x: number) => `${x.toFixed(1)} ms`;

/** One row: label, figure, the previous figure (bench/RESULTS.md, same label), ratio, target. */
function compared(label: string, figure: number, unit: (x: number) => string, target = '', column = 1): string[] {
  const prev = previousFigure([label], column);
  const ratio = prev?.value ? `${(figure / prev.value).toFixed(2)}×` : '';
  return [label, unit(figure), prev?.text || 'none yet', ratio, target];
}

const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');

/** The bench's rows: per path and component, then the targets; wall-clock rows last, with their caveat. */
export function cpuRows(b: CpuBench): string[][] {
  const rows: string[][] = [['measure', 'figure', 'previous', 'ratio', 'target']];
  for (const p of b.paths) {
    const at = `CPU/job, ${p.path}`;
    for (const k of COMPONENTS) rows.push(compared(`${at}: ${COMPONENT_NAMES[k]}`, p.cpu.perJob[k], ms));
    rows.push(compared(`${at}: emulator floor, interleaved (workerd CPU of /op/path)`, p.floor, ms));
    const over = p.cpu.perJob.gateway - p.floor;
    rows.push(compared(`${at}: gateway over the floor`, over, ms, `≤ ${GATEWAY_OVER_FLOOR_TARGET_MS} ms: ${verdict(over <= GATEWAY_OVER_FLOOR_TARGET_MS)}`));
    const target = CPU_TARGET_MS[p.path];
    rows.push(
      compared(
        `${at}: all components (client + gateway over the floor + agent + sandbox)`,
        ownTotal(p),
        ms,
        [target ? `≤ ${target} ms: ${verdict(ownTotal(p) <= target)}` : '', p.reference ? `host reference before it ${p.reference.toFixed(0)} ms` : '']
          .filter(Boolean)
          .join('; '),
      ),
    );
    const parts = SANDBOX_PARTS.filter((k) => Math.abs(p.cpu.parts[k]) >= 0.05).map((k) => `${k} ${p.cpu.parts[k].toFixed(1)}`);
    rows.push([
      `${at}: sandbox by process (ms; a live process's change, what ended is under 'ended', reaped by the agent)`,
      `${parts.join(', ') || '0'}; ${p.cpu.sandboxStarts} sandbox${p.cpu.sandboxStarts === 1 ? '' : 'es'} started in ${p.cpu.jobs} jobs`,
      '',
      '',
      '',
    ]);
  }
  const w = b.wall;
  if (w) {
    const load = '(wall time: moves with the host load)';
    const label = 'execute true, default policy, npm start, back to back';
    const n = `${w.sustained.length} calls`;
    rows.push(compared(`${label}: p50`, pct(w.sustained, 50), ms, `≤ 45 ms: ${verdict(pct(w.sustained, 50) <= 45)}; ${n} ${load}`));
    rows.push(compared(`${label}: p99`, pct(w.sustained, 99), ms, `≤ 100 ms: ${verdict(pct(w.sustained, 99) <= 100)}; ${n} ${load}`));
    const per = (x: number) => `${x.toFixed(1)} jobs/s`;
    rows.push(compared('16 clients, default policy, npm start', w.clients16.perS, per, `≥ 35 jobs/s: ${verdict(w.clients16.perS >= 35)} ${load}`));
    rows.push(compared('64 clients, default policy, npm start: errors', w.clients64.errors, (x) => `${x} errors`, `0: ${verdict(w.clients64.errors === 0)}`));
    if (w.clients64.firstError) rows.push(['  first error', w.clients64.firstError.slice(0, 200), '', '', '']);
  }
  for (const s of b.skipped) rows.push([`not measured: ${s}`, '', '', '', '']);
  const ref = b.reference;
  if (ref.length) {
    const mean = ref.reduce((a, x) => a + x, 0) / ref.length;
    const spread = `lowest ${Math.min(...ref).toFixed(1)}, highest ${Math.max(...ref).toFixed(1)} ms over ${ref.length} looks`;
    rows.push(compared('host reference: CPU time of 10,000 JSON parses and writes of 1 KiB (the same work every run: the host speed)', mean, ms, spread));
  }
  rows.push([`load average at the end`, b.load.toFixed(1), '', '', '']);
  return rows;
}

if (import.meta.main) {
  const quick = process.argv.includes('--quick');
  const b = await benchCpuPerJob(quick);
  for (const r of cpuRows(b)) console.log(`| ${r.join(' | ')} |`);
  process.exit(0);
}
