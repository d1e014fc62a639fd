/**
 * bubblewrap driver: a fresh user/pid/net/ipc/uts namespace per exec, the allowlisted system
 * dirs read-only, the workspace read-write at /workspace, a private /job dir, tmpfs /tmp,
 * uid 65534, no capabilities, explicit env. bwrap itself is started with an empty
 * environment because inside the pid namespace it is pid 1 and /proc/1/environ is readable.
 * --die-with-parent and the pid namespace take every descendant down with it.
 * Limits: a per-job cgroup (memory, processes) when the agent may create one, /tmp as a sized
 * tmpfs, rlimits through the launcher.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { LAUNCHER_FILE, STATUS_FD, sq } from '../jobs/launcher.ts';
import { StartShellPool, shellKey, type StartShell } from './start-shell.ts';
import { CgroupPool, JobCgroup, cgroupOwner, cgroupSupport, groupKillArgv, sweepStaleCgroups, type CgroupVersion } from './cgroup.ts';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { hiddenPaths, systemView } from './system-view.ts';
import { delay, killGroup, runQuiet, watchWrapper } from './exec-util.ts';
import {
  SANDBOX_GID, SANDBOX_UID, type DriverOptions, type LaunchRequest, type ResourceLimits, type Sandbox,
  type SandboxDriver, type SandboxProcess,
} from './types.ts';
import type { Logger } from '../log.ts';

const WORKSPACE_INSIDE = '/workspace';
const JOB_DIR_INSIDE = '/job';

export class BwrapDriver implements SandboxDriver {
  readonly kind = 'bwrap' as const;
  /** Without a cgroup, RLIMIT_NPROC is the only process limit there is. */
  processLimitByRlimit = true;
  private cgroups: CgroupVersion | null = null;
  /** Empty cgroups of jobs that ended by themselves, for the next job with the same limits. */
  private cgroupPool: CgroupPool | null = null;
  private readonly log: Logger;
  private readonly opts: DriverOptions;
  private readonly live = new Set<BwrapSandbox>();
  private counter = 0;
  /** Names this agent's job cgroups (see cgroupOwner). */
  private readonly owner: string;
  /** The next job's start shell, per limits (see start-shell.ts). */
  private shells: StartShellPool | null = null;

  constructor(opts: DriverOptions, log: Logger) {
    this.opts = opts;
    this.log = log;
    this.owner = cgroupOwner(opts.stateDir);
  }

  describe(): string {
    return 'bwrap (bubblewrap, user+pid+net namespaces)';
  }

  limitMechanisms(): string {
    return this.cgroups
      ? `memory, processes: a cgroup ${this.cgroups} per job; /tmp: tmpfs --size; open files, file size, CPU time: rlimits (prlimit); disk writes: write_bytes of the job's processes`
      : 'NO memory limit and no disk-write limit (cgroups need root); processes, open files, file size, CPU time: rlimits (prlimit); /tmp: tmpfs --size';
  }

  async init(): Promise<void> {
    rmSync(join(this.opts.stateDir, 'jobdirs'), { recursive: true, force: true });
    this.cgroups = cgroupSupport();
    this.cgroupPool = this.cgroups ? new CgroupPool(this.cgroups) : null;
    // Job cgroups an earlier run of this agent left when it was killed (and any job still in one).
    const swept = this.cgroups ? await sweepStaleCgroups(this.cgroups, this.owner) : 0;
    if (swept) this.log.warn(`removed ${swept} job cgroups left by an earlier run of this agent (it was killed without cleaning up)`);
    this.processLimitByRlimit = this.cgroups === null;
    if (!this.cgroups) this.log.warn('bwrap: cannot create cgroups here (the agent is not root?): jobs get no memory limit and no disk-write limit, only rlimits');
    // Prove it works here (unprivileged user namespaces may be disabled).
    const r = await runQuiet(BWRAP, [...this.baseArgs(null), '--chdir', '/', '--', '/bin/true'], { env: {}, timeoutMs: 10_000 });
    if (r.code !== 0) throw new Error(`bwrap does not work here: ${(r.stderr || r.error || '').trim()}`);
    this.shells = new StartShellPool(this.opts.stateDir);
  }

  baseArgs(jobDir: string | null, tmpBytes = 0): string[] {
    const a = ['--unshare-all', '--die-with-parent', '--new-session', '--uid', String(SANDBOX_UID), '--gid', String(SANDBOX_GID), '--cap-drop', 'ALL'];
    for (const e of systemView()) {
      if (e.kind === 'symlink') a.push('--symlink', e.target!, e.path);
      else a.push('--ro-bind', e.path, e.path);
    }
    for (const h of hiddenPaths()) {
      if (h.kind === 'dir') a.push('--perms', '0755', '--tmpfs', h.path, '--remount-ro', h.path);
      else a.push('--ro-bind', '/dev/null', h.path);
    }
    a.push('--bind', this.opts.root, WORKSPACE_INSIDE);
    if (jobDir) a.push('--bind', jobDir, JOB_DIR_INSIDE);
    if (tmpBytes) a.push('--size', String(tmpBytes));
    a.push('--perms', '1777', '--tmpfs', '/tmp', '--proc', '/proc', '--dev', '/dev', '--hostname', 'sandbox');
    return a;
  }

  async acquire(jobId: string, limits: ResourceLimits): Promise<Sandbox> {
    const id = `bw-${this.owner}-${++this.counter}-${randomBytes(3).toString('hex')}`;
    const jobDir = join(this.opts.stateDir, 'jobdirs', id);
    mkdirSync(jobDir, { recursive: true, mode: 0o700 });
    // The user namespace maps the job user to our uid, so the dir is the job's own inside.
    const shell = this.shells?.take(shellKey(this.cgroups, limits)) ?? null;
    const cg = shell ? shell.cgroup : this.cgroupPool ? this.cgroupPool.take(id, limits) : null;
    if (shell) cg?.beginJob();
    const sb = new BwrapSandbox(this, id, jobDir, limits, cg, shell);
    void jobId;
    this.live.add(sb);
    return sb;
  }

  /** A job with `limits` ended by itself: the next one's shell starts now (see start-shell.ts). */
  prepareShell(limits: ResourceLimits): void {
    this.shells?.prepare(shellKey(this.cgroups, limits), '/',
      () => (this.cgroupPool ? this.cgroupPool.take(`bw-${this.owner}-${++this.counter}-${randomBytes(3).toString('hex')}`, limits) : null),
      (cg) => void this.releaseCgroup(cg, true));
  }

  forget(sb: BwrapSandbox): void {
    this.live.delete(sb);
  }

  async idle(): Promise<void> {}

  /** A job's cgroup back: see CgroupPool (`clean`: its job was never killed). */
  async releaseCgroup(cg: JobCgroup, clean: boolean): Promise<void> {
    if (this.cgroupPool) await this.cgroupPool.give(cg, clean);
    else await cg.remove();
  }

  async close(): Promise<void> {
    await this.shells?.close((cg) => this.releaseCgroup(cg, false));
    await Promise.allSettled([...this.live].map((s) => s.destroy()));
    await this.cgroupPool?.close();
  }
}

