/**
 * Single-use gVisor sandboxes (the strict preset: one sandbox per job) two ways, in one run:
 * from the driver's warm pool as the agent runs them today (the baseline; also cold, one
 * `runsc run` per job), and restored from a `runsc checkpoint` image of a booted idle sandbox
 * of the same bundle (`runsc restore` per job, then the job's go line). Driver level, no network.
 *
 * Every sandbox here uses the driver's own bundle (read back with `runsc state` from a sandbox the
 * driver started), with two fields made per sandbox: the /job mount's source and the cgroup path.
 * The checkpoint is taken first of the driver's sandbox as it runs (stdio: the agent's pipes, which
 * Node makes Unix socketpairs, plus the launcher's status pipe as fd 3); if that image does not
 * restore, of a sandbox of the same bundle whose stdio are a FIFO and files, without fd 3.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { LAUNCHER_FILE, launchScript } from '../executor/jobs/launcher.ts';
import { jobRlimits } from '../executor/jobs/limits.ts';
import { silentLogger } from '../executor/log.ts';
import { GvisorDriver } from '../executor/sandbox/gvisor.ts';
import { JOB_DIR_INSIDE, RUNSC_ENV, WORKSPACE_INSIDE } from '../executor/sandbox/gvisor-sandbox.ts';
import { SANDBOX_GID, SANDBOX_UID } from '../executor/sandbox/types.ts';
import { DEFAULT_RESOURCE_LIMITS } from '../src/contracts/resource-limits.ts';
import { pct } from './agent-entry.ts';
import { benchDriver, driverCpu, treeCpu } from './executor.ts';

/** The driver's sandboxes run with these global flags (gvisor-sandbox.ts, gvisor.ts): a restore takes the same. */
const RUNSC_FLAGS = ['--network=none', '--platform=ptrace'];

/**
 * How the checkpointed sandbox's stdio are made: `driver` is the driver's own sandbox (Node's
 * socketpairs, fd 3 passed in); `fifo` is the same bundle started here with a FIFO as stdin, a
 * file as stderr, /dev/null as stdout and no fd 3. A restore gives its sandbox stdio of the same kind.
 */
type StdioKind = 'driver' | 'fifo';

interface Attempt {
  stdio: StdioKind;
  /** Checkpoint time and image size, when the checkpoint was taken. */
  checkpointMs?: number;
  imageBytes?: number;
  /** runsc's first line when the checkpoint or the first restore failed. */
  error?: string;
}

interface RestoreFigures {
  attempts: Attempt[];
  /** ms from `runsc restore` to the job's exit, and to the restored sandbox's pid file. */
  samples: number[];
  ready: number[];
  /** CPU (ms) per restored job, the whole process tree (runsc restore, its sandbox and gofer). */
  cpuPerJob: number | null;
  /** Why the timed restores stopped, with runsc's words. */
  error?: string;
  /** Sandboxes still listed under the bench's runsc root after cleanup (should be none). */
  leftovers: string[];
}

/** The image and the driver's bundle config it was taken with. */
interface Checkpoint {
  image: string;
  config: { mounts: { destination: string; source: string }[]; linux: { cgroupsPath?: string } };
  stdio: StdioKind;
}

/**
 * Checkpoints one booted idle single-use sandbox (the driver's own, else its bundle with FIFO stdio),
 * restores it once untimed, then restores `n` sandboxes from the image one after another, each
 * running `true` through the runner's own launcher script.
 */
