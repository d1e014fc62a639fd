/**
 * What the bubblewrap and none drivers share: a job is a start shell (start-shell.ts) that leads
 * its own process group, in a per-job cgroup where the agent may create one (cgroup.ts; emptied
 * cgroups are pooled for the next job with the same limits). Here: the cgroups, the waiting
 * starts, kill and teardown. A driver (bwrap.ts, none.ts) says how its start is made, which
 * waiting start a job may take, and what else a job leaves to clean up.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { CgroupPool, type JobCgroup, cgroupOwner, cgroupSupport, groupKillArgv, sweepStaleCgroups, type CgroupVersion } from './cgroup.ts';
import { delay, killGroup } from './exec-util.ts';
import { type StartShell, StartShellPool } from './start-shell.ts';
import type { DriverOptions, LaunchRequest, ProcessEnd, ResourceLimits, Sandbox, SandboxDriver, SandboxProcess } from './types.ts';
import type { SandboxKind } from '../../src/contracts/agent-protocol.ts';
import type { Logger } from '../log.ts';

/** A job's sandbox id (it also names the job's cgroup) and its job dir on the host. */
export interface JobPlace {
  id: string;
  jobDir: string;
}

export abstract class ShellDriver implements SandboxDriver {
  abstract readonly kind: SandboxKind;
  /** Without a cgroup, RLIMIT_NPROC is the only process limit there is. */
  processLimitByRlimit = true;
  protected cgroups: CgroupVersion | null = null;
  /** Empty cgroups of jobs that ended by themselves, for the next job with the same limits. */
  private cgroupPool: CgroupPool | null = null;
  protected readonly opts: DriverOptions;
  protected readonly log: Logger;
  private readonly live = new Set<ShellSandbox>();
  /** Sandboxes being torn down (the runner does not wait for a teardown; idle() does). */
  private readonly teardowns = new Set<Promise<void>>();
  private counter = 0;
  /** Names this agent's job cgroups (see cgroupOwner). */
  private readonly owner: string;
  /** The next job's start, per key (see start-shell.ts). */
  protected shells: StartShellPool | null = null;

  constructor(opts: DriverOptions, log: Logger) {
    this.opts = opts;
    this.log = log;
    this.owner = cgroupOwner(opts.stateDir);
  }

  abstract describe(): string;
  abstract limitMechanisms(): string;
  /** Which waiting start a job with `limits` may take (see startKey in start-shell.ts). */
  protected abstract startKey(limits: ResourceLimits): string;
  /** A new sandbox's id and job dir. */
  protected abstract newPlace(): JobPlace;
  /** A start for a job in `place`, in `cgroup`. */
  abstract startShell(place: JobPlace, limits: ResourceLimits, cgroup: JobCgroup | null): StartShell;
  /** The driver's sandbox around a start (`start`: one that waited for this job). */
  protected abstract sandbox(place: JobPlace, limits: ResourceLimits, cgroup: JobCgroup | null, start: StartShell | null): ShellSandbox;
  /** What an unused start held besides its cgroup (bwrap: its job dir) goes. */
  protected dropStart(_start: StartShell): void {}
  /** The driver's own start-up check, once the cgroups are known (bwrap: that bwrap works here). */
  protected async check(): Promise<void> {}

  protected newId(prefix: string): string {
    return `${prefix}-${this.owner}-${++this.counter}-${randomBytes(3).toString('hex')}`;
  }

  async init(): Promise<void> {
    rmSync(join(this.opts.stateDir, 'jobdirs'), { recursive: true, force: true });
    this.cgroups = cgroupSupport();
    this.cgroupPool = this.cgroups ? new CgroupPool(this.cgroups) : null;
    // Job cgroups an earlier run of this agent left when it was killed (and any job still in one).
    const swept = this.cgroups ? await sweepStaleCgroups(this.cgroups, this.owner) : 0;
    if (swept) this.log.warn(`removed ${swept} job cgroups left by an earlier run of this agent (it was killed without cleaning up)`);
    this.processLimitByRlimit = this.cgroups === null;
    await this.check();
    this.shells = new StartShellPool(this.opts.stateDir);
  }

  async acquire(_jobId: string, limits: ResourceLimits): Promise<Sandbox> {
    // A start already waiting for a job like this one (in a pooled cgroup), or a new place now.
    const start = this.shells?.take(this.startKey(limits)) ?? null;
    const place = start?.meta ?? this.newPlace();
    const cgroup = start ? start.cgroup : this.takeCgroup(place.id, limits);
    if (start) cgroup?.beginJob();
    const sb = this.sandbox(place, limits, cgroup, start);
    this.live.add(sb);
    return sb;
  }

  private takeCgroup(id: string, limits: ResourceLimits): JobCgroup | null {
    return this.cgroupPool ? this.cgroupPool.take(id, limits) : null;
  }

