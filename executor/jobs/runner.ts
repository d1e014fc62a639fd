/**
 * The job runner: takes `job.start` specs, enforces capacity and the local floor, runs each
 * job in a fresh sandbox with a timeout that kills the whole sandbox, captures and spools
 * output, uploads the artifacts and produces a truthful JobExit.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { JobError, JobExit, JobLimits, JobOutput, JobSpec, SandboxKind, StreamName, TerminalState } from '../../src/contracts/agent-protocol.ts';
import type { Logger } from '../log.ts';
import type { LaunchRequest, ProcessEnd, Sandbox, SandboxDriver } from '../sandbox/types.ts';
import type { RuntimeTable } from '../runtimes/probe.ts';
import { StreamCapture } from './capture.ts';
import { inlineResult } from './inline.ts';
import { OutputRelay } from './relay.ts';
import { BUILD_STATUS_FILE, EXIT_STATUS_FILE, launchScript } from './launcher.ts';
import { endFromWrapperStatus } from '../sandbox/types.ts';
import { expandTemplate, planJob, type Ceilings, type JobPlan } from './plan.ts';
import { uploadArtifact, type UploadTarget } from './upload.ts';

export interface RunnerOptions {
  driver: SandboxDriver;
  runtimes: RuntimeTable;
  /** Workspace root, realpath. */
  root: string;
  /** Where full outputs are spooled before upload (agent-private). */
  spoolDir: string;
  capacity: number;
  ceilings: Ceilings;
  /** Where artifacts go; null keeps the spool files (tests, or an agent without an edge). */
  upload: UploadTarget | null;
  log: Logger;
  /** TERM → KILL grace on timeout/cancel. */
  graceMs?: number;
  /** After the process ends, how long its pipes may stay open (a grandchild) before we stop reading. */
  drainMs?: number;
}

export interface JobResult {
  exit: JobExit;
  /** Spool files still on disk (when not uploaded). */
  spool: Record<StreamName, string> | null;
}

export type StartResult = { accepted: true; done: Promise<JobResult> } | { accepted: false; error: JobError };

interface LiveJob {
  spec: JobSpec;
  sandbox: Sandbox | null;
  stop: 'timeout' | 'cancel' | null;
  stopNow: (why: 'timeout' | 'cancel') => void;
}

export class JobRunner {
  private readonly opts: RunnerOptions;
  private readonly jobs = new Map<string, LiveJob>();
  private readonly graceMs: number;
  private readonly drainMs: number;

  constructor(opts: RunnerOptions) {
    this.opts = opts;
    this.graceMs = opts.graceMs ?? 500;
    this.drainMs = opts.drainMs ?? 1000;
    mkdirSync(opts.spoolDir, { recursive: true, mode: 0o700 });
  }

  runningIds(): string[] {
    return [...this.jobs.keys()];
  }

  /** Accepts or refuses synchronously (so capacity cannot be overbooked), then runs in the background. */
  start(spec: JobSpec, send: (m: JobOutput) => void): StartResult {
    const refuse = (code: string, message: string): StartResult => ({ accepted: false, error: { type: 'job.error', jobId: spec.jobId, code, message } });
    if (this.jobs.has(spec.jobId)) return refuse('invalid_argument', `job ${spec.jobId} is already running on this agent`);
    if (this.jobs.size >= this.opts.capacity) {
      return refuse('capacity', `agent at capacity (${this.jobs.size}/${this.opts.capacity} running jobs)`);
    }
    const d = this.opts.driver;
    const hostVisible = d.kind === 'none';
    const planned = planJob(spec, {
      root: this.opts.root, workspaceInside: hostVisible ? this.opts.root : '/workspace', hostVisible,
      runtimes: this.opts.runtimes, ceilings: this.opts.ceilings,
    });
    const t0 = performance.now();
    if (!planned.ok && planned.failure.kind === 'refuse') return refuse(planned.failure.error.code, planned.failure.error.message);
    const job: LiveJob = { spec, sandbox: null, stop: null, stopNow: () => {} };
    this.jobs.set(spec.jobId, job);
    const done = (async (): Promise<JobResult> => {
      try {
        if (!planned.ok) return { exit: failedToStart(spec.jobId, t0, planned.failure.kind === 'spawn_failed' ? planned.failure.detail : ''), spool: null };
        return await this.run(job, planned.plan, send, t0);
      } catch (e) {
        this.opts.log.error(`job ${spec.jobId}: ${(e as Error).stack ?? e}`);
        return { exit: failedToStart(spec.jobId, t0, (e as Error).message), spool: null };
      } finally {
        this.jobs.delete(spec.jobId);
      }
    })();
    return { accepted: true, done };
  }