export async function benchRestore(n: number): Promise<RestoreFigures> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'gh-bench-ws-')));
  const stateDir = mkdtempSync(join(tmpdir(), 'gh-bench-state-'));
  const work = mkdtempSync(join(tmpdir(), 'gh-bench-ckpt-'));
  const driver = new GvisorDriver({ root, stateDir, warm: 0 }, silentLogger);
  const mine = new Set<string>();
  const figures: RestoreFigures = { attempts: [], samples: [], ready: [], cpuPerJob: null, leftovers: [] };
  let seq = 0;
  const nextId = () => {
    const id = `gh-bench-ckpt-${process.pid}-${seq++}`;
    mine.add(id);
    return id;
  };
  try {
    await driver.init();
    const script = launchScript({ cwd: WORKSPACE_INSIDE, env: {}, run: ['true'], rlimits: jobRlimits(DEFAULT_RESOURCE_LIMITS, driver.processLimitByRlimit) });
    let taken: Checkpoint | null = null;
    for (const stdio of ['driver', 'fifo'] as const) {
      const attempt: Attempt = { stdio };
      figures.attempts.push(attempt);
      const c = await takeCheckpoint(driver, stdio, work, nextId, attempt);
      if (!c) continue;
      const first = await restoreOnce(driver, c, nextId(), work, script);
      if ('error' in first) {
        attempt.error = `restore: ${first.error}`;
        continue;
      }
      taken = c;
      break;
    }
    if (!taken) return figures;
    const cpu0 = treeCpu();
    for (let i = 0; i < n; i++) {
      const r = await restoreOnce(driver, taken, nextId(), work, script);
      if ('error' in r) {
        figures.error = r.error;
        break;
      }
      figures.samples.push(r.ms);
      figures.ready.push(r.readyMs);
    }
    if (figures.samples.length) figures.cpuPerJob = (treeCpu() - cpu0) / figures.samples.length;
    return figures;
  } finally {
    await driver.close();
    for (const id of mine) await driver.runsc(['delete', '--force', id], 30_000);
    figures.leftovers = (await driver.runsc(['list', '-quiet'])).stdout.split('\n').filter((s) => s.trim());
    rmSync(root, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}

/** Boots a sandbox of the driver's bundle (`stdio` says how) and checkpoints it into a fresh dir; null (and attempt.error) if that fails. */
async function takeCheckpoint(driver: GvisorDriver, stdio: StdioKind, work: string, nextId: () => string, attempt: Attempt): Promise<Checkpoint | null> {
  const sb = driver.create({ memoryBytes: DEFAULT_RESOURCE_LIMITS.memoryBytes, tmpBytes: DEFAULT_RESOURCE_LIMITS.tmpBytes });
  let own: Booted | null = null;
  try {
    if (!(await sb.ready)) {
      attempt.error = sb.startError();
      return null;
    }
    const state = await driver.runsc(['state', sb.id]);
    const bundle = (JSON.parse(state.stdout) as { bundle: string }).bundle;
    const config = JSON.parse(readFileSync(join(bundle, 'config.json'), 'utf8')) as Checkpoint['config'];
    let id = sb.id;
    if (stdio === 'fifo') {
      own = startFromBundle(driver, { image: '', config, stdio }, nextId(), work, null);
      if (!(await own.ready)) {
        attempt.error = `runsc run: ${firstLine(own.stderr())}`;
        return null;
      }
      id = own.id;
    }
    const image = join(work, `image-${stdio}`);
    mkdirSync(image);
    const t = performance.now();
    const r = await driver.runsc(['checkpoint', '--image-path', image, id], 120_000);
    attempt.checkpointMs = performance.now() - t;
    if (r.code !== 0) {
      attempt.error = `checkpoint: ${firstLine(r.stderr || r.stdout || r.error || `exit ${r.code}`)}`;
      return null;
    }
    attempt.imageBytes = readdirSync(image).reduce((s, f) => s + statSync(join(image, f)).size, 0);
    return { image, config, stdio };
  } finally {
    await sb.destroy();
    if (own) await own.end();
  }
}

interface Booted {
  id: string;
  /** Whether the pid file appeared before runsc exited. */
  ready: Promise<boolean>;
  /** ms from spawning runsc to the pid file (NaN if it never appeared) and to its exit, and its exit status. */
  exited: Promise<{ readyMs: number; exitMs: number; code: number | null }>;
  stderr(): string;
  /** Waits for runsc to exit (killing the sandbox if needed) and removes the sandbox's files. */
  end(): Promise<void>;
}

/**
 * Starts a sandbox of the driver's bundle, its own job dir (holding `script` as the launcher) and
 * cgroup, with `runsc run`, or `runsc restore` from `c.image` when set; its stdio are of `c.stdio`'s
 * kind, and its go line is sent at once (a restored waiter reads it as soon as it runs).
 */
function startFromBundle(driver: GvisorDriver, c: Checkpoint, id: string, work: string, script: string | null): Booted {
  const dir = join(work, id);
  const bundle = join(dir, 'bundle');
  const jobDir = join(dir, 'job');
  mkdirSync(bundle, { recursive: true, mode: 0o700 });
  mkdirSync(jobDir, { recursive: true, mode: 0o700 });
  if (process.getuid?.() === 0) chownSync(jobDir, SANDBOX_UID, SANDBOX_GID);
  if (script) writeFileSync(join(jobDir, LAUNCHER_FILE), script, { mode: 0o644 });
  const config = {
    ...c.config,
    mounts: c.config.mounts.map((m) => (m.destination === JOB_DIR_INSIDE ? { ...m, source: jobDir } : m)),
    linux: { ...c.config.linux, cgroupsPath: `/gatehouse/${id}` },
  };
  writeFileSync(join(bundle, 'config.json'), JSON.stringify(config));
  const pidFile = join(dir, 'pid');
  const errFile = join(dir, 'stderr');
  let stdin: number | null = null;
  const fds: number[] = [];
  if (c.stdio === 'fifo') {
    const fifo = join(dir, 'stdin');
    // coreutils' mkfifo: Node cannot make a FIFO itself.
    spawnSync('/usr/bin/mkfifo', ['-m', '600', fifo]);
    // Read-write: opening never blocks, and the FIFO never sees end-of-file while we hold it.
    stdin = openSync(fifo, 'r+');
    fds.push(stdin, openSync('/dev/null', 'w'), openSync(errFile, 'w'));
  }
  const cmd = c.image
    ? ['restore', '--image-path', c.image, '--pid-file', pidFile, '--bundle', bundle, id]
    : ['run', '--pid-file', pidFile, '--bundle', bundle, id];
  const t = performance.now();
  const child = spawn('runsc', ['--root', driver.runscRoot, ...RUNSC_FLAGS, ...cmd], {
    env: RUNSC_ENV,
    stdio: c.stdio === 'fifo' ? fds : ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  if (c.stdio === 'driver') {
    child.stdout?.resume();
    child.stderr?.on('data', (d: Buffer) => {
      if (stderr.length < 65536) stderr += d;
    });
    child.stdin?.on('error', () => {});
  }
  // The sandbox's init is the driver's waiter, blocked reading its go line.
  if (script) {
    if (stdin !== null) writeSync(stdin, 'go\n');
    else child.stdin?.write('go\n');
  }
  let readyMs = Number.NaN;
  let resolveReady: (ok: boolean) => void = () => {};
  const ready = new Promise<boolean>((r) => (resolveReady = r));
  const poll = setInterval(() => {
    if (Number.isNaN(readyMs) && existsSync(pidFile)) {
      readyMs = performance.now() - t;
      resolveReady(true);
    }
  }, 2);
  const exited = new Promise<{ readyMs: number; exitMs: number; code: number | null }>((resolve) => {
    const done = (code: number | null) => {
      const exitMs = performance.now() - t;
      clearInterval(poll);
      for (const fd of fds) closeSync(fd);
      fds.length = 0;
      resolveReady(false);
      resolve({ readyMs, exitMs, code });
    };
    child.once('error', (e) => {
      stderr += e.message;
      done(null);
    });
    child.once('exit', (code) => done(code));
  });
  const readStderr = () => (c.stdio === 'fifo' && existsSync(errFile) ? readFileSync(errFile, 'utf8') : stderr);
  return {
    id,
    ready,
    exited,
    stderr: readStderr,
    end: async () => {
      if (child.exitCode === null && child.signalCode === null) await driver.runsc(['kill', '--all', id, 'KILL']);
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Restores one sandbox from the checkpoint with its own job dir, sends the go line, waits for the job's exit. */
async function restoreOnce(
  driver: GvisorDriver,
  c: Checkpoint,
  id: string,
  work: string,
  script: string,
): Promise<{ ms: number; readyMs: number } | { error: string }> {
  const b = startFromBundle(driver, c, id, work, script);
  const { readyMs, exitMs, code } = await b.exited;
  const stderr = b.stderr();
  await b.end();
  if (code !== 0) return { error: `runsc restore exited ${code}: ${firstLine(stderr) || 'no output'}` };
  return { ms: exitMs, readyMs };
}

/** runsc's message: its first line (a panic's stack trace follows it). */
const firstLine = (s: string) => s.trim().split('\n')[0].slice(0, 400);

if (import.meta.main) {
  const n = Number(process.argv[2]) || 20;
  const rows: string[][] = [];
  const row = (name: string, xs: number[], base: number[], cpu: number | null) =>
    rows.push([
      name,
      `${pct(xs, 50).toFixed(1)} ms`,
      `${pct(xs, 99).toFixed(1)} ms`,
      `${(pct(xs, 50) / pct(base, 50)).toFixed(2)}×`,
      cpu === null ? '' : `${cpu.toFixed(1)} ms`,
    ]);
  const warm = await benchDriver('gvisor', n, { warm: 4 });
  const warmCpu = (await driverCpu('gvisor', n, { warm: 4 })).tree;
  const cold = await benchDriver('gvisor', n);
  const coldCpu = (await driverCpu('gvisor', n, { warm: 0 })).tree;
  const r = await benchRestore(n);
  row(`gvisor single-use, warm pool 4, ${n} back-to-back (baseline)`, warm, warm, warmCpu);
  row('gvisor single-use, cold: runsc run per job', cold, warm, coldCpu);
  if (r.samples.length) {
    row(`runsc restore per job → true exits (${r.samples.length} jobs, no job runner)`, r.samples, warm, r.cpuPerJob);
    const ready = r.ready.filter((x) => !Number.isNaN(x));
    if (ready.length) row('  of which restore → pid file (sandbox up)', ready, warm, null);
  }
  console.log(['measure', 'p50', 'p99', 'ratio p50 to baseline', 'CPU per job (process tree)'].join(' | '));
  for (const x of rows) console.log(x.join(' | '));
  for (const a of r.attempts) {
    const took = a.checkpointMs === undefined ? '' : ` checkpoint ${a.checkpointMs.toFixed(0)} ms, image ${((a.imageBytes ?? 0) / 1e6).toFixed(2)} MB;`;
    console.log(
      `checkpoint of the ${a.stdio === 'driver' ? "driver's own sandbox" : 'same bundle with FIFO/file stdio, no fd 3'}:${took} ${a.error ?? 'restores'}`,
    );
  }
  if (!r.samples.length && !r.error) console.log('no image restored here: no restore row');
  if (r.error) console.log(`restore failed after ${r.samples.length} job(s): ${r.error}`);
  console.log(r.leftovers.length ? `NOT cleaned up: ${r.leftovers.join(', ')}` : 'runsc list (the bench root) empty after cleanup');
  console.log(`(n=${n}, load ${loadavg()[0].toFixed(1)})`);
}
