/**
 * gVisor driver: every job gets its own single-use `runsc` sandbox, created from a generated
 * OCI bundle (read-only rootfs made only of allowlisted system dirs, workspace bind-mounted
 * read-write at /workspace, a private /job dir, private tmpfs /tmp, uid 65534, no
 * capabilities, no network).
 *
 * The sandbox's init is a tiny waiter (`read` one line from stdin, then run the job's
 * launcher script), started attached with `runsc run` so its stdio are our pipes. A warm
 * pool keeps N of those started; a job is one line on stdin, no `runsc exec` round trip.
 * When the job's process exits the container ends, which kills everything in it
 * (setsid/double-fork escapees included) and `runsc run` removes the sandbox.
 * Never `runsc do`: it hands the caller's environment and filesystem to the job.
 *
 * This file is the driver (bundles, warm pool, version check); one sandbox is gvisor-sandbox.ts,
 * reuse between a team's jobs gvisor-reuse/. Imports go one way: driver → reuse → sandbox.
 */
import { chownSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { availableParallelism } from 'node:os';
import { hiddenPaths, type SystemEntry } from './system-view.ts';
import { buildRootfs } from './gvisor-rootfs.ts';
import { delay, runQuiet } from './exec-util.ts';
import { SANDBOX_GID, SANDBOX_UID, type AcquireOptions, type DriverOptions, type ResourceLimits, type Sandbox, type SandboxDriver } from './types.ts';
import { GvisorSandbox, JOB_DIR_INSIDE, RUNSC_ENV, WORKSPACE_INSIDE, type GvisorHost, type SandboxLimits } from './gvisor-sandbox.ts';
import { LAUNCHER_FILE } from '../jobs/launcher.ts';
import { CA_BUNDLE_INSIDE } from './trusted-cas.ts';
import { INIT_PYTHON, reuseInitArgv } from './gvisor-reuse/init.ts';
import { buildSpawner } from './gvisor-reuse/spawner.ts';
import { ReusePool } from './gvisor-reuse/pool.ts';
import type { SandboxReuse } from '../../src/contracts/sandbox-reuse.ts';
import { DEFAULT_RESOURCE_LIMITS } from '../../src/contracts/resource-limits.ts';
import type { Logger } from '../log.ts';

/** Prefix of our sandbox ids, so stale ones from a killed agent can be found and removed. */
const ID_PREFIX = 'gh-';
/**
 * The oldest runsc build checked to run `ls -l` and `stat` (Debian trixie's 0.0~20240729).
 * Older builds are refused: Debian bookworm's 20221219 rejects statx(AT_NO_AUTOMOUNT) with
 * EINVAL, so `ls -l`, `ls -la` and `stat` fail inside the sandbox.
 */
export const MIN_RUNSC_DATE = 20240729;
const sameSandboxLimits = (a: SandboxLimits, b: SandboxLimits) => a.memoryBytes === b.memoryBytes && a.tmpBytes === b.tmpBytes;
/** The init: wait for the go line, then run the launcher in the same shell (one exec fewer: execs are slow under ptrace). */
const WAITER = ['/bin/sh', '-c', `read -r go && . ${JOB_DIR_INSIDE}/${LAUNCHER_FILE}`];
/**
 * What the reuse init may do as root inside the sandbox (jobs get none of it): drop to the job
 * user and clear its bounding set (setuid, setgid, setpcap), put back its own rlimits after
 * lending them to a job's start (sys_resource), kill the job's leftovers (kill), and wipe what
 * a job left in /tmp and /job whatever its modes (DAC override, fowner).
 */
const REUSE_INIT_CAPS = ['CAP_SETUID', 'CAP_SETGID', 'CAP_SETPCAP', 'CAP_SYS_RESOURCE', 'CAP_KILL', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER'];
type SandboxMode = 'single' | 'reuse';
/** Lets the sandbox connect to host Unix sockets under its mounts: the egress proxy's, in the job dir. */
const EGRESS_RUNSC_FLAG = '--host-uds=open';
/**
 * runsc's ptrace platform instead of its default, systrap: on this kind of host an idle systrap sentry
 * keeps waking its stub threads (a warm pool burned a tenth of a CPU doing nothing), and a reused
 * sandbox's `true` costs twice the CPU (bench/RESULTS.md, "CPU per job"). Both are gVisor platforms
 * with the same Sentry between the job and the host kernel.
 */
const PLATFORM_RUNSC_FLAG = '--platform=ptrace';
/**
 * Warm sandboxes started at once: a start is mostly CPU (runsc boots a kernel), so more
 * parallel starts than CPUs only slow each other and the jobs running.
 */
const MAX_PARALLEL_STARTS = Math.max(1, availableParallelism());
/** The window over which the single-use arrival rate is measured (refill ahead of demand). */
const ARRIVAL_WINDOW_MS = 5000;

export class GvisorDriver implements SandboxDriver, GvisorHost {
  readonly kind = 'gvisor' as const;
  readonly processLimitByRlimit = true;
  readonly enforcesEgress = true;
  readonly supportsWorkspaces = true;
  readonly runscRoot: string;
  version = 'unknown';
  /** What warm sandboxes are started with: the sandbox-wide limits of the latest job. */
  private poolLimits: SandboxLimits = { memoryBytes: DEFAULT_RESOURCE_LIMITS.memoryBytes, tmpBytes: DEFAULT_RESOURCE_LIMITS.tmpBytes };
  private readonly opts: DriverOptions;
  private readonly log: Logger;
  private readonly rootfs: string;
  /** The system paths every sandbox bind-mounts (buildRootfs): the allowlisted dirs, and any /etc entry that could not be copied. */
  private binds: SystemEntry[] = [];
  private readonly pool: GvisorSandbox[] = [];
  private readonly live = new Set<GvisorSandbox>();
  private closed = false;
  private counter = 0;
  /** When single-use jobs arrived (the last ARRIVAL_WINDOW_MS), and how long a sandbox start takes lately. */
  private readonly arrivals: number[] = [];
  private startMs = 300;
  /** Reusable sandboxes (teams whose policy sets sandbox.reuse); null when python3 is missing. */
  private reuse: ReusePool | null = null;
  /** The reuse init's compiled job start (gvisor-reuse/spawner.ts); null: the init uses os.posix_spawn. */
  private spawner: string | null = null;
  private readonly tag = randomBytes(3).toString('hex');

  constructor(opts: DriverOptions, log: Logger) {
    this.opts = opts;
    this.log = log;
    this.runscRoot = join(opts.stateDir, 'runsc');
    this.rootfs = join(opts.stateDir, 'rootfs');
  }

  /** How the reuse init starts each job. */
  get jobStart(): 'compiled' | 'posix_spawn' {
    return this.spawner ? 'compiled' : 'posix_spawn';
  }

  describe(): string {
    return `gvisor (runsc ${this.version}, state ${this.runscRoot}, warm pool ${this.opts.warm ?? 0}, reused jobs start with ${this.jobStart})`;
  }

  limitMechanisms(): string {
    return "memory: the sandbox's memory limit (OCI linux.resources, applied by runsc); /tmp: a tmpfs with size= set to the job's tmpBytes; processes, open files, file size, CPU time: rlimits inside the sandbox (the launcher's ulimit, or the reuse init); disk writes: write_bytes of the sandbox's host processes";
  }

  /** Refuses runsc builds known to break basic commands, with the reason. */
  private async checkVersion(): Promise<void> {
    const r = await this.runsc(['--version']);
    const first = r.stdout.split('\n')[0]?.trim() ?? '';
    this.version = first.replace(/^runsc version\s*/, '') || 'unknown';
    this.log.info(`runsc: ${first || 'no version output'}`);
    const verdict = runscVersionVerdict(first);
    if (verdict.warn) this.log.warn(verdict.warn);
    if (verdict.refuse) throw new Error(verdict.refuse);
  }

  /** Removes sandboxes a previous (killed) agent left behind, builds the rootfs, proves runsc works, fills the pool. */
  async init(): Promise<void> {
    mkdirSync(this.runscRoot, { recursive: true, mode: 0o700 });
    await this.checkVersion();
    // Jobs run as nobody inside: the workspace root must be theirs to enter and write in.
    if (process.getuid?.() === 0 && statSync(this.opts.root).uid !== SANDBOX_UID) {
      chownSync(this.opts.root, SANDBOX_UID, SANDBOX_GID);
      this.log.info(`workspace ${this.opts.root} now owned by uid ${SANDBOX_UID} (the sandbox user)`);
    }
    await this.removeStale();
    if (existsSync(INIT_PYTHON) && this.opts.compiledStart !== false) {
      const built = await buildSpawner(join(this.opts.stateDir, 'spawner'));
      if (built.ok) this.spawner = built.value;
      else this.log.warn(`${built.error.message}: reused sandboxes start jobs with posix_spawn (~1.5 ms more CPU per job)`);
    }
    this.buildRootfs();
    const first = this.create(this.poolLimits);
    if (!(await first.ready)) {
      const why = first.startError();
      await first.destroy();
      throw new Error(why);
    }
    if ((this.opts.warm ?? 0) > 0) this.pool.push(first);
    else await first.destroy();
    this.fillPool();
  }

  private async removeStale(): Promise<void> {
    const r = await this.runsc(['list', '-quiet']);
    const ids = r.stdout
      .split('\n')
      .map((s) => s.trim())
      .filter((s) => s.startsWith(ID_PREFIX));
    if (ids.length) this.log.warn(`removing ${ids.length} sandbox(es) left by a previous agent: ${ids.join(', ')}`);
    await Promise.all(
      ids.map(async (id) => {
        await this.runsc(['kill', '--all', id, 'KILL']);
        await this.runsc(['delete', '--force', id], 30_000);
      }),
    );
    rmSync(join(this.opts.stateDir, 'bundles'), { recursive: true, force: true });
    rmSync(join(this.opts.stateDir, 'jobdirs'), { recursive: true, force: true });
  }

  /** The root every sandbox starts from (gvisor-rootfs.ts), and the reuse pool when the init can run. */
  private buildRootfs(): void {
    this.binds = buildRootfs(this.rootfs, { caBundle: this.opts.caBundle, spawner: this.spawner }).binds;
    if (existsSync(INIT_PYTHON)) {
      this.reuse = new ReusePool({ createReusable: (l, ws) => this.create(l, 'reuse', [], ws), closed: () => this.closed }, this.log);
    } else {
      this.log.warn(`sandbox reuse is off: it needs ${INIT_PYTHON} (Debian package python3-minimal); every job gets a fresh sandbox`);
    }
  }

  refill(): void {
    this.fillPool();
  }

  /**
   * How many warm sandboxes to keep: `--warm`, or more while jobs arrive faster than that
   * many cover for one sandbox start (recent arrivals × recent start time), up to twice `--warm`.
   */
  poolTarget(now = Date.now()): number {
    const warm = this.opts.warm ?? 0;
    while (this.arrivals.length && this.arrivals[0] < now - ARRIVAL_WINDOW_MS) this.arrivals.shift();
    const perMs = this.arrivals.length / ARRIVAL_WINDOW_MS;
    return warm && Math.min(2 * warm, Math.max(warm, Math.ceil(perMs * this.startMs) + 1));
  }

  /** A single-use job arrived (it counts toward the rate the pool refills ahead of). */
  noteArrival(at = Date.now()): void {
    this.arrivals.push(at);
  }

  /** Tops the pool up to its target, never starting more sandboxes at once than MAX_PARALLEL_STARTS. */
  private fillPool(): void {
    const target = this.poolTarget();
    let starting = this.pool.filter((sb) => !sb.up).length;
    while (!this.closed && this.pool.length < target && starting < MAX_PARALLEL_STARTS) {
      const sb = this.create(this.poolLimits);
      const t0 = performance.now();
      this.pool.push(sb);
      starting++;
      void sb.ready.then((ok) => {
        if (ok) {
          // Recent start time (moving average): how far ahead the pool must be filled.
          this.startMs = 0.7 * this.startMs + 0.3 * (performance.now() - t0);
          this.fillPool();
          return;
        }
        this.log.warn(`warm sandbox failed to start: ${sb.startError()}`);
        const i = this.pool.indexOf(sb);
        if (i >= 0) this.pool.splice(i, 1);
        void sb.destroy();
      });
    }
  }

  async acquire(jobId: string, limits: ResourceLimits, reuse?: SandboxReuse, opts?: AcquireOptions): Promise<Sandbox> {
    // A job with network gets its own sandbox that may connect to the host socket in its job dir
    // (the egress proxy); pooled and reused sandboxes may not, so no other job gains that.
    const ws = opts?.workspaceDir;
    if (opts?.egress) return this.started(this.create(limits, 'single', [EGRESS_RUNSC_FLAG], ws));
    // A workspace is bind-mounted when a sandbox starts: a reused one must have been started with the
    // same workspace (the reuse pool keys on it), and warm single-use ones hold the shared root.
    if (reuse && this.reuse) return this.reuse.acquire(jobId, limits, reuse, ws);
    if (ws) return this.started(this.create(limits, 'single', [], ws));
    this.noteArrival();
    // Memory and /tmp size are properties of the whole sandbox: a warm one serves only a job with
    // the same; the pool follows the latest job's (teams rarely change their limits).
    if (!sameSandboxLimits(limits, this.poolLimits)) {
      this.poolLimits = { memoryBytes: limits.memoryBytes, tmpBytes: limits.tmpBytes };
      for (const sb of this.pool.splice(0)) void sb.destroy();
    } else {
      while (this.pool.length) {
        const sb = this.pool.shift()!;
        // Refill after the job rather than now: starting a sandbox costs CPU the job could use.
        if (!this.pool.length) this.fillPool();
        if ((await sb.ready) && sb.alive()) {
          return sb;
        }
        void sb.destroy();
      }
    }
    return this.started(this.create(limits));
  }

  async dropWorkspace(workspaceDir: string): Promise<void> {
    await this.reuse?.dropWorkspace(workspaceDir);
  }

  private async started(sb: GvisorSandbox): Promise<GvisorSandbox> {
    if (!(await sb.ready)) {
      const why = sb.startError();
      await sb.destroy();
      throw new Error(why);
    }
    return sb;
  }

  /** Starts a sandbox whose init waits for its job. `ready` says whether it came up. */
  create(limits: SandboxLimits, mode: SandboxMode = 'single', runscFlags: string[] = [], workspaceDir?: string): GvisorSandbox {
    const id = `${ID_PREFIX}${this.tag}-${++this.counter}-${randomBytes(3).toString('hex')}`;
    const bundle = join(this.opts.stateDir, 'bundles', id);
    const jobDir = join(this.opts.stateDir, 'jobdirs', id);
    mkdirSync(bundle, { recursive: true, mode: 0o700 });
    mkdirSync(jobDir, { recursive: true, mode: 0o700 });
    // The job user must be able to write its own dir (build output); nobody else can reach it.
    if (process.getuid?.() === 0) chownSync(jobDir, SANDBOX_UID, SANDBOX_GID);
    writeFileSync(join(bundle, 'config.json'), JSON.stringify(this.bundleConfig(jobDir, limits, id, mode, workspaceDir ?? this.opts.root)));
    // A reused sandbox's seccomp filter (bundleConfig) is only applied with --oci-seccomp.
    const sb = new GvisorSandbox(this, id, bundle, jobDir, [PLATFORM_RUNSC_FLAG, ...(mode === 'reuse' ? ['--oci-seccomp'] : []), ...runscFlags]);
    this.live.add(sb);
    return sb;
  }

  private bundleConfig(jobDir: string, limits: SandboxLimits, id: string, mode: SandboxMode, workspace: string): object {
    const mounts: object[] = [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777', `size=${limits.tmpBytes}`] },
    ];
    for (const e of this.binds) {
      mounts.push({ destination: e.path, type: 'bind', source: e.path, options: ['rbind', 'ro', 'nosuid', 'nodev'] });
    }
    // Configuration and credentials under the visible dirs: an empty dir or /dev/null instead.
    for (const h of hiddenPaths()) {
      mounts.push(
        h.kind === 'dir'
          ? { destination: h.path, type: 'tmpfs', source: 'tmpfs', options: ['ro', 'nosuid', 'nodev', 'noexec', 'size=4k', 'mode=755'] }
          : { destination: h.path, type: 'bind', source: '/dev/null', options: ['rbind', 'ro', 'nosuid'] },
      );
    }
    if (this.opts.caBundle)
      mounts.push({ destination: CA_BUNDLE_INSIDE, type: 'bind', source: this.opts.caBundle, options: ['rbind', 'ro', 'nosuid', 'nodev'] });
    mounts.push({ destination: WORKSPACE_INSIDE, type: 'bind', source: workspace, options: ['rbind', 'rw', 'nosuid', 'nodev'] });
    mounts.push({ destination: JOB_DIR_INSIDE, type: 'bind', source: jobDir, options: ['rbind', 'rw', 'nosuid', 'nodev'] });
    const linux: Record<string, unknown> = {
      namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }, { type: 'network' }],
      maskedPaths: ['/proc/kcore', '/proc/keys', '/proc/timer_list', '/sys/firmware'],
    };
    linux.resources = { memory: { limit: limits.memoryBytes } };
    // Our own cgroup path, so the sandbox's host processes can be found (disk-write accounting).
    linux.cgroupsPath = `/gatehouse/${id}`;
    // POSIX message queues outlive their creator and cannot be listed without mounting mqueue
    // (CAP_SYS_ADMIN): in a sandbox that runs several jobs, none may create one.
    if (mode === 'reuse') {
      linux.seccomp = { defaultAction: 'SCMP_ACT_ALLOW', syscalls: [{ names: ['mq_open'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 }] };
    }
    const reuse = mode === 'reuse';
    const caps = reuse ? REUSE_INIT_CAPS : [];
    return {
      ociVersion: '1.0.0',
      hostname: 'sandbox',
      process: {
        terminal: false,
        // The reuse init is root inside (it drops every job to the sandbox user); the waiter is that user.
        user: reuse ? { uid: 0, gid: 0, additionalGids: [] } : { uid: SANDBOX_UID, gid: SANDBOX_GID, additionalGids: [] },
        args: reuse ? reuseInitArgv(this.spawner !== null) : WAITER,
        // The launcher replaces this with `env -i` + the job's env for every step.
        env: ['PATH=/usr/bin:/bin'],
        cwd: WORKSPACE_INSIDE,
        capabilities: { bounding: caps, effective: caps, inheritable: [], permitted: caps, ambient: [] },
        noNewPrivileges: true,
        // Hard limits high enough for any policy: the launcher lowers them to the job's (ulimit).
        rlimits: [
          { type: 'RLIMIT_NOFILE', hard: 1_048_576, soft: 1024 },
          { type: 'RLIMIT_NPROC', hard: 65_536, soft: 1024 },
        ],
      },
      root: { path: this.rootfs, readonly: true },
      mounts,
      linux,
    };
  }

  runsc(args: string[], timeoutMs = 15_000) {
    return runQuiet('runsc', ['--root', this.runscRoot, ...args], { env: RUNSC_ENV, timeoutMs });
  }

  forget(sb: GvisorSandbox): void {
    this.live.delete(sb);
  }

  async idle(): Promise<void> {
    // Pooled sandboxes wait on purpose; everything else should be on its way out.
    for (;;) {
      const busy = [...this.live].filter((s) => !this.pool.includes(s) && !this.reuse?.holds(s));
      if (!busy.length) return;
      // Wait for their teardown to finish (not just for runsc to exit): a resolved promise
      // here would make this loop spin on microtasks and starve the teardown it waits for.
      await Promise.race([Promise.allSettled(busy.map((s) => s.released)), delay(50)]);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.reuse?.close();
    const all = [...this.pool.splice(0), ...this.live];
    await Promise.allSettled(all.map((sb) => sb.destroy()));
    // A `runsc run` that died by a signal (the agent's process group was signalled) leaves
    // its container listed as stopped: sweep so nothing of ours stays behind.
    const left = (await this.runsc(['list', '-quiet'])).stdout
      .split('\n')
      .map((x) => x.trim())
      .filter((x) => x.startsWith(ID_PREFIX));
    await Promise.all(left.map((id) => this.runsc(['delete', '--force', id], 30_000)));
  }
}

/** `runsc version release-20251110.0` or Debian's `runsc version 0.0~20240729.0` → 20251110. */
export function runscBuildDate(versionLine: string): number | null {
  const m = /runsc version (?:release-|0\.0~)?(\d{8})/.exec(versionLine);
  return m ? Number(m[1]) : null;
}

/** What the agent does with a `runsc --version` first line: refuse a known-broken build (with why), warn on an unreadable one. */
export function runscVersionVerdict(versionLine: string): { refuse?: string; warn?: string } {
  const version = versionLine.replace(/^runsc version\s*/, '') || 'unknown';
  const date = runscBuildDate(versionLine);
  if (date === null) return { warn: `cannot tell the runsc build date from "${versionLine}"; builds before ${MIN_RUNSC_DATE} fail \`ls -l\` and \`stat\`` };
  if (date < MIN_RUNSC_DATE) {
    return {
      refuse: `runsc ${version} is too old: builds before ${MIN_RUNSC_DATE} (Debian bookworm's 20221219 among them) fail \`ls -l\` and \`stat\` inside the sandbox (statx AT_NO_AUTOMOUNT is rejected); install a current runsc from gVisor's release channel (see docs/agents.md, "Sandboxes")`,
    };
  }
  return {};
}

export function runscAvailable(): Promise<boolean> {
  return runQuiet('runsc', ['--version'], { env: RUNSC_ENV, timeoutMs: 5000 }).then((r) => r.code === 0);
}