  /** `job.cancel`: kills the job's sandbox; its exit reports `cancelled`. False when unknown. */
  cancel(jobId: string): boolean {
    const j = this.jobs.get(jobId);
    if (!j) return false;
    j.stopNow('cancel');
    return true;
  }

  /** Cancels everything (agent shutdown) and waits for the sandboxes to go. */
  async shutdown(): Promise<void> {
    for (const id of this.jobs.keys()) this.cancel(id);
    const deadline = Date.now() + 5000;
    while (this.jobs.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }

  private async run(job: LiveJob, plan: JobPlan, send: (m: JobOutput) => void, t0: number): Promise<JobResult> {
    const { spec } = job;
    const { log, driver } = this.opts;
    const base = join(this.opts.spoolDir, randomBytes(8).toString('hex'));
    const relay = new OutputRelay(spec.jobId, send);
    const mk = (stream: StreamName) => new StreamCapture({
      stream, spoolPath: `${base}.${stream}`, artifactBytes: plan.artifactBytes,
      inlineBytes: plan.inlineBytes, relayBytes: plan.inlineBytes, relay: relay.push,
    });
    const caps = { stdout: mk('stdout'), stderr: mk('stderr') };

    job.stopNow = (why) => {
      if (job.stop) return;
      job.stop = why;
      void job.sandbox?.kill(this.graceMs);
    };
    const timer = setTimeout(() => job.stopNow('timeout'), plan.timeoutMs);
    try {
      let sandbox: Sandbox;
      try {
        sandbox = await driver.acquire(spec.jobId, spec.limits);
      } catch (e) {
        return { exit: failedToStart(spec.jobId, t0, `sandbox did not start: ${(e as Error).message}`), spool: null };
      }
      job.sandbox = sandbox;
      try {
        if (job.stop) return { exit: this.finishEarly(spec.jobId, t0, job.stop), spool: null };
        await caps.stdout.open();
        await caps.stderr.open();

        const c = plan.code;
        const vars = { exe: c?.exe ?? '', file: `${sandbox.jobDirInside}/${c?.file ?? ''}`, out: `${sandbox.jobDirInside}/main` };
        if (c) {
          writeFileSync(join(sandbox.jobDirHost, c.file), c.code);
          chmodSync(join(sandbox.jobDirHost, c.file), 0o644);
        }
        const build = c?.build ? expandTemplate(c.build, vars) : undefined;
        const cwdInside = plan.cwd ? `${sandbox.workspaceInside}/${plan.cwd}` : sandbox.workspaceInside;
        const run = c ? expandTemplate(c.run, vars) : plan.argv!;
        const limitsPrefix = rlimitPrefix(spec.limits, driver.kind);
        const script = launchScript({
          cwd: cwdInside, env: plan.env, build, run, rlimitPrefix: limitsPrefix,
          buildStatusPath: build ? `${sandbox.jobDirInside}/${BUILD_STATUS_FILE}` : undefined,
          exitStatusPath: sandbox.earlyExitStatus ? `${sandbox.jobDirInside}/${EXIT_STATUS_FILE}` : undefined,
        });
        const direct = build ? undefined : { argv: [...(limitsPrefix ?? []), ...run], cwd: cwdInside, env: plan.env };
        const end = await this.runLaunched(job, sandbox, { script, direct }, spec.stdin, caps);
        let phase: 'build' | 'run' | undefined = c ? 'run' : undefined;
        let compileError = false;
        if (build) {
          // The launcher records the build's status; absent means the build never finished.
          let status: string | null = null;
          try { status = readFileSync(join(sandbox.jobDirHost, BUILD_STATUS_FILE), 'utf8').trim(); } catch { /* absent */ }
          if (status !== '0') {
            phase = 'build';
            compileError = status !== null && !job.stop;
          }
        }
        return await this.finish(spec, t0, end, job.stop, caps, relay, phase, compileError);
      } finally {
        void sandbox.destroy().catch((e) => log.error(`sandbox ${sandbox.id} teardown: ${(e as Error).message}`));
      }
    } finally {
      clearTimeout(timer);
      await caps.stdout.close();
      await caps.stderr.close();
    }
  }

  /** Starts the launcher, feeds stdin, reads output; returns once the job's process is gone. */
  private async runLaunched(job: LiveJob, sandbox: Sandbox, req: LaunchRequest, stdin: string | undefined,
    caps: Record<StreamName, StreamCapture>): Promise<ProcessEnd> {
    const { child, ended } = sandbox.launch(req);
    // A cancel or timeout that landed while the sandbox was being prepared found nothing to kill.
    if (job.stop) void sandbox.kill(this.graceMs);
    // stdin is always a pipe: write what was given, then close, so readers see EOF.
    child.stdin?.on('error', () => {}); // the job may exit without reading it
    if (stdin) child.stdin?.end(stdin);
    else child.stdin?.end();
    const reading = Promise.all([caps.stdout.consume(child.stdout as Readable), caps.stderr.consume(child.stderr as Readable)]);
    const statusFile = sandbox.earlyExitStatus ? join(sandbox.jobDirHost, EXIT_STATUS_FILE) : null;
    const end = statusFile ? await Promise.race([ended, statusFromFile(statusFile, ended)]) : await ended;
    const drainedWithin = (ms: number) => Promise.race([reading.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), ms))]);
    if (!(await drainedWithin(30))) {
      // Something still holds the pipes (a background or escaped grandchild): everything left
      // in the sandbox dies now; if the pipes still stay open, stop reading rather than wait.
      await sandbox.kill(0);
      if (!(await drainedWithin(this.drainMs))) {
        child.stdout?.destroy();
        child.stderr?.destroy();
        await reading;
      }
    }
    return end;
  }

  private finishEarly(jobId: string, t0: number, why: 'timeout' | 'cancel'): JobExit {
    const e = emptyExit(jobId, t0);
    return { ...e, state: why === 'timeout' ? 'timed_out' : 'cancelled', timedOut: why === 'timeout' };
  }

  private async finish(spec: JobSpec, t0: number, end: ProcessEnd, stop: 'timeout' | 'cancel' | null,
    caps: Record<StreamName, StreamCapture>, relay: OutputRelay,
    phase: 'build' | 'run' | undefined, compileError: boolean): Promise<JobResult> {
    relay.flush();
    await caps.stdout.close();
    await caps.stderr.close();
    const durationMs = Math.round(performance.now() - t0);
    const inline = inlineResult(
      { head: caps.stdout.head(), total: caps.stdout.bytes },
      { head: caps.stderr.head(), total: caps.stderr.bytes },
      spec.limits.inlineBytes,
    );
    let state: TerminalState;
    let exitCode: number | null = null;
    let signal: string | null = null;
    let error: JobExit['error'];
    if (end.kind === 'spawn_failed') {
      return { exit: { ...failedToStart(spec.jobId, t0, end.message), phase }, spool: null };
    }
    if (end.kind === 'signaled') signal = end.signal;
    if (stop === 'timeout') state = 'timed_out';
    else if (stop === 'cancel') state = 'cancelled';
    else if (end.kind === 'signaled') state = 'signaled';
    else {
      state = 'exited';
      exitCode = end.code;
    }
    if (compileError) {
      const msg = new TextDecoder().decode(caps.stderr.head().subarray(0, 8000)).trim();
      error = { code: 'compile_error', message: msg || `build step failed (${exitCode !== null ? `exit ${exitCode}` : signal})` };
    }

    // Upload the full streams, then report; the edge answers the caller once it has both.
    let uploaded = true;
    const keep: Record<StreamName, string> = { stdout: caps.stdout.spoolPath, stderr: caps.stderr.spoolPath };
    const target = this.opts.upload;
    for (const c of [caps.stdout, caps.stderr]) {
      if (c.spooledBytes === 0) {
        rmSync(c.spoolPath, { force: true });
        continue;
      }
      if (!target) { uploaded = false; continue; }
      const r = await uploadArtifact(target, {
        jobId: spec.jobId, handle: spec.artifactHandle, stream: c.stream, file: c.spoolPath,
        bytes: c.spooledBytes, lines: c.artifactLines(), truncated: c.artifactTruncated(),
      });
      if (r.ok) rmSync(c.spoolPath, { force: true });
      else {
        uploaded = false;
        this.opts.log.error(`job ${spec.jobId}: ${r.error.message} (spool kept at ${c.spoolPath})`);
      }
    }
    const exit: JobExit = {
      type: 'job.exit', jobId: spec.jobId, state, exitCode, signal, timedOut: stop === 'timeout', durationMs,
      stdout: inline.stdout, stderr: inline.stderr, stdoutTruncated: inline.stdoutTruncated, stderrTruncated: inline.stderrTruncated,
      streams: {
        stdout: { bytes: caps.stdout.bytes, lines: caps.stdout.totalLines(), artifactTruncated: caps.stdout.artifactTruncated() },
        stderr: { bytes: caps.stderr.bytes, lines: caps.stderr.totalLines(), artifactTruncated: caps.stderr.artifactTruncated() },
      },
      artifactsUploaded: uploaded,
    };
    if (error) exit.error = error;
    if (phase) exit.phase = phase;
    return { exit, spool: target ? null : keep };
  }
}

