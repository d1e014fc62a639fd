/**
 * gVisor driver: every job gets its own single-use `runsc` sandbox, created from a generated
 * OCI bundle (read-only rootfs made only of allowlisted system dirs, workspace bind-mounted
 * read-write at /workspace, a private /job dir, private tmpfs /tmp, uid 65534, no
 * capabilities, no network). A warm pool keeps N sandboxes started with a placeholder
 * process; the job is `runsc exec`-ed into one, which is destroyed afterwards.
 * Never `runsc do`: it hands the caller's environment and filesystem to the job.
 */
import { spawn } from 'node:child_process';
import { chownSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { systemView } from './system-view.ts';
import { delay, runQuiet, watchWrapper } from './exec-util.ts';
import {
  SANDBOX_GID, SANDBOX_UID, type DriverOptions, type ExecRequest, type ResourceLimits, type Sandbox,
  type ProcessEnd, type SandboxDriver, type SandboxProcess,
} from './types.ts';
import type { Logger } from '../log.ts';

export const WORKSPACE_INSIDE = '/workspace';
export const JOB_DIR_INSIDE = '/job';
/** Prefix of our sandbox ids, so stale ones from a killed agent can be found and removed. */
const ID_PREFIX = 'gh-';

const RUNSC_ENV = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' };

export class GvisorDriver implements SandboxDriver {
  readonly kind = 'gvisor' as const;
  readonly runscRoot: string;
  private readonly opts: DriverOptions;
  private readonly log: Logger;
  private readonly rootfs: string;
  private readonly pool: Promise<GvisorSandbox | null>[] = [];
  private readonly teardowns = new Set<Promise<void>>();
  private readonly live = new Set<GvisorSandbox>();
  private closed = false;
  private counter = 0;
  private readonly tag = randomBytes(3).toString('hex');

  constructor(opts: DriverOptions, log: Logger) {
    this.opts = opts;
    this.log = log;
    this.runscRoot = join(opts.stateDir, 'runsc');
    this.rootfs = join(opts.stateDir, 'rootfs');
  }

  describe(): string {
    return `gvisor (runsc, state ${this.runscRoot}, warm pool ${this.opts.warm ?? 0})`;
  }

  /** Removes sandboxes a previous (killed) agent left behind, builds the rootfs skeleton, fills the pool. */
  async init(): Promise<void> {
    mkdirSync(this.runscRoot, { recursive: true, mode: 0o700 });
    await this.removeStale();
    this.buildRootfs();
    // Prove runsc really works here before claiming gVisor: the first sandbox must start.
    const first = await this.create({});
    if ((this.opts.warm ?? 0) > 0) this.pool.push(Promise.resolve(first));
    else await first.destroy();
    this.fillPool();
  }

  private async removeStale(): Promise<void> {
    const r = await runQuiet('runsc', ['--root', this.runscRoot, 'list', '-quiet'], { env: RUNSC_ENV });
    const ids = r.stdout.split('\n').map((s) => s.trim()).filter((s) => s.startsWith(ID_PREFIX));
    if (ids.length) this.log.warn(`removing ${ids.length} sandbox(es) left by a previous agent: ${ids.join(', ')}`);
    await Promise.all(ids.map(async (id) => {
      await runQuiet('runsc', ['--root', this.runscRoot, 'kill', '--all', id, 'KILL'], { env: RUNSC_ENV });
      await runQuiet('runsc', ['--root', this.runscRoot, 'delete', '--force', id], { env: RUNSC_ENV });
    }));
    rmSync(join(this.opts.stateDir, 'bundles'), { recursive: true, force: true });
    rmSync(join(this.opts.stateDir, 'jobdirs'), { recursive: true, force: true });
  }

  /** An empty read-only root with mount points for the allowlisted system paths. */
  private buildRootfs(): void {
    rmSync(this.rootfs, { recursive: true, force: true });
    mkdirSync(this.rootfs, { recursive: true, mode: 0o755 });
    for (const d of ['proc', 'dev', 'sys', 'tmp', 'etc', WORKSPACE_INSIDE.slice(1), JOB_DIR_INSIDE.slice(1)]) {
      mkdirSync(join(this.rootfs, d), { recursive: true });
    }
    for (const e of systemView()) {
      const at = join(this.rootfs, e.path);
      if (e.kind === 'symlink') symlinkSync(e.target!, at);
      else if (e.kind === 'dir') mkdirSync(at, { recursive: true });
      else writeFileSync(at, '');
    }
  }

  private fillPool(): void {
    while (!this.closed && this.pool.length < (this.opts.warm ?? 0)) {
      const p = this.create({}).catch((e) => {
        this.log.warn(`warm sandbox failed to start: ${(e as Error).message}`);
        return null;
      });
      this.pool.push(p);
    }
  }

  async acquire(jobId: string, limits: ResourceLimits): Promise<Sandbox> {
    // A memory limit is a property of the whole sandbox: such jobs get a fresh one.
    if (!limits.memoryBytes) {
      while (this.pool.length) {
        const sb = await this.pool.shift()!;
        this.fillPool();
        if (sb) {
          sb.limits = limits;
          sb.jobId = jobId;
          return sb;
        }
      }
    }
    const sb = await this.create(limits);
    sb.jobId = jobId;
    return sb;
  }

  /** Starts a sandbox whose init is a placeholder (`sleep infinity`); jobs are exec-ed into it. */
  async create(limits: ResourceLimits): Promise<GvisorSandbox> {
    const id = `${ID_PREFIX}${this.tag}-${++this.counter}-${randomBytes(3).toString('hex')}`;
    const bundle = join(this.opts.stateDir, 'bundles', id);
    const jobDir = join(this.opts.stateDir, 'jobdirs', id);
    mkdirSync(bundle, { recursive: true, mode: 0o700 });
    mkdirSync(jobDir, { recursive: true, mode: 0o700 });
    // The job user must be able to write its own dir (build output); nobody else can reach it.
    if (process.getuid?.() === 0) chownSync(jobDir, SANDBOX_UID, SANDBOX_GID);
    writeFileSync(join(bundle, 'config.json'), JSON.stringify(this.bundleConfig(jobDir, limits)));
    const sb = new GvisorSandbox(this, id, bundle, jobDir, limits);
    const r = await this.startDetached(bundle, id);
    if (!r.ok) {
      void this.track(sb.destroy());
      throw new Error(`runsc run failed: ${r.message}`);
    }
    this.live.add(sb);
    return sb;
  }

  /**
   * `runsc run --detach`: the placeholder inherits runsc's stdio, so no pipes here (they would
   * never close); stderr goes to a file we read only when the start fails.
   */
  private startDetached(bundle: string, id: string): Promise<{ ok: true } | { ok: false; message: string }> {
    const logPath = join(bundle, 'run.log');
    const fd = openSync(logPath, 'w', 0o600);
    return new Promise((resolve) => {
      const p = spawn('runsc', ['--root', this.runscRoot, '--network=none', 'run', '--detach', '--bundle', bundle, id], {
        env: RUNSC_ENV, stdio: ['ignore', 'ignore', fd],
      });
      closeSync(fd);
      const t = setTimeout(() => p.kill('SIGKILL'), 30_000);
      const fail = (why: string) => {
        let log = '';
        try { log = readFileSync(logPath, 'utf8').trim().split('\n').slice(-3).join(' | '); } catch { /* none */ }
        resolve({ ok: false, message: `${why}${log ? `: ${log}` : ''}` });
      };
      p.once('error', (e) => { clearTimeout(t); fail(e.message); });
      p.once('exit', (code, sig) => {
        clearTimeout(t);
        if (code === 0) resolve({ ok: true });
        else fail(`exit ${code ?? sig}`);
      });
    });
  }

  bundleConfig(jobDir: string, limits: ResourceLimits): object {
    const mounts: object[] = [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777'] },
    ];
    for (const e of systemView()) {
      if (e.kind === 'symlink') continue; // recreated in the rootfs
      mounts.push({ destination: e.path, type: 'bind', source: e.path, options: ['rbind', 'ro', 'nosuid', 'nodev'] });
    }
    mounts.push({ destination: WORKSPACE_INSIDE, type: 'bind', source: this.opts.root, options: ['rbind', 'rw', 'nosuid', 'nodev'] });
    mounts.push({ destination: JOB_DIR_INSIDE, type: 'bind', source: jobDir, options: ['rbind', 'rw', 'nosuid', 'nodev'] });
    const linux: Record<string, unknown> = {
      namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }, { type: 'network' }],
      maskedPaths: ['/proc/kcore', '/proc/keys', '/proc/timer_list', '/sys/firmware'],
    };
    if (limits.memoryBytes) linux.resources = { memory: { limit: limits.memoryBytes } };
    return {
      ociVersion: '1.0.0',
      hostname: 'sandbox',
      process: processSpec({ argv: ['/usr/bin/sleep', 'infinity'], cwd: '', env: { PATH: '/usr/bin:/bin' } }, limits),
      root: { path: this.rootfs, readonly: true },
      mounts,
      linux,
    };
  }

  runsc(args: string[], timeoutMs = 15_000) {
    return runQuiet('runsc', ['--root', this.runscRoot, ...args], { env: RUNSC_ENV, timeoutMs });
  }

  /** Teardown happens in the background (runsc delete takes ~2 s); idle() waits for it. */
  track(p: Promise<void>): Promise<void> {
    this.teardowns.add(p);
    void p.finally(() => this.teardowns.delete(p));
    return p;
  }

  forget(sb: GvisorSandbox): void {
    this.live.delete(sb);
  }

  async idle(): Promise<void> {
    while (this.teardowns.size) await Promise.allSettled([...this.teardowns]);
  }

  async close(): Promise<void> {
    this.closed = true;
    const pooled = await Promise.all(this.pool.splice(0));
    await Promise.allSettled([...pooled, ...this.live].map((sb) => sb?.destroy()));
    await this.idle();
  }
}