class BwrapSandbox implements Sandbox {
  readonly id: string;
  readonly jobDirHost: string;
  readonly jobDirInside = JOB_DIR_INSIDE;
  readonly workspaceInside = WORKSPACE_INSIDE;
  private readonly driver: BwrapDriver;
  private readonly limits: ResourceLimits;
  private readonly cgroup: JobCgroup | null;
  /** A start shell already in the cgroup, waiting for this job (else one is spawned at launch). */
  private readonly shell: StartShell | null;
  private pgid: number | undefined;
  private readonly procs = new Map<number, Promise<unknown>>();
  private destroyed: Promise<void> | null = null;

  constructor(driver: BwrapDriver, id: string, jobDir: string, limits: ResourceLimits, cgroup: JobCgroup | null, shell: StartShell | null) {
    this.driver = driver;
    this.id = id;
    this.jobDirHost = jobDir;
    this.limits = limits; // rlimits are applied by the launcher (prlimit)
    this.cgroup = cgroup;
    this.shell = shell;
  }

  launch(req: LaunchRequest): SandboxProcess {
    const args = [...this.driver.baseArgs(this.jobDirHost, this.limits.tmpBytes)];
    if (req.direct) {
      args.push('--chdir', req.direct.cwd, '--clearenv');
      for (const [k, v] of Object.entries(req.direct.env)) args.push('--setenv', k, v);
      args.push('--', ...(req.direct.rlimitPrefix ?? []), ...req.direct.argv);
    } else {
      writeFileSync(join(this.jobDirHost, LAUNCHER_FILE), req.script, { mode: 0o644 });
      args.push('--chdir', WORKSPACE_INSIDE, '--clearenv', '--', '/bin/sh', `${JOB_DIR_INSIDE}/${LAUNCHER_FILE}`);
    }
    // Own process group, empty environment (see the file comment); joins the job's cgroup first.
    let child: ChildProcess;
    if (this.shell?.waiting()) {
      // Already in the cgroup: the shell execs bwrap (with an empty environment, as below).
      this.shell.go(`${req.direct ? `exec ${STATUS_FD}>&-\n` : ''}exec ${[BWRAP, ...args].map(sq).join(' ')}\n`);
      child = this.shell.child;
      if (req.direct) (child.stdio[STATUS_FD] as Readable).destroy();
    } else {
      const argv = this.cgroup ? this.cgroup.wrap([BWRAP, ...args]) : [BWRAP, ...args];
      child = spawn(argv[0], argv.slice(1), { env: {}, detached: true, stdio: ['pipe', 'pipe', 'pipe', req.direct ? 'ignore' : 'pipe'] });
    }
    const ended = watchWrapper(child);
    if (child.pid) {
      const pid = child.pid;
      this.pgid = pid;
      this.procs.set(pid, ended);
      void ended.finally(() => this.procs.delete(pid));
    }
    return { child, ended, status: req.direct ? null : (child.stdio[STATUS_FD] as Readable) };
  }