function emptyExit(jobId: string, t0: number): JobExit {
  const empty = { bytes: 0, lines: 0, artifactTruncated: false };
  return {
    type: 'job.exit', jobId, state: 'failed_to_start', exitCode: null, signal: null, timedOut: false,
    durationMs: Math.round(performance.now() - t0), stdout: '', stderr: '', stdoutTruncated: false, stderrTruncated: false,
    streams: { stdout: empty, stderr: { ...empty } }, artifactsUploaded: true,
  };
}

/** Never an exit 0: the process did not run. Message text follows reference 001. */
export function failedToStart(jobId: string, t0: number, detail: string): JobExit {
  return { ...emptyExit(jobId, t0), error: { code: 'spawn_failed', message: `Error: execute: spawn failed${detail ? `: ${detail}` : ''}` } };
}

const PRLIMIT = existsSync('/usr/bin/prlimit') ? '/usr/bin/prlimit' : null;

/**
 * rlimits for the job's processes via prlimit (same path in every sandbox). RLIMIT_NPROC only
 * inside gVisor: elsewhere the job's uid maps to a host uid whose other processes count too.
 */
export function rlimitPrefix(l: JobLimits, kind: SandboxKind): string[] | undefined {
  if (!PRLIMIT) return undefined;
  const f: string[] = [];
  if (l.maxOpenFiles) f.push(`--nofile=${l.maxOpenFiles}`);
  if (l.maxFileBytes) f.push(`--fsize=${l.maxFileBytes}`);
  if (l.maxProcesses && kind === 'gvisor') f.push(`--nproc=${l.maxProcesses}`);
  return f.length ? [PRLIMIT, ...f, '--'] : undefined;
}

/**
 * The launcher's record of the job's exit status, polled (briefly often, then every 25 ms)
 * until it appears; never resolves if the process ends first (the caller races the two).
 */
async function statusFromFile(path: string, ended: Promise<unknown>): Promise<ProcessEnd> {
  let over = false;
  void ended.then(() => (over = true));
  for (let wait = 1; !over; wait = Math.min(wait * 2, 25)) {
    try {
      const m = /^(\d+)\n$/.exec(readFileSync(path, 'utf8'));
      if (m) return endFromWrapperStatus(Number(m[1]), null);
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, wait));
  }
  return new Promise<never>(() => {});
}
