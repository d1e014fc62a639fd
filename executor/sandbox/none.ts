/**
 * No isolation: a plain spawn in a new process group, as the agent's own user. Only for
 * development machines without gVisor or bubblewrap, and only when asked for explicitly.
 * Kill is best effort: the process group, then any process still holding the job's pipes
 * (which catches setsid/double-fork escapees that kept stdout open).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { CgroupPool, JobCgroup, cgroupOwner, cgroupSupport, groupKillArgv, sweepStaleCgroups, type CgroupVersion } from './cgroup.ts';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { delay, killGroup, watchWrapper } from './exec-util.ts';
import { StartShell, StartShellPool, startKey } from './start-shell.ts';
import type { DriverOptions, LaunchRequest, ResourceLimits, Sandbox, SandboxDriver, SandboxProcess } from './types.ts';
import type { Logger } from '../log.ts';

export const NONE_WARNING =
  '!!! --sandbox none: jobs run WITHOUT ISOLATION as this user; they can read the agent token, its files and its environment. Development only. !!!';

export class NoneDriver implements SandboxDriver {
  readonly kind = 'none' as const;
  processLimitByRlimit = true;
  private cgroups: CgroupVersion | null = null;
  /** Empty cgroups of jobs that ended by themselves, for the next job with the same limits. */
  private cgroupPool: CgroupPool | null = null;
  private readonly opts: DriverOptions;
  private readonly log: Logger;
  private readonly live = new Set<NoneSandbox>();
  private counter = 0;
  /** Names this agent's job cgroups (see cgroupOwner). */
  private readonly owner: string;
  /** The next job's start shell, per limits (see start-shell.ts). */
  private shells: StartShellPool | null = null;

  constructor(opts: DriverOptions, log: Logger) {
    this.opts = opts;
    this.log = log;
    this.owner = cgroupOwner(opts.stateDir);
    log.warn(NONE_WARNING);
  }

  describe(): string {
    return 'none (NO ISOLATION)';
  }

  limitMechanisms(): string {
    return this.cgroups
      ? `memory, processes: a cgroup ${this.cgroups} per job; open files, file size, CPU time: rlimits (ulimit in the job's start shell); /tmp: NOT limited (the host's)`
      : 'NO memory, /tmp or disk-write limit; processes, open files, file size, CPU time: rlimits (ulimit in the job\'s start shell)';
  }

  async init(): Promise<void> {
    rmSync(join(this.opts.stateDir, 'jobdirs'), { recursive: true, force: true });
    this.cgroups = cgroupSupport();
    this.cgroupPool = this.cgroups ? new CgroupPool(this.cgroups) : null;
    // Job cgroups an earlier run of this agent left when it was killed (and any job still in one).
    const swept = this.cgroups ? await sweepStaleCgroups(this.cgroups, this.owner) : 0;
    if (swept) this.log.warn(`removed ${swept} job cgroups left by an earlier run of this agent (it was killed without cleaning up)`);
    this.processLimitByRlimit = this.cgroups === null;
    this.shells = new StartShellPool(this.opts.stateDir);
  }

  async acquire(_jobId: string, limits: ResourceLimits): Promise<Sandbox> {
    const id = `nb-${this.owner}-${++this.counter}-${randomBytes(3).toString('hex')}`;
    // Created only when a job needs it (code files, a launcher script): see prepareJobDir.
    const jobDir = join(this.opts.stateDir, 'jobdirs', id);
    const shell = this.shells?.take(startKey(this.cgroups, limits)) ?? null;
    const cg = shell ? shell.cgroup : this.cgroupPool ? this.cgroupPool.take(id, limits) : null;
    if (shell) cg?.beginJob();
    const sb = new NoneSandbox(this, this.opts.root, id, jobDir, limits, cg, shell);
    this.live.add(sb);
    return sb;
  }

  /** A start shell in `cgroup` (its job's script file in the pool's dir). */
  startShell(cgroup: JobCgroup | null): StartShell {
    return new StartShell({ cwd: this.opts.root, cgroup, scriptFile: this.shells!.scriptFile() });
  }

  /** A job with `limits` ended by itself: the next one's start shell is spawned now (see start-shell.ts). */
  prepareShell(limits: ResourceLimits): void {
    this.shells?.prepare(startKey(this.cgroups, limits),
      () => this.startShell(this.cgroupPool ? this.cgroupPool.take(`nb-${this.owner}-${++this.counter}-${randomBytes(3).toString('hex')}`, limits) : null),
      (s) => { if (s.cgroup) void this.releaseCgroup(s.cgroup, true); });
  }

  forget(sb: NoneSandbox): void {
    this.live.delete(sb);
  }

  async idle(): Promise<void> {}

  /** A job's cgroup back: see CgroupPool (`clean`: its job was never killed). */
  async releaseCgroup(cg: JobCgroup, clean: boolean): Promise<void> {
    if (this.cgroupPool) await this.cgroupPool.give(cg, clean);
    else await cg.remove();
  }

  async close(): Promise<void> {
    await this.shells?.close(async (s) => { if (s.cgroup) await this.releaseCgroup(s.cgroup, false); });
    await Promise.allSettled([...this.live].map((s) => s.destroy()));
    await this.cgroupPool?.close();
  }
}

