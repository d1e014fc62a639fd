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
 * tmpfs, rlimits through the launcher. Cgroups, waiting starts, kill and teardown: shell-driver.ts.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { LAUNCHER_FILE } from '../jobs/launcher.ts';
import { ARGS_FD, StartShell, startKey, waitThenSource } from './start-shell.ts';
import type { JobCgroup } from './cgroup.ts';
import { hiddenPaths, systemView } from './system-view.ts';
import { CA_BUNDLE_INSIDE } from './trusted-cas.ts';
import { delay, runQuiet, watchWrapper } from './exec-util.ts';
import { ShellDriver, ShellSandbox, type JobPlace } from './shell-driver.ts';
import { SANDBOX_GID, SANDBOX_UID, type ProcessEnd, type ResourceLimits } from './types.ts';

const WORKSPACE_INSIDE = '/workspace';
const JOB_DIR_INSIDE = '/job';

export class BwrapDriver extends ShellDriver {
  readonly kind = 'bwrap' as const;
  /** The job's network namespace has only a loopback; the egress socket in /job is its way out. */
  readonly enforcesEgress = true;

  describe(): string {
    return 'bwrap (bubblewrap, user+pid+net namespaces)';
  }

  limitMechanisms(): string {
    return this.cgroups
      ? `memory, processes: a cgroup ${this.cgroups} per job; /tmp: tmpfs --size; open files, file size, CPU time: rlimits (ulimit in the job's start shell); disk writes: write_bytes of the job's processes`
      : "NO memory limit and no disk-write limit (cgroups need root); processes, open files, file size, CPU time: rlimits (ulimit in the job's start shell); /tmp: tmpfs --size";
  }

  protected async check(): Promise<void> {
    if (!this.cgroups)
      this.log.warn('bwrap: cannot create cgroups here (the agent is not root?): jobs get no memory limit and no disk-write limit, only rlimits');
    // Prove it works here (unprivileged user namespaces may be disabled).
    const r = await runQuiet(BWRAP, [...this.baseArgs(null), '--chdir', '/', '--', '/bin/true'], { env: {}, timeoutMs: 10_000 });
    if (r.code !== 0) throw new Error(`bwrap does not work here: ${(r.stderr || r.error || '').trim()}`);
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
    if (this.opts.caBundle) a.push('--ro-bind', this.opts.caBundle, CA_BUNDLE_INSIDE);
    a.push('--bind', this.opts.root, WORKSPACE_INSIDE);
    if (jobDir) a.push('--bind', jobDir, JOB_DIR_INSIDE);
    if (tmpBytes) a.push('--size', String(tmpBytes));
    a.push('--perms', '1777', '--tmpfs', '/tmp', '--proc', '/proc', '--dev', '/dev', '--hostname', 'sandbox');
    // Last: the root tmpfs and /dev (both the job user's inside) become read-only once every mount is in place.
    a.push('--remount-ro', '/dev', '--remount-ro', '/');
    return a;
  }

  /** A waiting start serves only a job with the same cgroup limits and the same /tmp size. */
  protected startKey(limits: ResourceLimits): string {
    return startKey(this.cgroups, limits, String(limits.tmpBytes));
  }

  protected newPlace(): JobPlace {
    const id = this.newId('bw');
    const jobDir = join(this.opts.stateDir, 'jobdirs', id);
    // The user namespace maps the job user to our uid, so the dir is the job's own inside.
    mkdirSync(jobDir, { recursive: true, mode: 0o700 });
    return { id, jobDir };
  }

  /**
   * A start for a job in `place`: a shell that joins `cgroup` and becomes bwrap at once, whose
   * shell inside waits for the job's script (start-shell.ts). bwrap gets an empty environment
   * and its arguments on ARGS_FD (see the file comment) and sets PWD to its --chdir; the script
   * sets the job's own env.
   */
  startShell(place: JobPlace, limits: ResourceLimits, cgroup: JobCgroup | null): StartShell {
    const inside = `${JOB_DIR_INSIDE}/${LAUNCHER_FILE}`;
    // bwrap takes its options from the fd, the command only from its own argv (it holds no host path).
    const options = [...this.baseArgs(place.jobDir, limits.tmpBytes), '--chdir', '/', '--clearenv'];
    return new StartShell({
      cwd: '/',
      cgroup,
      scriptFile: join(place.jobDir, LAUNCHER_FILE),
      meta: place,
      exec: [BWRAP, '--args', String(ARGS_FD), '--', '/bin/sh', '-c', waitThenSource(inside)],
      execInput: Buffer.from(options.map((a) => `${a}\0`).join('')),
    });
  }

  protected sandbox(place: JobPlace, limits: ResourceLimits, cgroup: JobCgroup | null, start: StartShell | null): BwrapSandbox {
    return new BwrapSandbox(this, place, limits, cgroup, start);
  }

  protected dropStart(start: StartShell): void {
    rmSync(start.meta!.jobDir, { recursive: true, force: true });
  }
}

class BwrapSandbox extends ShellSandbox {
  readonly jobDirInside = JOB_DIR_INSIDE;
  readonly workspaceInside = WORKSPACE_INSIDE;

  protected watch(child: ChildProcess): Promise<ProcessEnd> {
    return watchWrapper(child);
  }

  protected async stop(graceMs: number): Promise<void> {
    if (!this.procs.size) return;
    // bwrap is pid 1 of the job's pid namespace: when it dies the kernel kills everything inside.
    await this.signalGroups(graceMs);
    await Promise.race([Promise.all(this.procs.values()), delay(2000)]);
  }

  protected endProcesses(): Promise<void> {
    return this.stop(0);
  }

  protected async cleanUp(): Promise<void> {
    await rm(this.jobDirHost, { recursive: true, force: true });
  }
}

const BWRAP = '/usr/bin/bwrap';

export function bwrapAvailable(): Promise<boolean> {
  return runQuiet(BWRAP, ['--version'], { env: { PATH: '/usr/bin:/bin' }, timeoutMs: 5000 }).then((r) => r.code === 0);
}
