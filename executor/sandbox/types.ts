/**
 * One interface for every isolation technology (gVisor, bubblewrap, none). The job runner
 * only sees this: acquire a single-use sandbox, exec argv in it (maybe twice: build then
 * run), kill everything in it, destroy it.
 */
import type { ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { SandboxKind } from '../../src/contracts/agent-protocol.ts';
import type { SandboxReuse } from '../../src/contracts/sandbox-reuse.ts';
import type { JobRlimits } from '../jobs/limits.ts';

/** Search path inside every sandbox; executables are resolved against it, never the agent's PATH. */
export const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin';
/** The unprivileged user jobs run as (nobody/nogroup). */
export const SANDBOX_UID = 65534;
export const SANDBOX_GID = 65534;

/** The job's limits, every one set (the runner fills absent ones with the defaults). */
export type ResourceLimits = import('../../src/contracts/resource-limits.ts').ResourceLimits;

/** What a sandbox starts for a job: one launcher script (see jobs/launcher.ts). */
export interface LaunchRequest {
  /** The launcher script (jobs/launcher.ts): the driver has a shell with an empty environment source it. */
  script: string;
  /** The job's steps as data, for a sandbox whose own init starts them (a reused gVisor sandbox). */
  steps?: {
    cwd: string;
    env: Record<string, string>;
    build?: string[];
    run: string[];
    rlimits: JobRlimits;
    /** The job is given no stdin (set by jobs/supervise.ts): its pipe is closed at once, with no end to wait for. */
    noStdin?: boolean;
  };
}

/** How a process ended, as far as the driver can tell. */
export type ProcessEnd = { kind: 'exited'; code: number } | { kind: 'signaled'; signal: string } | { kind: 'spawn_failed'; message: string };

export interface SandboxProcess {
  /** stdin/stdout/stderr are always pipes (or streams relayed from the sandbox's own pipes). */
  child: Pick<ChildProcess, 'stdin' | 'stdout' | 'stderr'>;
  /** Resolves when the process (not its pipes) is gone; never rejects. */
  ended: Promise<ProcessEnd>;
  /**
   * The launcher's status pipe (fd 3 inside): `build N` once the build step ended. Created by
   * the agent, closed before the job's own code runs; null for a direct exec (no launcher).
   */
  status: Readable | null;
}

/** A single-use sandbox: one job, then destroyed. */
export interface Sandbox {
  readonly id: string;
  /** Host path of the job's private directory (code files, build output); not in the workspace. */
  readonly jobDirHost: string;
  /** Creates jobDirHost where the driver makes it only on demand; call before writing into it. */
  prepareJobDir?(): void;
  /** The same directory as the job sees it. */
  readonly jobDirInside: string;
  /** The workspace root as the job sees it. */
  readonly workspaceInside: string;
  /**
   * A host command that kills everything of this sandbox, for the watchdog (a separate
   * process) to run when the agent cannot: its event loop is blocked, or it died.
   */
  hostKillArgv(): string[] | null;
  /** Host processes whose /proc/PID/io `write_bytes` add up to what the job wrote to disk. */
  hostPids(): number[];
  /**
   * True when every process hostPids() returns was started for this job (a per-job cgroup):
   * what they wrote before the job is 0, so the runner needs no baseline reading at start.
   */
  readonly hostPidsStartWithJob?: boolean;
  /** Whether the sandbox's memory limit was hit (a kill by SIGKILL then means "out of memory"). */
  memoryLimitHit(): boolean;
  /** Starts the job's launcher; once per sandbox. The caller writes stdin and closes it. */
  launch(req: LaunchRequest): SandboxProcess;
  /** Kills every process of the sandbox: TERM, `graceMs`, then KILL. Idempotent. */
  kill(graceMs: number): Promise<void>;
  /** Kills what is left and releases everything (runsc delete, job dir). Idempotent. */
  destroy(): Promise<void>;
}

export interface SandboxDriver {
  readonly kind: SandboxKind;
  /** One line for the start-up banner. */
  describe(): string;
  /** One line per limit: what enforces it in this driver (start-up log). */
  limitMechanisms(): string;
  /** Whether the job's process limit is RLIMIT_NPROC (it counts the job alone) rather than a cgroup. */
  readonly processLimitByRlimit: boolean;
  /**
   * A fresh sandbox for `jobId` (from the warm pool when there is one), or with `reuse` (the
   * team's policy) one a previous job of the team used, where the driver supports it.
   */
  acquire(jobId: string, limits: ResourceLimits, reuse?: SandboxReuse, opts?: AcquireOptions): Promise<Sandbox>;
  /**
   * Whether a job's network grant can be enforced: the sandbox has no route out and reaches the
   * egress proxy only through the socket in its job dir (executor/egress/sandbox-side.ts).
   * Absent = false: the runner refuses a job whose grant is not `off`.
   */
  readonly enforcesEgress?: boolean;
  /** Whether `acquire` honours `workspaceDir` (the agent announces the workspaces capability only then). */
  readonly supportsWorkspaces?: boolean;
  /** A workspace is being deleted: drop every idle sandbox that has it mounted. */
  dropWorkspace?(workspaceDir: string): Promise<void>;
  /** Resolves once no sandbox is being torn down in the background (tests, shutdown). */
  idle(): Promise<void>;
  /** Destroys pooled and live sandboxes. */
  close(): Promise<void>;
}

export interface AcquireOptions {
  /**
   * The job uses the egress proxy: its sandbox must be able to connect to the Unix socket in
   * its job dir (gVisor: a fresh sandbox started with `--host-uds=open`, never a pooled or reused one).
   */
  egress?: boolean;
  /**
   * Host directory of the job's own workspace (executor/workspaces/store.ts), bind-mounted at the
   * workspace path instead of the shared root. Only drivers with `supportsWorkspaces` take it.
   */
  workspaceDir?: string;
}

export interface DriverOptions {
  /** Host workspace root (realpath). */
  root: string;
  /** Agent-private state dir: runsc state, bundles, job dirs, spool. Never visible to jobs. */
  stateDir: string;
  /** gVisor only: sandboxes kept pre-started. */
  warm?: number;
  /** The composed CA bundle (trusted-cas.ts): shown read-only at CA_BUNDLE_INSIDE in gVisor and bubblewrap sandboxes. */
  caBundle?: string;
  /**
   * gVisor only: false starts reused sandboxes' jobs with os.posix_spawn, as on a host without a C compiler,
   * instead of the compiled start (gvisor-reuse/spawner.ts). Default true.
   */
  compiledStart?: boolean;
}

/** Maps the exit status a wrapper (runsc, bwrap) reports to how the job's process ended. */
export function endFromWrapperStatus(code: number | null, signal: NodeJS.Signals | null): ProcessEnd {
  if (signal) return { kind: 'signaled', signal };
  // Wrappers report death by signal N as 128+N (the shell convention); they give no other way to tell.
  if (code !== null && code > 128 && code < 128 + 65) {
    const name = signalName(code - 128);
    if (name) return { kind: 'signaled', signal: name };
  }
  return { kind: 'exited', code: code ?? -1 };
}

import { constants } from 'node:os';
export function signalName(n: number): string | null {
  for (const [name, v] of Object.entries(constants.signals)) if (v === n) return name;
  return null;
}
