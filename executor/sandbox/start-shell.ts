/**
 * How the bwrap and none drivers start a job: a start shell, spawned before the job arrives when
 * it can be. A job's first process has to join the job's cgroup, and that write is slow after an
 * idle moment: 0.05 ms back to back, 7 ms after 200 ms without one, 13–18 ms after 1 s (cgroup
 * v1 here). So when a job ends cleanly the driver spawns the next job's start at once — it joins
 * a pooled cgroup while the previous job's join is still recent — and it waits on its control fd:
 * sandbox none, as the shell itself; bwrap, as a shell inside a sandbox already set up (the shell
 * execs bwrap at once). The job then costs a file write and one byte: the waiting shell sources
 * the job's script (cd, env, rlimits, `exec` of the job). Without a waiting start the driver
 * spawns one at the job's launch and starts it at once: one path either way.
 *
 * The start holds the job's stdio (0-2) and status pipe (3) from its spawn; the control fd (4) is
 * closed before the launcher runs, and the launcher closes 3 before the job's run step. It begins
 * in bash, which closes every other descriptor (what the agent itself inherited: see
 * exec-util.ts closingShell) and then becomes, with an empty environment, the waiting
 * `sh` or bwrap: a job starts with 0-2 and nothing else. Nothing of one job reaches another's
 * start: a start serves one job, and its cgroup was pooled empty from a job that ended by itself
 * (CgroupPool); bwrap's sandbox, /tmp and job dir are its own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { STATUS_FD, cgroupJoinLines, sq } from '../jobs/launcher.ts';
import { closingShell, killGroup } from './exec-util.ts';
import type { JobCgroup } from './cgroup.ts';

/** The start's fd on which one line starts its job. */
const CONTROL_FD = 4;
/** The start's fd from which the program it becomes reads its arguments (`execInput`: bwrap --args). */
export const ARGS_FD = 5;
/** Starts kept waiting at once (one per key): each is an idle `sh` (and bwrap) holding a pooled cgroup. */
const MAX_WAITING_STARTS = 4;

/** Shell text that waits for the go line on CONTROL_FD, closes it, then sources `file` (a shell word). */
export function waitThenSource(file: string): string {
  return `read -r gh_go <&${CONTROL_FD} || exit 125\nexec ${CONTROL_FD}<&-\n. ${file}\n`;
}

export interface StartOptions {
  cwd: string;
  cgroup: JobCgroup | null;
  /** Where the job's script goes: the waiting shell sources it. */
  scriptFile: string;
  /** A program the start shell becomes at once (bwrap), which waits and sources `scriptFile` itself. */
  exec?: string[];
  /**
   * What that program reads from ARGS_FD (bwrap's options, NUL-separated: `bwrap --args 5 -- …`),
   * so they are in no process's command line — bwrap is pid 1 inside and `/proc/1/cmdline` is readable.
   */
  execInput?: Buffer;
  /** The driver's own: what this start was made for (bwrap: its sandbox id and job dir). */
  meta?: { id: string; jobDir: string };
}

export class StartShell {
  readonly child: ChildProcess;
  readonly cgroup: JobCgroup | null;
  readonly meta: { id: string; jobDir: string } | null;
  private readonly scriptFile: string;
  private started = false;

  constructor(o: StartOptions) {
    this.cgroup = o.cgroup;
    this.meta = o.meta ?? null;
    this.scriptFile = o.scriptFile;
    // 125: the descriptors could not be closed, the cgroup join failed (or no go line came); the
    // job never starts in this shell then. `exec -c`: bash's PWD and SHLVL stay behind.
    const keep = o.execInput ? ARGS_FD : CONTROL_FD;
    const then = o.exec ? `exec -c ${o.exec.map(sq).join(' ')}\n` : `exec -c /bin/sh -c ${sq(waitThenSource('"$1"'))} gatehouse-start "$1"\n`;
    const [file, args] = closingShell(keep, cgroupJoinLines(o.cgroup) + then, ['gatehouse-start', o.scriptFile]);
    this.child = spawn(file, args, {
      cwd: o.cwd,
      env: {},
      detached: true,
      stdio: Array.from({ length: keep + 1 }, () => 'pipe' as const),
    });
    // A start that dies while waiting (killed from outside) is simply not used.
    this.child.once('error', () => {});
    // The control socket only carries our one line: a shell killed before reading it resets it
    // (ECONNRESET), which says nothing the child's exit does not. The same for the arguments.
    (this.child.stdio[CONTROL_FD] as Writable).on('error', () => {});
    if (o.execInput) {
      const input = (this.child.stdio as (Writable | Readable | null | undefined)[])[ARGS_FD] as Writable;
      input.on('error', () => {});
      input.end(o.execInput);
    }
  }