  /** A job with `limits` ended by itself: the next one's start is made now (see start-shell.ts). */
  prepareShell(limits: ResourceLimits): void {
    this.shells?.prepare(
      this.startKey(limits),
      () => {
        const place = this.newPlace();
        return this.startShell(place, limits, this.takeCgroup(place.id, limits));
      },
      (s) => {
        if (s.cgroup) void this.releaseCgroup(s.cgroup, true);
        this.dropStart(s);
      },
    );
  }

  forget(sb: ShellSandbox): void {
    this.live.delete(sb);
  }

  /** A sandbox's teardown began: idle() waits for `done`. */
  tearingDown(done: Promise<void>): void {
    this.teardowns.add(done);
    const over = () => this.teardowns.delete(done);
    void done.then(over, over);
  }

  async idle(): Promise<void> {
    while (this.teardowns.size) await Promise.allSettled([...this.teardowns]);
  }

  /** A job's cgroup back: see CgroupPool (`clean`: its job was never killed). */
  async releaseCgroup(cg: JobCgroup, clean: boolean): Promise<void> {
    if (this.cgroupPool) await this.cgroupPool.give(cg, clean);
    else await cg.remove();
  }

  async close(): Promise<void> {
    await this.shells?.close(async (s) => {
      if (s.cgroup) await this.releaseCgroup(s.cgroup, false);
      this.dropStart(s);
    });
    await Promise.allSettled([...this.live].map((s) => s.destroy()));
    await this.cgroupPool?.close();
  }
}

export abstract class ShellSandbox implements Sandbox {
  readonly id: string;
  readonly jobDirHost: string;
  abstract readonly jobDirInside: string;
  abstract readonly workspaceInside: string;
  protected readonly driver: ShellDriver;
  protected readonly limits: ResourceLimits;
  protected readonly cgroup: JobCgroup | null;
  /** The job's start: one already waiting in the cgroup, or (from launch on) the one that runs it. */
  protected shell: StartShell | null;
  /** The job's start (the leader of its process group) by pid, until it ends. */
  protected readonly procs = new Map<number, Promise<ProcessEnd>>();
  private pgid: number | undefined;
  /** Set once anything asked to kill the job: its cgroup is then never pooled. */
  protected killed = false;
  private destroyed: Promise<void> | null = null;

  constructor(driver: ShellDriver, place: JobPlace, limits: ResourceLimits, cgroup: JobCgroup | null, start: StartShell | null) {
    this.driver = driver;
    this.id = place.id;
    this.jobDirHost = place.jobDir;
    this.limits = limits; // rlimits are applied by the launcher (ulimit)
    this.cgroup = cgroup;
    this.shell = start;
  }

  /** How the job's start ends, as the driver can tell (watchWrapper). */
  protected abstract watch(child: ChildProcess): Promise<ProcessEnd>;
  /** Ends the job's processes: TERM, `graceMs`, then KILL (see signalGroups). */
  protected abstract stop(graceMs: number): Promise<void>;
  /** At teardown: ends what still runs of the job. */
  protected abstract endProcesses(): Promise<void>;
  /** At teardown, last: removes the driver's files of the job. */
  protected abstract cleanUp(): Promise<void>;

  launch(req: LaunchRequest): SandboxProcess {
    // The start that waited for this job, or one made now: either way its shell sources the
    // job's launcher (it started with an empty environment).
    if (!this.shell?.waiting()) {
      this.shell?.discard();
      this.shell = this.driver.startShell({ id: this.id, jobDir: this.jobDirHost }, this.limits, this.cgroup);
    }
    const { child, status } = this.shell.go(req.script);
    const ended = this.watch(child);
    if (child.pid) {
      const pid = child.pid;
      this.pgid = pid;
      this.procs.set(pid, ended);
      void ended.finally(() => this.procs.delete(pid));
    }
    return { child, ended, status };
  }

  hostKillArgv(): string[] | null {
    // The process group and the cgroup.
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
    await this.stop(graceMs);
  }

  /** TERM to every process group of the job, up to `graceMs` for them to end, then KILL to them and the cgroup. */
  protected async signalGroups(graceMs: number): Promise<void> {
    const live = [...this.procs.entries()];
    if (graceMs > 0 && live.length) {
      for (const [pid] of live) killGroup(pid, 'SIGTERM');
      await Promise.race([Promise.all(live.map(([, p]) => p)), delay(graceMs)]);
    }
    for (const [pid] of live) killGroup(pid, 'SIGKILL');
    this.cgroup?.killAll();
  }

  destroy(): Promise<void> {
    if (this.destroyed) return this.destroyed;
    this.destroyed = (async () => {
      await this.endProcesses();
      if (this.shell?.waiting()) this.shell.discard(); // never launched: its start goes, its cgroup is released below
      if (this.cgroup) await this.driver.releaseCgroup(this.cgroup, !this.killed);
      if (!this.killed) this.driver.prepareShell(this.limits);
      this.driver.forget(this);
      await this.cleanUp();
    })();
    this.driver.tearingDown(this.destroyed);
    return this.destroyed;
  }
}
