/**
 * Start shells spawned before their job arrives (bwrap and none drivers). A job's first
 * process has to join the job's cgroup, and that write is slow after an idle moment: 0.05 ms
 * back to back, 7 ms after 200 ms without one, 13–18 ms after 1 s (cgroup v1 here). So when a
 * job ends cleanly the driver spawns the next job's shell at once — it joins a pooled cgroup
 * while the previous job's join is still recent — and the shell waits on its control fd. The
 * job then costs a file write and one byte: the shell sources the script the driver wrote
 * (cd, env, rlimits, `exec` of the job or of bwrap) and is replaced by it. The fork and exec of
 * the shell leave the job's path too.
 *
 * The shell holds the job's stdio (0-2) and status pipe (3) from its spawn; the control fd (4)
 * is closed before the script runs, and the script closes 3 when the job has no build step.
 * Nothing of one job reaches another's shell: a shell serves one job, and its cgroup was
 * pooled empty from a job that ended by itself (CgroupPool).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { cgroupJoinLines } from '../jobs/launcher.ts';
import { killGroup } from './exec-util.ts';
import type { JobCgroup } from './cgroup.ts';

/** The shell's fd on which one line starts its job. */
export const CONTROL_FD = 4;
/** Shells kept waiting at once (one per limits key): each is an idle `sh` holding a pooled cgroup. */
export const MAX_WAITING_SHELLS = 4;

export class StartShell {
  readonly child: ChildProcess;
  readonly cgroup: JobCgroup | null;
  private readonly scriptFile: string;
  private started = false;

  constructor(o: { cwd: string; cgroup: JobCgroup | null; scriptFile: string }) {
    this.cgroup = o.cgroup;
    this.scriptFile = o.scriptFile;
    // 125: the cgroup join failed (as for a direct start); the job never starts in this shell then.
    const prelude = `${cgroupJoinLines(o.cgroup)}read -r gh_go <&${CONTROL_FD} || exit 125\nexec ${CONTROL_FD}<&-\n. "$1"\n`;
    this.child = spawn('/bin/sh', ['-c', prelude, 'gatehouse-start', o.scriptFile], {
      cwd: o.cwd, env: {}, detached: true, stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
    });
    // A shell that dies while waiting (killed from outside) is simply not used.
    this.child.once('error', () => {});
  }

  /** Still waiting for its job (spawned, not exited, not used). */
  waiting(): boolean {
    return !this.started && this.child.pid !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the job: `script` runs in this shell (already in its cgroup, stdio attached). */
  go(script: string): void {
    this.started = true;
    writeFileSync(this.scriptFile, script, { mode: 0o600 });
    const control = this.child.stdio[CONTROL_FD] as Writable;
    control.end('\n');
  }

  /** Its script file is no longer needed (the job ended, or the shell was never used). */
  forget(): void {
    rmSync(this.scriptFile, { force: true });
  }

  /** Kills an unused shell; its cgroup is the caller's to release. */
  discard(): void {
    killGroup(this.child.pid, 'SIGKILL');
    this.forget();
  }
}

/** Waiting shells, one per key (the job's cgroup limits). */
export class StartShellPool {
  private readonly waitingShells = new Map<string, StartShell>();
  private readonly dir: string;
  private counter = 0;
  private closed = false;

  constructor(stateDir: string) {
    this.dir = join(stateDir, 'starts');
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  /** The waiting shell for `key`, if there is one that still waits. */
  take(key: string): StartShell | null {
    const s = this.waitingShells.get(key);
    if (!s) return null;
    this.waitingShells.delete(key);
    return s.waiting() ? s : (s.discard(), null);
  }

  /**
   * Spawns a shell for the next job with `key`, unless one waits already or too many do.
   * `cgroup` gives it its cgroup (null: none); `release` takes that back if the shell is dropped.
   */
  prepare(key: string, cwd: string, cgroup: () => JobCgroup | null, release: (cg: JobCgroup) => void): void {
    if (this.closed || this.waitingShells.has(key) || this.waitingShells.size >= MAX_WAITING_SHELLS) return;
    const cg = cgroup();
    const s = new StartShell({ cwd, cgroup: cg, scriptFile: join(this.dir, `${process.pid}-${++this.counter}.sh`) });
    if (!s.child.pid) {
      s.discard();
      if (cg) release(cg);
      return;
    }
    this.waitingShells.set(key, s);
    // Died while waiting: its cgroup goes back (the pool checks it is empty).
    s.child.once('exit', () => {
      if (this.waitingShells.get(key) !== s) return;
      this.waitingShells.delete(key);
      s.forget();
      if (cg) release(cg);
    });
  }

  /** Kills every waiting shell and hands their cgroups to `release`. */
  close(release: (cg: JobCgroup) => Promise<void>): Promise<unknown> {
    this.closed = true;
    const shells = [...this.waitingShells.values()];
    this.waitingShells.clear();
    return Promise.allSettled(shells.map(async (s) => {
      s.discard();
      await new Promise<void>((r) => (s.child.exitCode !== null || s.child.signalCode !== null ? r() : s.child.once('exit', () => r())));
      if (s.cgroup) await release(s.cgroup);
    }));
  }
}

/** Which waiting shell a job can take: any, without cgroups; else one whose cgroup has the job's limits. */
export function shellKey(cgroups: unknown, limits: { memoryBytes: number; maxProcesses: number }): string {
  return cgroups ? `${limits.memoryBytes}/${limits.maxProcesses}` : '';
}