  hostKillArgv(): string[] | null {
    // The process group (bwrap is pid 1 of the job's namespace: its death ends them all), and the cgroup.
    return groupKillArgv(this.pgid, this.cgroup);
  }

  /** Only the job's own processes are ever in its cgroup (a pooled one is handed on empty). */
  readonly hostPidsStartWithJob = true;

  hostPids(): number[] {
    return this.cgroup?.pids() ?? [];
  }

  memoryLimitHit(): boolean {
    return this.cgroup?.oomKilled() ?? false;
  }

  async kill(graceMs: number): Promise<void> {
    this.killed = true;
    await this.killNow(graceMs);
  }

  /** Set once anything asked to kill the job: its cgroup is then never pooled. */
  private killed = false;

  private async killNow(graceMs: number): Promise<void> {
    const live = [...this.procs.entries()];
    if (!live.length) return;
    if (graceMs > 0) {
      for (const [pid] of live) killGroup(pid, 'SIGTERM');
      await Promise.race([Promise.all(live.map(([, p]) => p)), delay(graceMs)]);
    }
    // bwrap is pid 1 of the job's pid namespace: when it dies the kernel kills everything inside.
    for (const [pid] of live) killGroup(pid, 'SIGKILL');
    this.cgroup?.killAll();
    await Promise.race([Promise.all(live.map(([, p]) => p)), delay(2000)]);
  }

  destroy(): Promise<void> {
    this.destroyed ??= (async () => {
      await this.killNow(0);
      if (this.shell?.waiting()) this.shell.discard(); // never launched: its shell goes, its cgroup is released below
      this.shell?.forget();
      if (this.cgroup) await this.driver.releaseCgroup(this.cgroup, !this.killed);
      if (!this.killed) this.driver.prepareShell(this.limits);
      this.driver.forget(this);
      await rm(this.jobDirHost, { recursive: true, force: true });
    })();
    return this.destroyed;
  }
}

const BWRAP = '/usr/bin/bwrap';

export function bwrapAvailable(): Promise<boolean> {
  return runQuiet(BWRAP, ['--version'], { env: { PATH: '/usr/bin:/bin' }, timeoutMs: 5000 }).then((r) => r.code === 0);
}
