/**
 * One gVisor sandbox: a `runsc run` of a bundle the driver (gvisor.ts) generated, whose init waits
 * for its job on stdin (or, reused, is the reuse init: gvisor-reuse/). It reaches its driver only
 * through `GvisorHost`, so this file imports neither the driver nor the reuse pool.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { join } from 'node:path';
import { closingShell, delay, inheritsOpenDescriptors, watchWrapper, type RunResult } from './exec-util.ts';
import type { LaunchRequest, ProcessEnd, ResourceLimits, Sandbox, SandboxProcess } from './types.ts';
import { LAUNCHER_FILE, STATUS_FD } from '../jobs/launcher.ts';

export const WORKSPACE_INSIDE = '/workspace';
export const JOB_DIR_INSIDE = '/job';
export const RUNSC_ENV = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' };
const SETPRIV = existsSync('/usr/bin/setpriv') ? '/usr/bin/setpriv' : null;
/** The sandbox-wide limits (fixed when a sandbox starts): warm sandboxes only serve jobs with the same. */
export type SandboxLimits = Pick<ResourceLimits, 'memoryBytes' | 'tmpBytes'>;

/** What a sandbox needs of its driver. */
export interface GvisorHost {
  /** runsc's state dir (`runsc --root`). */
  readonly runscRoot: string;
  /** Runs `runsc --root <runscRoot> <args>` and collects its output. */
  runsc(args: string[], timeoutMs?: number): Promise<RunResult>;
  /** The sandbox is torn down: the driver no longer counts it. */
  forget(sb: GvisorSandbox): void;
  /** A sandbox left: the driver may top its warm pool up. */
  refill(): void;
}

export class GvisorSandbox implements Sandbox {
  readonly id: string;
  readonly jobDirHost: string;
  readonly jobDirInside = JOB_DIR_INSIDE;
  readonly workspaceInside = WORKSPACE_INSIDE;
  /** Whether the sandbox came up (its pid file appeared) — false if `runsc run` failed. */
  readonly ready: Promise<boolean>;
  /** Resolves once `runsc run` has exited (the sandbox is gone). */
  readonly gone: Promise<void>;
  /** Resolves once destroy() has finished (files removed, driver forgot it). */
  readonly released: Promise<void>;
  private release: () => void = () => {};
  private readonly host: GvisorHost;
  private readonly bundle: string;
  private readonly child: ChildProcess;
  private readonly ended: Promise<ProcessEnd>;
  private readonly pidFile: string;
  private stderrHead = '';
  /** Whether it came up (ready resolved true). */
  up = false;
  private launched = false;
  private killing: Promise<void> | null = null;
  private destroying: Promise<void> | null = null;