class NoneSandbox implements Sandbox {
  readonly id: string;
  readonly jobDirHost: string;
  readonly jobDirInside: string;
  readonly workspaceInside: string;
  private readonly driver: NoneDriver;
  private readonly cgroup: JobCgroup | null;
  private readonly limits: ResourceLimits;
  /** The job's start shell: one already waiting in the cgroup, or (from launch on) the one that runs it. */
  private shell: StartShell | null;
  private readonly procs = new Map<ChildProcess, Promise<unknown>>();
  private readonly pipeLinks = new Set<string>();
  private destroyed: Promise<void> | null = null;

  constructor(driver: NoneDriver, root: string, id: string, jobDir: string, limits: ResourceLimits, cgroup: JobCgroup | null, shell: StartShell | null) {
    this.cgroup = cgroup;
    this.limits = limits;
    this.shell = shell;
    this.driver = driver;
    this.id = id;
    this.jobDirHost = jobDir;
    this.jobDirInside = jobDir;
    this.workspaceInside = root;
  }

  private jobDirMade = false;

  /** The job dir exists from here on (most jobs, a plain exec, never need it: no mkdir, no removal). */
  prepareJobDir(): void {
    if (this.jobDirMade) return;
    mkdirSync(this.jobDirHost, { recursive: true, mode: 0o700 });
    this.jobDirMade = true;
  }

  launch(req: LaunchRequest): SandboxProcess {
    // The start shell that waited in the cgroup, or one spawned now: either way it sources the
    // job's launcher (the shell started with an empty environment).
    if (!this.shell?.waiting()) {
      this.shell?.discard();
      this.shell = this.driver.startShell(this.cgroup);
    }
    const { child, status } = this.shell.go(req.script);
    // libuv gives children socketpairs: note the child's own ends (as /proc shows them) so a
    // process that escaped the group but still holds them can be found later.
    if (child.pid) {
      for (const fd of [1, 2]) {
        try { this.pipeLinks.add(readlinkSync(`/proc/${child.pid}/fd/${fd}`)); } catch { /* already gone */ }
      }
    }
    const ended = watchWrapper(child, true);
    this.procs.set(child, ended);
    this.pgid = child.pid;
    void ended.finally(() => this.procs.delete(child));
    return { child, ended, status };
  }

  private pgid: number | undefined;

  hostKillArgv(): string[] | null {
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

  /** Set once anything asked to kill the job: its cgroup is then never pooled. */
  private killed = false;

  async kill(graceMs: number): Promise<void> {
    this.killed = true;
    const live = [...this.procs.entries()];
    if (graceMs > 0 && live.length) {
      for (const [c] of live) killGroup(c.pid, 'SIGTERM');
      await Promise.race([Promise.all(live.map(([, p]) => p)), delay(graceMs)]);
    }
    for (const [c] of live) killGroup(c.pid, 'SIGKILL');
    this.cgroup?.killAll();
    killPipeHolders(this.pipeLinks);
  }

  destroy(): Promise<void> {
    this.destroyed ??= (async () => {
      // The group only: the runner already swept pipe holders if the pipes stayed open, and
      // scanning /proc after every job would cost more than the job.
      if (this.procs.size) this.killed = true;
      for (const [c] of this.procs) killGroup(c.pid, 'SIGKILL');
      if (this.shell?.waiting()) this.shell.discard(); // never launched: its shell goes, its cgroup is released below
      this.shell?.forget();
      if (this.cgroup) await this.driver.releaseCgroup(this.cgroup, !this.killed);
      if (!this.killed) this.driver.prepareShell(this.limits);
      this.driver.forget(this);
      if (this.jobDirMade) await rm(this.jobDirHost, { recursive: true, force: true });
    })();
    return this.destroyed;
  }
}

/** KILLs every process (but us) with an fd whose /proc link is one of `links` (`socket:[ino]`). */
export function killPipeHolders(wanted: Set<string>): void {
  if (!wanted.size) return;
  let pids: string[];
  try { pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p)); } catch { return; }
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue;
    let fds: string[];
    try { fds = readdirSync(`/proc/${pid}/fd`); } catch { continue; }
    for (const fd of fds) {
      let link: string;
      try { link = readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { continue; }
      if (wanted.has(link)) {
        try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
        break;
      }
    }
  }
}
