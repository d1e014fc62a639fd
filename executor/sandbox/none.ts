/**
 * No isolation: a plain spawn in a new process group, as the agent's own user. Only for
 * development machines without gVisor or bubblewrap, and only when asked for explicitly.
 * Kill is best effort: the process group, then any process still holding the job's pipes
 * (which catches setsid/double-fork escapees that kept stdout open). Cgroups, waiting starts,
 * kill and teardown: shell-driver.ts.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readlinkSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { JobCgroup } from './cgroup.ts';
import { killGroup, watchWrapper } from './exec-util.ts';
import { StartShell, startKey } from './start-shell.ts';
import { ShellDriver, ShellSandbox, type JobPlace } from './shell-driver.ts';
import type { DriverOptions, ProcessEnd, ResourceLimits } from './types.ts';
import type { Logger } from '../log.ts';

const NONE_WARNING =
  '!!! --sandbox none: jobs run WITHOUT ISOLATION as this user; they can read the agent token, its files and its environment. Development only. !!!';

export class NoneDriver extends ShellDriver {
  readonly kind = 'none' as const;
  /** Jobs share the host's network: nothing here can hold them to a grant, so jobs with one are refused. */
  readonly enforcesEgress = false;

  constructor(opts: DriverOptions, log: Logger) {
    super(opts, log);
    log.warn(NONE_WARNING);
  }

  describe(): string {
    return 'none (NO ISOLATION)';
  }

  limitMechanisms(): string {
    return this.cgroups
      ? `memory, processes: a cgroup ${this.cgroups} per job; open files, file size, CPU time: rlimits (ulimit in the job's start shell); /tmp: NOT limited (the host's)`
      : "NO memory, /tmp or disk-write limit; processes, open files, file size, CPU time: rlimits (ulimit in the job's start shell)";
  }

  protected startKey(limits: ResourceLimits): string {
    return startKey(this.cgroups, limits);
  }

  /** The job dir is made only when a job needs it (code files, a launcher script): see prepareJobDir. */
  protected newPlace(): JobPlace {
    const id = this.newId('nb');
    return { id, jobDir: join(this.opts.stateDir, 'jobdirs', id) };
  }

  /** A start shell in `cgroup` (its job's script file in the pool's dir). */
  startShell(place: JobPlace, _limits: ResourceLimits, cgroup: JobCgroup | null): StartShell {
    return new StartShell({ cwd: this.opts.root, cgroup, scriptFile: this.shells!.scriptFile(), meta: place });
  }

  protected sandbox(place: JobPlace, limits: ResourceLimits, cgroup: JobCgroup | null, start: StartShell | null): NoneSandbox {
    return new NoneSandbox(this, place, limits, cgroup, start, this.opts.root);
  }
}

class NoneSandbox extends ShellSandbox {
  readonly jobDirInside: string;
  readonly workspaceInside: string;
  private readonly pipeLinks = new Set<string>();
  private jobDirMade = false;

  constructor(driver: NoneDriver, place: JobPlace, limits: ResourceLimits, cgroup: JobCgroup | null, start: StartShell | null, root: string) {
    super(driver, place, limits, cgroup, start);
    this.jobDirInside = place.jobDir;
    this.workspaceInside = root;
  }

  /** The job dir exists from here on (most jobs, a plain exec, never need it: no mkdir, no removal). */
  prepareJobDir(): void {
    if (this.jobDirMade) return;
    mkdirSync(this.jobDirHost, { recursive: true, mode: 0o700 });
    this.jobDirMade = true;
  }

  protected watch(child: ChildProcess): Promise<ProcessEnd> {
    // libuv gives children socketpairs: note the child's own ends (as /proc shows them) so a
    // process that escaped the group but still holds them can be found later.
    if (child.pid) {
      for (const fd of [1, 2]) {
        try {
          this.pipeLinks.add(readlinkSync(`/proc/${child.pid}/fd/${fd}`));
        } catch {
          /* already gone */
        }
      }
    }
    return watchWrapper(child, true);
  }

  protected async stop(graceMs: number): Promise<void> {
    await this.signalGroups(graceMs);
    killPipeHolders(this.pipeLinks);
  }

  protected async endProcesses(): Promise<void> {
    // The group only: the runner already swept pipe holders if the pipes stayed open, and
    // scanning /proc after every job would cost more than the job.
    if (this.procs.size) this.killed = true;
    for (const [pid] of this.procs) killGroup(pid, 'SIGKILL');
  }

  protected async cleanUp(): Promise<void> {
    this.shell?.forget();
    if (this.jobDirMade) await rm(this.jobDirHost, { recursive: true, force: true });
  }
}

/** KILLs every process (but us) with an fd whose /proc link is one of `links` (`socket:[ino]`). */
function killPipeHolders(wanted: Set<string>): void {
  if (!wanted.size) return;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return;
  }
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let link: string;
      try {
        link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      if (wanted.has(link)) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          /* gone */
        }
        break;
      }
    }
  }
}