  /** Still waiting for its job (spawned, not exited, not used). */
  waiting(): boolean {
    return !this.started && this.child.pid !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the job: `script` (its launcher) runs in the waiting shell, already in its cgroup, stdio and status pipe attached. */
  go(script: string): { child: ChildProcess; status: Readable } {
    this.started = true;
    writeFileSync(this.scriptFile, script, { mode: 0o644 });
    (this.child.stdio[CONTROL_FD] as Writable).end('\n');
    return { child: this.child, status: this.child.stdio[STATUS_FD] as Readable };
  }

  /** Its script file is no longer needed (the job ended, or the start was never used). */
  forget(): void {
    rmSync(this.scriptFile, { force: true });
  }

  /** Kills an unused start; its cgroup and files are the caller's to release. */
  discard(): void {
    killGroup(this.child.pid, 'SIGKILL');
    // Nobody reads an unused start's stdio: let go of our ends.
    for (const s of this.child.stdio) s?.destroy();
    this.forget();
  }
}

/** Waiting starts, one per key (the job's cgroup limits, and bwrap's /tmp size). */
export class StartShellPool {
  private readonly waitingStarts = new Map<string, StartShell>();
  /** Where none's scripts go (bwrap's go into the job dir). */
  readonly dir: string;
  private counter = 0;
  private closed = false;

  constructor(stateDir: string) {
    this.dir = join(stateDir, 'starts');
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  /** A fresh script file name in `dir`. */
  scriptFile(): string {
    return join(this.dir, `${process.pid}-${++this.counter}.sh`);
  }

  /** The waiting start for `key`, if there is one that still waits. */
  take(key: string): StartShell | null {
    const s = this.waitingStarts.get(key);
    if (!s) return null;
    this.waitingStarts.delete(key);
    if (s.waiting()) return s;
    s.discard();
    return null;
  }

  /**
   * Makes a start for the next job with `key` (`make`), unless one waits already or too many do.
   * `release` gets back what `make` took (its cgroup, files) when the start is dropped unused.
   */
  prepare(key: string, make: () => StartShell, release: (s: StartShell) => void): void {
    if (this.closed || this.waitingStarts.has(key) || this.waitingStarts.size >= MAX_WAITING_STARTS) return;
    const s = make();
    if (!s.child.pid) {
      s.discard();
      release(s);
      return;
    }
    this.waitingStarts.set(key, s);
    // Died while waiting: what it held goes back (a cgroup only if empty: CgroupPool checks).
    s.child.once('exit', () => {
      if (this.waitingStarts.get(key) !== s) return;
      this.waitingStarts.delete(key);
      s.forget();
      release(s);
    });
  }

  /** Kills every waiting start and hands each to `release` once it has exited. */
  close(release: (s: StartShell) => Promise<void>): Promise<unknown> {
    this.closed = true;
    const starts = [...this.waitingStarts.values()];
    this.waitingStarts.clear();
    return Promise.allSettled(
      starts.map(async (s) => {
        s.discard();
        await new Promise<void>((r) => (s.child.exitCode !== null || s.child.signalCode !== null ? r() : s.child.once('exit', () => r())));
        await release(s);
      }),
    );
  }
}

/** Which waiting start a job can take: one whose cgroup has the job's limits (any, without cgroups), plus `extra` (bwrap: /tmp size). */
export function startKey(cgroups: unknown, limits: { memoryBytes: number; maxProcesses: number }, extra = ''): string {
  return `${cgroups ? `${limits.memoryBytes}/${limits.maxProcesses}` : ''}|${extra}`;
}