/** The OCI process of a job (or of the placeholder): explicit env, nobody, no capabilities. */
export function processSpec(req: ExecRequest, limits: ResourceLimits): object {
  const rlimits = [
    { type: 'RLIMIT_NOFILE', hard: limits.maxOpenFiles ?? 1024, soft: limits.maxOpenFiles ?? 1024 },
    { type: 'RLIMIT_NPROC', hard: limits.maxProcesses ?? 512, soft: limits.maxProcesses ?? 512 },
  ];
  if (limits.maxFileBytes) rlimits.push({ type: 'RLIMIT_FSIZE', hard: limits.maxFileBytes, soft: limits.maxFileBytes });
  return {
    terminal: false,
    user: { uid: SANDBOX_UID, gid: SANDBOX_GID, additionalGids: [] },
    args: req.argv,
    env: Object.entries(req.env).map(([k, v]) => `${k}=${v}`),
    cwd: req.cwd ? `${WORKSPACE_INSIDE}/${req.cwd}` : WORKSPACE_INSIDE,
    capabilities: { bounding: [], effective: [], inheritable: [], permitted: [], ambient: [] },
    noNewPrivileges: true,
    rlimits,
  };
}

export class GvisorSandbox implements Sandbox {
  readonly id: string;
  readonly jobDirHost: string;
  readonly jobDirInside = JOB_DIR_INSIDE;
  readonly workspaceInside = WORKSPACE_INSIDE;
  limits: ResourceLimits;
  jobId = '';
  private readonly driver: GvisorDriver;
  private readonly bundle: string;
  private execs = 0;
  private readonly running = new Set<Promise<unknown>>();
  private killing: Promise<void> | null = null;
  private destroying: Promise<void> | null = null;