  constructor(host: GvisorHost, id: string, bundle: string, jobDir: string, runscFlags: string[] = []) {
    this.host = host;
    this.id = id;
    this.bundle = bundle;
    this.jobDirHost = jobDir;
    this.pidFile = join(bundle, 'pid');
    this.released = new Promise((r) => (this.release = r));
    // fd 3 is the launcher's status pipe, passed into the sandbox as its fd 3. `runsc run` gets a
    // parent-death signal: if the agent dies, it dies, and its sandbox with it (even one still
    // starting, which would otherwise outlive the agent).
    const runArgs = [
      'runsc',
      '--root',
      host.runscRoot,
      '--network=none',
      ...runscFlags,
      'run',
      '--pass-fd',
      `${STATUS_FD}:${STATUS_FD}`,
      '--pid-file',
      this.pidFile,
      '--bundle',
      bundle,
      id,
    ];
    // An agent that inherited descriptors starts runsc through bash, which closes every one but these
    // four (exec-util.ts), so neither runsc nor the sandbox's host processes hold one; one that
    // inherited none starts it directly (a bash per sandbox is ~1.6 ms of CPU).
    const argv = SETPRIV ? [SETPRIV, '--pdeathsig', 'KILL', '--', ...runArgs] : runArgs;
    const [file, args] = inheritsOpenDescriptors() ? closingShell(STATUS_FD, 'exec "$@"', ['gatehouse-runsc', ...argv]) : [argv[0], argv.slice(1)];
    this.child = spawn(file, args, { env: RUNSC_ENV, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
    this.child.stdin!.on('error', () => {});
    // Until a job takes the pipes, keep what runsc says (start errors) and nothing more.
    this.child.stderr!.on('data', this.onEarlyStderr);
    const watched = watchWrapper(this.child);
    this.ended = watched.then(
      (e): ProcessEnd =>
        e.kind !== 'spawn_failed' && !existsSync(this.pidFile)
          ? {
              kind: 'spawn_failed',
              message: `runsc run did not start sandbox ${id}: ${this.stderrHead.trim().split('\n').slice(-2).join(' | ') || (e.kind === 'exited' ? `exit ${e.code}` : e.signal)}`,
            }
          : e,
    );
    this.gone = this.ended.then(() => {});
    this.ready = waitForFile(this.pidFile, this.ended, 30_000);
    void this.ready.then((ok) => (this.up = ok));
  }

  private onEarlyStderr = (d: Buffer) => {
    if (this.stderrHead.length < 4096) this.stderrHead += d.toString();
  };

  /** The sandbox's own stdio: the reuse init's frame channel. */
  channel(): ChildProcess {
    return this.child;
  }

  /** How `runsc run` ended (the sandbox's end). */
  wrapperEnd(): Promise<ProcessEnd> {
    return this.ended;
  }

  /** How often the sandbox hit its memory limit so far (cgroup v1 failcnt; 0 where unreadable). */
  memoryFailures(): number {
    try {
      return Number(readFileSync(`/sys/fs/cgroup/memory/gatehouse/${this.id}/memory.failcnt`, 'utf8')) || 0;
    } catch {
      return 0;
    }
  }

  alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  startError(): string {
    return `runsc run failed for ${this.id}: ${this.stderrHead.trim().split('\n').slice(-3).join(' | ') || 'no output'}`;
  }

  launch(req: LaunchRequest): SandboxProcess {
    if (this.launched) throw new Error('a gVisor sandbox runs one job');
    this.launched = true;
    writeFileSync(join(this.jobDirHost, LAUNCHER_FILE), req.script, { mode: 0o644 });
    this.child.stderr!.off('data', this.onEarlyStderr);
    this.child.stdin!.write('go\n');
    return { child: this.child, ended: this.ended, status: this.child.stdio[STATUS_FD] as Readable };
  }

  hostKillArgv(): string[] {
    return runscKillArgv(this.host.runscRoot, this.id);
  }

  hostPids(): number[] {
    for (const f of [`/sys/fs/cgroup/memory/gatehouse/${this.id}/cgroup.procs`, `/sys/fs/cgroup/gatehouse/${this.id}/cgroup.procs`]) {
      try {
        return readFileSync(f, 'utf8').split('\n').filter(Boolean).map(Number);
      } catch {
        /* not this hierarchy */
      }
    }
    return this.child.pid ? descendants(this.child.pid) : [];
  }

  memoryLimitHit(): boolean {
    // runsc removes its cgroup with the sandbox: the runner samples this while the job runs.
    return this.memoryFailures() > 0;
  }

  kill(graceMs: number): Promise<void> {
    if (!this.alive()) return Promise.resolve();
    if (!this.killing || graceMs === 0) {
      const prev = this.killing;
      this.killing = (async () => {
        if (prev) await prev;
        if (graceMs > 0 && this.alive()) {
          await this.host.runsc(['kill', '--all', this.id, 'TERM']);
          await Promise.race([this.gone, delay(graceMs)]);
        }
        if (this.alive()) await this.host.runsc(['kill', '--all', this.id, 'KILL']);
        // The container's processes are dead; runsc run follows. If it does not, make it.
        if (await Promise.race([this.gone.then(() => true), delay(1000).then(() => false)])) return;
        this.child.kill('SIGKILL');
        await this.host.runsc(['delete', '--force', this.id], 30_000);
      })();
    }
    return this.killing;
  }

  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      if (this.alive()) {
        await this.host.runsc(['kill', '--all', this.id, 'KILL']);
        await this.kill(0);
      }
      await this.gone;
      this.host.forget(this);
      // Async: a job dir the job filled with many files must not block the event loop.
      await rm(this.bundle, { recursive: true, force: true });
      await rm(this.jobDirHost, { recursive: true, force: true });
      this.release();
      this.host.refill();
    })();
    return this.destroying;
  }
}

/** Polls for `path` (runsc writes the pid file once the sandbox runs); false if `ended` first. */
async function waitForFile(path: string, ended: Promise<unknown>, timeoutMs: number): Promise<boolean> {
  let over = false;
  void ended.then(() => (over = true));
  const deadline = Date.now() + timeoutMs;
  for (let wait = 2; !over && Date.now() < deadline; wait = Math.min(wait * 2, 25)) {
    if (existsSync(path)) return true;
    await delay(wait);
  }
  return existsSync(path) && !over;
}

/** Pids below `pid` (via /proc/PID/task/TID/children). */
function descendants(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number, depth: number) => {
    if (depth > 8) return;
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const t of tids) {
      let kids: string;
      try {
        kids = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const k of kids.split(' ').filter(Boolean).map(Number)) {
        out.push(k);
        walk(k, depth + 1);
      }
    }
  };
  walk(pid, 0);
  return out;
}

/**
 * The host command that kills a sandbox from outside the agent (the watchdog's). A container runsc
 * no longer knows is a sandbox that is gone (`runsc run` deletes it once its processes are dead,
 * e.g. after a first kill that reported a race on one of them): nothing is left to kill, which is
 * the kill's goal, so that exits 0 and says so.
 */
export function runscKillArgv(runscRoot: string, id: string): string[] {
  return [
    '/bin/sh',
    '-c',
    'e=$(runsc --root "$1" kill --all "$2" KILL 2>&1) && exit 0; case "$e" in *"does not exist"*) echo "the sandbox is gone: $e" >&2; exit 0;; esac; echo "$e" >&2; exit 1',
    'gatehouse-kill',
    runscRoot,
    id,
  ];
}
