/**
 * bubblewrap driver: a fresh user/pid/net/ipc/uts namespace per exec, the allowlisted system
 * dirs read-only, the workspace read-write at /workspace, a private /job dir, tmpfs /tmp,
 * uid 65534, no capabilities, explicit env. Everything else is read-only, as under gVisor: the
 * root bwrap builds (its own tmpfs: /etc, mount points) and /dev are remounted read-only once set
 * up, so a job writes only to the workspace, its job dir and the sized /tmp. Inside the pid
 * namespace bwrap is pid 1, and /proc/1/cmdline and /proc/1/environ are readable: it is started
 * with an empty environment and reads its options (host paths among them) from a pipe
 * (`--args`), so its command line is `/usr/bin/bwrap --args 5 -- /bin/sh -c <the waiting shell>`.
 * --die-with-parent and the pid namespace take every descendant down with it.
 * Limits: a per-job cgroup (memory, processes) when the agent may create one, /tmp as a sized
 * tmpfs, rlimits through the launcher.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { LAUNCHER_FILE } from '../jobs/launcher.ts';
import { ARGS_FD, StartShell, StartShellPool, startKey, waitThenSource } from './start-shell.ts';
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
      ? `memory, processes: a cgroup ${this.cgroups} per job; /tmp: tmpfs --size; open files, file size, CPU time: rlimits (ulimit in the job's start shell); disk writes: write_bytes of the job's processes`
      : 'NO memory limit and no disk-write limit (cgroups need root); processes, open files, file size, CPU time: rlimits (ulimit in the job\'s start shell); /tmp: tmpfs --size';
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
    // Last: the root tmpfs and /dev (both the job user's inside) become read-only once every mount is in place.
    a.push('--remount-ro', '/dev', '--remount-ro', '/');
    return a;
  }

  async acquire(jobId: string, limits: ResourceLimits): Promise<Sandbox> {
    // A sandbox already set up for a job like this one (its own job dir, /tmp and cgroup), or a new job dir now.
    const start = this.shells?.take(startKey(this.cgroups, limits, String(limits.tmpBytes))) ?? null;
    const { id, jobDir } = start?.meta ?? this.newJobDir();
    const cg = start ? start.cgroup : this.cgroupPool ? this.cgroupPool.take(id, limits) : null;
    if (start) cg?.beginJob();
    const sb = new BwrapSandbox(this, id, jobDir, limits, cg, start);
    void jobId;
    this.live.add(sb);
    return sb;
  }

  private newJobDir(): { id: string; jobDir: string } {
    const id = `bw-${this.owner}-${++this.counter}-${randomBytes(3).toString('hex')}`;
    const jobDir = join(this.opts.stateDir, 'jobdirs', id);
    // The user namespace maps the job user to our uid, so the dir is the job's own inside.
    mkdirSync(jobDir, { recursive: true, mode: 0o700 });
    return { id, jobDir };
  }

  /**
   * A start for a job in `jobDir`: a shell that joins `cgroup` and becomes bwrap at once, whose
   * shell inside waits for the job's script (start-shell.ts). bwrap gets an empty environment
   * and its arguments on ARGS_FD (see the file comment) and sets PWD to its --chdir; the script
   * sets the job's own env.
   */
  startShell(meta: { id: string; jobDir: string }, tmpBytes: number, cgroup: JobCgroup | null): StartShell {
    const inside = `${JOB_DIR_INSIDE}/${LAUNCHER_FILE}`;
    // bwrap takes its options from the fd, the command only from its own argv (it holds no host path).
    const options = [...this.baseArgs(meta.jobDir, tmpBytes), '--chdir', '/', '--clearenv'];
    return new StartShell({
      cwd: '/', cgroup, scriptFile: join(meta.jobDir, LAUNCHER_FILE), meta,
      exec: [BWRAP, '--args', String(ARGS_FD), '--', '/bin/sh', '-c', waitThenSource(inside)],
      execInput: Buffer.from(options.map((a) => `${a}\0`).join('')),
    });
  }

  /** A job with `limits` ended by itself: the next one's sandbox is set up now (see start-shell.ts). */
  prepareShell(limits: ResourceLimits): void {
    this.shells?.prepare(startKey(this.cgroups, limits, String(limits.tmpBytes)),
      () => {
        const meta = this.newJobDir();
        return this.startShell(meta, limits.tmpBytes, this.cgroupPool ? this.cgroupPool.take(meta.id, limits) : null);
      },
      (s) => {
        if (s.cgroup) void this.releaseCgroup(s.cgroup, true);
        rmSync(s.meta!.jobDir, { recursive: true, force: true });
      });
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
    await this.shells?.close(async (s) => {
      if (s.cgroup) await this.releaseCgroup(s.cgroup, false);
      rmSync(s.meta!.jobDir, { recursive: true, force: true });
    });
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
  /** The job's start: a sandbox already waiting in the cgroup, or (from launch on) the one that runs it. */
  private shell: StartShell | null;
  private pgid: number | undefined;
  private readonly procs = new Map<number, Promise<unknown>>();
  private destroyed: Promise<void> | null = null;

  constructor(driver: BwrapDriver, id: string, jobDir: string, limits: ResourceLimits, cgroup: JobCgroup | null, shell: StartShell | null) {
    this.driver = driver;
    this.id = id;
    this.jobDirHost = jobDir;
    this.limits = limits; // rlimits are applied by the launcher (ulimit)
    this.cgroup = cgroup;
    this.shell = shell;
  }

  launch(req: LaunchRequest): SandboxProcess {
    // The sandbox that waited for this job, or one set up now: either way its shell sources the
    // job's launcher.
    if (!this.shell?.waiting()) {
      this.shell?.discard();
      this.shell = this.driver.startShell({ id: this.id, jobDir: this.jobDirHost }, this.limits.tmpBytes, this.cgroup);
    }
    const { child, status } = this.shell.go(req.script);
    const ended = watchWrapper(child);
    if (child.pid) {
      const pid = child.pid;
      this.pgid = pid;
      this.procs.set(pid, ended);
      void ended.finally(() => this.procs.delete(pid));
    }
    return { child, ended, status };
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
      if (this.shell?.waiting()) this.shell.discard(); // never launched: its start goes, its cgroup is released below
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