  constructor(driver: GvisorDriver, id: string, bundle: string, jobDir: string, limits: ResourceLimits) {
    this.driver = driver;
    this.id = id;
    this.bundle = bundle;
    this.jobDirHost = jobDir;
    this.limits = limits;
  }

  exec(req: ExecRequest): SandboxProcess {
    const spec = join(this.bundle, `exec-${++this.execs}.json`);
    writeFileSync(spec, JSON.stringify(processSpec(req, this.limits)));
    const pidFile = join(this.bundle, `exec-${this.execs}.pid`);
    const child = spawn('runsc', ['--root', this.driver.runscRoot, 'exec', '--internal-pid-file', pidFile, '--process', spec, this.id], {
      env: RUNSC_ENV,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    // runsc writes the pid file once the process runs inside: without it, runsc itself failed
    // (its message is on stderr) and the job never started.
    const ended = watchWrapper(child).then((e): ProcessEnd => (e.kind !== 'spawn_failed' && !existsSync(pidFile)
      ? { kind: 'spawn_failed', message: `runsc exec could not start the process in sandbox ${this.id} (${e.kind === 'exited' ? `exit ${e.code}` : e.signal})` }
      : e));
    this.running.add(ended);
    void ended.finally(() => this.running.delete(ended));
    return { child, ended };
  }

  kill(graceMs: number): Promise<void> {
    if (!this.killing || graceMs === 0) {
      const prev = this.killing;
      this.killing = (async () => {
        if (prev) await prev;
        if (graceMs > 0) {
          await this.driver.runsc(['kill', '--all', this.id, 'TERM']);
          await Promise.race([Promise.all([...this.running]), delay(graceMs)]);
        }
        await this.driver.runsc(['kill', '--all', this.id, 'KILL']);
      })();
    }
    return this.killing;
  }

  destroy(): Promise<void> {
    this.destroying ??= this.driver.track((async () => {
      await this.kill(0);
      const r = await this.driver.runsc(['delete', '--force', this.id], 30_000);
      if (r.code !== 0 && !/not exist|cannot load/i.test(r.stderr)) {
        // Leave nothing running: one more try, then report it.
        await delay(500);
        await this.driver.runsc(['delete', '--force', this.id], 30_000);
      }
      this.driver.forget(this);
      rmSync(this.bundle, { recursive: true, force: true });
      rmSync(this.jobDirHost, { recursive: true, force: true });
    })());
    return this.destroying;
  }
}

export function runscAvailable(): Promise<boolean> {
  return runQuiet('runsc', ['--version'], { env: RUNSC_ENV, timeoutMs: 5000 }).then((r) => r.code === 0);
}

