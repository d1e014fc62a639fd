/**
 * The Worker's start-up CPU: what `wrangler check startup` measures — the bundle `wrangler deploy --dry-run`
 * builds, loaded in local workerd under the inspector's CPU profiler, from the first module evaluation
 * to the end of the top-level code. Cloudflare refuses a deploy whose start-up exceeds its limit, so this is
 * the figure to keep well below it. The bundle is built once; the profile is taken `runs` times and the
 * median reported (one profile is noisy on a busy host). Active time = sampled time minus idle, as wrangler
 * prints it; the profile also says where the time goes (self time per function).
 *
 *   node bench/startup.ts [runs=7]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ROOT } from '../test/e2e/harness.ts';

/** Cloudflare's limit on a Worker's start-up CPU time (Workers limits: "Worker startup time", 1 second). */
export const STARTUP_LIMIT_MS = 1000;
/** Gatehouse's own target, leaving room below the limit for growth and for slower machines at the edge. */
const STARTUP_TARGET_MS = 350;

const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples?: number[];
  timeDeltas?: number[];
}

interface StartupFigures {
  /** Active CPU ms of each profile, in the order taken. */
  samples: number[];
  median: number;
  /** The bundle as wrangler reports it: its modules without source maps, KiB raw and gzipped. */
  bundle: string;
  /** Functions with the most self time in the median profile, ms. */
  top: { name: string; ms: number }[];
}

function wrangler(args: string[]): Promise<string> {
  // wrangler's shebang runs `node` from PATH: make that the Node running this file (the pinned Node 22).
  const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}`, WRANGLER_SEND_METRICS: 'false', CI: 'true', NO_COLOR: '1' };
  return new Promise((resolve, reject) => {
    const p = spawn(WRANGLER, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`wrangler ${args[0]} ${args[1] ?? ''} exited ${code}:\n${out.slice(-2000)}`))));
  });
}

/** Active (non-idle) time of a CPU profile and its self time per function, in ms. */
function summarize(profile: CpuProfile): { activeMs: number; self: Map<string, number> } {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let active = 0;
  (profile.timeDeltas ?? []).forEach((dt, i) => {
    const node = nodes.get(profile.samples?.[i] ?? -1);
    const name = node?.callFrame.functionName ?? '(unknown)';
    if (name === '(idle)') return;
    active += dt;
    const key = `${name || '(anonymous)'}${node?.callFrame.url ? ` ${node.callFrame.url.split('/').pop()}:${node.callFrame.lineNumber + 1}` : ''}`;
    self.set(key, (self.get(key) ?? 0) + dt);
  });
  return { activeMs: active / 1000, self: new Map([...self].map(([k, v]) => [k, v / 1000])) };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Builds the Worker once (`wrangler deploy --dry-run`) and profiles its start-up `runs` times. */
export async function benchStartup(runs: number): Promise<StartupFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-startup-'));
  try {
    const bundle = join(dir, 'worker.bundle');
    await wrangler(['deploy', '--dry-run', '--outfile', bundle]);
    const profiles: { activeMs: number; self: Map<string, number> }[] = [];
    let size = '';
    for (let i = 0; i < runs; i++) {
      const out = join(dir, `startup-${i}.cpuprofile`);
      const said = await wrangler(['check', 'startup', '--worker', bundle, '--outfile', out]);
      size ||= /Bundle: ([\d.]+ KiB \/ gzip: [\d.]+ KiB)/.exec(said)?.[1] ?? '';
      profiles.push(summarize(JSON.parse(readFileSync(out, 'utf8')) as CpuProfile));
    }
    const samples = profiles.map((p) => p.activeMs);
    const mid = median(samples);
    const closest = profiles.reduce((a, b) => (Math.abs(b.activeMs - mid) < Math.abs(a.activeMs - mid) ? b : a));
    const top = [...closest.self]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([name, ms]) => ({ name, ms }));
    return { samples, median: mid, bundle: size || 'size not reported', top };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The bench row: median start-up CPU against the target and the limit. */
export function startupRow(f: StartupFigures): string[] {
  return [
    `Worker start-up CPU (wrangler check startup, median of ${f.samples.length})`,
    `${f.median.toFixed(0)} ms`,
    `${Math.min(...f.samples).toFixed(0)}–${Math.max(...f.samples).toFixed(0)} ms`,
    `${(f.median / STARTUP_TARGET_MS).toFixed(2)}× the ${STARTUP_TARGET_MS} ms target; ${((100 * f.median) / STARTUP_LIMIT_MS).toFixed(0)} % of Cloudflare's ${STARTUP_LIMIT_MS / 1000} s limit`,
  ];
}

if (import.meta.main) {
  const runs = Number(process.argv[2]) || 7;
  const f = await benchStartup(runs);
  console.log(`Worker start-up CPU, ${runs} profiles of one bundle (${f.bundle}; load ${loadavg()[0].toFixed(1)})\n`);
  console.log(`| measure | median | range | against |\n|---|---|---|---|\n| ${startupRow(f).join(' | ')} |`);
  console.log(`\nsamples: ${f.samples.map((s) => s.toFixed(0)).join(', ')} ms\nmost self time (the median profile):`);
  for (const t of f.top) console.log(`  ${t.ms.toFixed(1).padStart(6)} ms  ${t.name}`);
  process.exit(0);
}
