/**
 * The job runner: takes `job.start` specs, enforces capacity and the local floor, runs each
 * job in a fresh sandbox with a timeout that kills the whole sandbox, captures and spools
 * output, produces a truthful JobExit as soon as the process ends, then uploads the artifacts
 * and reports how each upload ended.
 */
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { JobArtifact, JobError, JobExit, JobSpec, StreamName, TerminalState, UploadGrant } from '../../src/contracts/agent-protocol.ts';
import type { Logger } from '../log.ts';
import type { LaunchRequest, ProcessEnd, Sandbox, SandboxDriver } from '../sandbox/types.ts';
import type { RuntimeTable } from '../runtimes/probe.ts';
import { StreamCapture } from './capture.ts';
import { inlineResult } from '../../src/contracts/inline-result.ts';
import { OutputRelay, type LiveSink } from './relay.ts';
import { launchScript, parseBuildStatus } from './launcher.ts';
import { startWatchdog, NO_WATCHDOG, type Watchdog } from './watchdog.ts';
import { jobRlimits } from './limits.ts';
import { expandTemplate, planJob, type Ceilings, type JobPlan } from './plan.ts';
import { uploadArtifact, type UploadItem, type UploadTarget } from './upload.ts';
import { LIVE_OUTPUT_MAX_BYTES } from '../../src/contracts/limits.ts';
import type { EgressAnswer, NetworkGrant } from '../../src/contracts/network.ts';
import { EgressProxy, type EgressEdge } from '../egress/proxy.ts';
import { EGRESS_SOCKET_FILE, forwarderArgv, forwarderAvailable, proxyEnv } from '../egress/sandbox-side.ts';
import type { TestHosts } from '../egress/test-hosts.ts';

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
  /** How often the job's disk writes are added up (ms). */
  diskPollMs?: number;
  /** Tests only: names the egress proxy sends to 127.0.0.1 (executor/egress/test-hosts.ts). */
  egressTestHosts?: TestHosts | null;
}

/** The watchdog fires this long after the agent's own timeout + grace would have (see watchdog.ts). */
const WATCHDOG_MARGIN_MS = 2000;

export interface JobResult {
  /** Known when the process ends; `pendingArtifacts` names the uploads still running. */
  exit: JobExit;
  /** Spool files still on disk (when there is no upload target). */
  spool: Record<StreamName, string> | null;
  /** One report per stream in `exit.pendingArtifacts`, once its upload ended. */
  artifacts: Promise<JobArtifact[]>;
  /**
   * The relay handed the live sink every byte the exit's inline result was made from (the first
   * min(bytes, inlineBytes) of each stream, within what the edge keeps live): the edge can rebuild
   * the result from its live copy if those frames all went on the socket the exit goes on.
   */
  inlineRelayed: boolean;
}

export type StartResult = { accepted: true; done: Promise<JobResult> } | { accepted: false; error: JobError };

interface LiveJob {
  spec: JobSpec;
  /** The job's upload grant from its `job.start` (the edge takes its artifacts with it only). */
  grant?: UploadGrant;
  sandbox: Sandbox | null;
  stop: 'timeout' | 'cancel' | null;
  stopNow: (why: 'timeout' | 'cancel') => void;
  /** The job's egress proxy while it runs (a grant that is not `off`). */
  proxy?: EgressProxy;
}

/** Sends nothing: a runner without an edge (tests) refuses every ask and drops the records. */
const NO_EDGE: EgressEdge = { ask: () => false, log: () => {} };

/** A longest Unix socket path (sun_path is 108 bytes with its NUL). */
const UNIX_PATH_MAX = 107;

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
  start(spec: JobSpec, live: LiveSink, grant?: UploadGrant, edge: EgressEdge = NO_EDGE): StartResult {
    const refuse = (code: string, message: string): StartResult => ({ accepted: false, error: { type: 'job.error', jobId: spec.jobId, code, message } });
    if (this.jobs.has(spec.jobId)) return refuse('invalid_argument', `job ${spec.jobId} is already running on this agent`);
    if (this.jobs.size >= this.opts.capacity) {
      return refuse('capacity', `agent at capacity (${this.jobs.size}/${this.opts.capacity} running jobs)`);
    }
    const d = this.opts.driver;
    const network = spec.network && spec.network.mode !== 'off' ? spec.network : null;
    if (network && !d.enforcesEgress) {
      return refuse(
        'network_unavailable',
        `the job's network grant (${network.source || 'network'}.mode ${network.mode}) cannot be enforced by this agent's sandbox (${d.kind}): jobs there share the host's network; run it on an agent with gVisor or bubblewrap, or set ${network.source || 'network'}.mode to off`,
      );
    }
    if (network && !forwarderAvailable()) {
      return refuse(
        'network_unavailable',
        `the job's network grant needs python3 (/usr/bin/python3) on the agent host for the sandbox's proxy forwarder; install it or set ${network.source || 'network'}.mode to off`,
      );
    }
    const hostVisible = d.kind === 'none';
    const planned = planJob(spec, {
      root: this.opts.root,
      workspaceInside: hostVisible ? this.opts.root : '/workspace',
      hostVisible,
      runtimes: this.opts.runtimes,
      ceilings: this.opts.ceilings,
    });
    const t0 = performance.now();
    if (!planned.ok && planned.failure.kind === 'refuse') return refuse(planned.failure.error.code, planned.failure.error.message);
    const job: LiveJob = { spec, grant, sandbox: null, stop: null, stopNow: () => {} };
    this.jobs.set(spec.jobId, job);
    const done = (async (): Promise<JobResult> => {
      try {
        if (!planned.ok) return settled(failedToStart(spec.jobId, t0, planned.failure.kind === 'spawn_failed' ? planned.failure.detail : ''));
        return await this.run(job, planned.plan, live, t0, network, edge);
      } catch (e) {
        this.opts.log.error(`job ${spec.jobId}: ${(e as Error).stack ?? e}`);
        return settled(failedToStart(spec.jobId, t0, (e as Error).message));
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

  /** An `egress.answer` from the edge, to the job's proxy; false when no proxy waits for it. */
  egressAnswer(a: EgressAnswer): boolean {
    return this.jobs.get(a.jobId)?.proxy?.answer(a) ?? false;
  }

  /** After a reconnect: every job's egress asks still waiting go to the edge again (proxy.ts, `askAgain`). */
  egressAskAgain(): void {
    for (const j of this.jobs.values()) j.proxy?.askAgain();
  }

  /** Cancels everything (agent shutdown) and waits for the sandboxes to go. */
  async shutdown(): Promise<void> {
    for (const id of this.jobs.keys()) this.cancel(id);
    const deadline = Date.now() + 5000;
    while (this.jobs.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }

  private async run(job: LiveJob, plan: JobPlan, live: LiveSink, t0: number, network: NetworkGrant | null, edge: EgressEdge): Promise<JobResult> {
    const { spec } = job;
    const { log, driver } = this.opts;
    const base = join(this.opts.spoolDir, randomBytes(8).toString('hex'));
    const relay = new OutputRelay(spec.jobId, live);
    const mk = (stream: StreamName) => {
      relay.track(stream, `${base}.${stream}`, liveBytes(plan));
      return new StreamCapture({
        stream,
        spoolPath: `${base}.${stream}`,
        artifactBytes: plan.artifactBytes,
        inlineBytes: plan.inlineBytes,
        spooled: relay.available,
      });
    };
    const caps = { stdout: mk('stdout'), stderr: mk('stderr') };

    job.stopNow = (why) => {
      if (job.stop) return;
      job.stop = why;
      void job.sandbox?.kill(this.graceMs);
    };
    const timer = setTimeout(() => job.stopNow('timeout'), plan.timeoutMs);
    const limits = plan.limits;
    try {
      let sandbox: Sandbox;
      try {
        // A hardened git runs through the launcher script, which only a fresh sandbox starts.
        // So does a job with network (a sandbox that may reach the host socket of its proxy).
        sandbox = network
          ? await driver.acquire(spec.jobId, limits, undefined, { egress: true })
          : await driver.acquire(spec.jobId, limits, plan.hardenGit ? undefined : spec.reuse);
      } catch (e) {
        return settled(failedToStart(spec.jobId, t0, `sandbox did not start: ${(e as Error).message}`));
      }
      job.sandbox = sandbox;
      try {
        if (job.stop) return settled(this.finishEarly(spec.jobId, t0, job.stop));
        let env = plan.env;
        let prelude: { argv: string[]; failure: string } | undefined;
        if (network) {
          const started = await this.startProxy(job, sandbox, network, edge);
          if (!started.ok) return settled(failedToStart(spec.jobId, t0, started.message));
          env = { ...plan.env, ...proxyEnv() };
          prelude = { argv: forwarderArgv(sandbox.jobDirInside), failure: 'gatehouse: the network forwarder did not start inside the sandbox' };
        }
        await caps.stdout.open();
        await caps.stderr.open();

        const c = plan.code;
        const vars = { exe: c?.exe ?? '', file: `${sandbox.jobDirInside}/${c?.file ?? ''}`, out: `${sandbox.jobDirInside}/main` };
        if (c) {
          sandbox.prepareJobDir?.();
          writeFileSync(join(sandbox.jobDirHost, c.file), c.code);
          chmodSync(join(sandbox.jobDirHost, c.file), 0o644);
        }
        const build = c?.build ? expandTemplate(c.build, vars) : undefined;
        const cwdInside = plan.cwd ? `${sandbox.workspaceInside}/${plan.cwd}` : sandbox.workspaceInside;
        const run = c ? expandTemplate(c.run, vars) : plan.argv!;
        const rlimits = jobRlimits(limits, driver.processLimitByRlimit);
        const script = launchScript({
          cwd: cwdInside,
          env,
          build,
          run,
          rlimits,
          ...(plan.hardenGit ? { hardenGit: plan.hardenGit } : {}),
          ...(prelude ? { prelude } : {}),
        });
        const steps = plan.hardenGit || network ? undefined : { cwd: cwdInside, env, ...(build ? { build } : {}), run, rlimits };
        const launched = await this.runLaunched(job, sandbox, { script, steps }, spec.stdin, caps, plan);
        const { end, buildStatus } = launched;
        let phase: 'build' | 'run' | undefined = c ? 'run' : undefined;
        let compileError = false;
        // The launcher reports the build's status on its status pipe; none means the build never finished.
        if (build && buildStatus !== 0) {
          phase = 'build';
          compileError = buildStatus !== null && !job.stop;
        }
        // A timeout the agent's timer missed (its event loop was blocked; the watchdog killed the job) is still a timeout.
        if (!job.stop && performance.now() - launched.startedAt >= plan.timeoutMs) job.stop = 'timeout';
        const limitError = launched.diskExceeded
          ? { code: 'disk_write_limit', message: `the job was stopped: it wrote more than ${limits.diskWriteBytes} bytes to disk (limits.diskWriteBytes)` }
          : end.kind === 'signaled' && end.signal === 'SIGKILL' && !job.stop && launched.memoryHit
            ? { code: 'memory_limit', message: `the job was killed: it used more than ${limits.memoryBytes} bytes of memory (limits.memoryBytes)` }
            : undefined;
        return await this.finish(spec, t0, end, job.stop, caps, relay, phase, compileError, limitError);
      } finally {
        // The job's connections end with it; their records go out before its exit does.
        await job.proxy?.close();
        void sandbox.destroy().catch((e) => log.error(`sandbox ${sandbox.id} teardown: ${(e as Error).message}`));
      }
    } finally {
      clearTimeout(timer);
      await relay.close();
      await caps.stdout.close();
      await caps.stderr.close();
    }
  }

  /** The job's egress proxy, listening on the socket in its job dir (egress/sandbox-side.ts). */
  private async startProxy(job: LiveJob, sandbox: Sandbox, grant: NetworkGrant, edge: EgressEdge): Promise<{ ok: true } | { ok: false; message: string }> {
    sandbox.prepareJobDir?.();
    const path = join(sandbox.jobDirHost, EGRESS_SOCKET_FILE);
    if (Buffer.byteLength(path) > UNIX_PATH_MAX) {
      return { ok: false, message: `the egress socket path ${path} is longer than ${UNIX_PATH_MAX} bytes; give the agent a shorter --state-dir` };
    }
    if (existsSync(path)) rmSync(path, { force: true });
    const proxy = new EgressProxy({ jobId: job.spec.jobId, grant, edge, testHosts: this.opts.egressTestHosts ?? null, log: this.opts.log });
    job.proxy = proxy;
    try {
      await proxy.listen(path);
      // The job's user (the sandbox user, or the agent's own under bubblewrap) connects to it.
      chmodSync(path, 0o666);
    } catch (e) {
      return { ok: false, message: `the egress proxy did not start: ${(e as Error).message}` };
    }
    return { ok: true };
  }

  /** Starts the launcher, feeds stdin, reads output; returns once the job's process is gone. */
  private async runLaunched(
    job: LiveJob,
    sandbox: Sandbox,
    req: LaunchRequest,
    stdin: string | undefined,
    caps: Record<StreamName, StreamCapture>,
    plan: JobPlan,
  ): Promise<{ end: ProcessEnd; buildStatus: number | null; startedAt: number; diskExceeded: boolean; memoryHit: boolean }> {
    const { child, ended, status } = sandbox.launch(req);
    const startedAt = performance.now();
    const kill = sandbox.hostKillArgv();
    const deadline = plan.timeoutMs + this.graceMs + WATCHDOG_MARGIN_MS;
    const watchdog: Watchdog = kill
      ? startWatchdog(deadline, kill, WATCHDOG_ENV, (r) =>
          this.opts.log.warn(
            `job ${job.spec.jobId}: the watchdog killed its sandbox at ${r.at}, ${deadline} ms after the start (the agent had not ended it): ` +
              (r.error
                ? `\`${kill[0]}\` did not start: ${r.error}`
                : `\`${kill.join(' ')}\` ${r.signal ? `died of ${r.signal}` : `exited ${r.code}`} in ${r.ms} ms${(r.attempts ?? 1) > 1 ? ` (${r.attempts} attempts)` : ''}${r.stderr ? `: ${r.stderr.trim()}` : ''}`),
            { jobId: job.spec.jobId, watchdog: true },
          ),
        )
      : NO_WATCHDOG;
    const disk = this.watchDiskWrites(sandbox, plan.limits.diskWriteBytes);
    try {
      // A cancel or timeout that landed while the sandbox was being prepared found nothing to kill.
      if (job.stop) void sandbox.kill(this.graceMs);
      // stdin is always a pipe: write what was given, then close, so readers see EOF.
      child.stdin?.on('error', () => {}); // the job may exit without reading it
      if (stdin) child.stdin?.end(stdin);
      else child.stdin?.end();
      const statusText = readSome(status, 64);
      const reading = Promise.all([caps.stdout.consume(child.stdout as Readable), caps.stderr.consume(child.stderr as Readable)]);
      const end = await ended;
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
      // After the process is gone nothing holds the status pipe's write end: its EOF is near.
      await Promise.race([statusText, new Promise((r) => setTimeout(r, 1000))]);
      status?.destroy();
      return { end, buildStatus: parseBuildStatus(await statusText), startedAt, diskExceeded: disk.exceeded(), memoryHit: disk.memoryHit() };
    } finally {
      disk.stop();
      watchdog.disarm();
    }
  }

  /**
   * Adds up what the sandbox's host processes wrote to disk (/proc/PID/io write_bytes, which
   * counts page-cache writes to files, not pipes or memory) and stops the job past `limit`.
   */
  private watchDiskWrites(sandbox: Sandbox, limit: number): { exceeded(): boolean; memoryHit(): boolean; stop(): void } {
    let exceeded = false;
    let memoryHit = false;
    // Processes that all started with the job wrote nothing before it: their sum starts at 0, and
    // the first look can wait a poll interval (a job shorter than that never costs a poll).
    const fresh = sandbox.hostPidsStartWithJob === true;
    let baseline: number | null = fresh ? 0 : null;
    let busy = false;
    const poll = async () => {
      if (busy || exceeded) return;
      busy = true;
      try {
        memoryHit ||= sandbox.memoryLimitHit();
        const total = await writtenBytes(sandbox.hostPids());
        baseline ??= total;
        if (total - baseline > limit && !exceeded) {
          exceeded = true;
          void sandbox.kill(0);
        }
      } finally {
        busy = false;
      }
    };
    if (!fresh) void poll();
    const t = setInterval(() => void poll(), this.opts.diskPollMs ?? 200);
    return { exceeded: () => exceeded, memoryHit: () => memoryHit || sandbox.memoryLimitHit(), stop: () => clearInterval(t) };
  }

  private finishEarly(jobId: string, t0: number, why: 'timeout' | 'cancel'): JobExit {
    const e = emptyExit(jobId, t0);
    return { ...e, state: why === 'timeout' ? 'timed_out' : 'cancelled', timedOut: why === 'timeout' };
  }

  private async finish(
    spec: JobSpec,
    t0: number,
    end: ProcessEnd,
    stop: 'timeout' | 'cancel' | null,
    caps: Record<StreamName, StreamCapture>,
    relay: OutputRelay,
    phase: 'build' | 'run' | undefined,
    compileError: boolean,
    limitError?: { code: string; message: string },
  ): Promise<JobResult> {
    // The live copy goes out before the exit: the edge takes live output only while the job runs.
    await relay.finish();
    await caps.stdout.close();
    await caps.stderr.close();
    const durationMs = Math.round(performance.now() - t0);
    const inline = inlineResult(
      { head: caps.stdout.head(), total: caps.stdout.bytes },
      { head: caps.stderr.head(), total: caps.stderr.bytes },
      spec.limits.inlineBytes,
    );
    const relayedHead = (c: StreamCapture) => {
      const need = Math.min(c.bytes, spec.limits.inlineBytes);
      return need <= LIVE_OUTPUT_MAX_BYTES && relay.sent(c.stream) >= need;
    };
    const inlineRelayed = relayedHead(caps.stdout) && relayedHead(caps.stderr);
    let state: TerminalState;
    let exitCode: number | null = null;
    let signal: string | null = null;
    let error: JobExit['error'];
    if (end.kind === 'spawn_failed') {
      return settled({ ...failedToStart(spec.jobId, t0, end.message), phase });
    }
    if (end.kind === 'signaled') signal = end.signal;
    if (stop === 'timeout') state = 'timed_out';
    else if (stop === 'cancel') state = 'cancelled';
    else if (end.kind === 'signaled') state = 'signaled';
    else {
      state = 'exited';
      exitCode = end.code;
    }
    if (limitError) error = limitError;
    else if (compileError) {
      const msg = new TextDecoder().decode(caps.stderr.head().subarray(0, 8000)).trim();
      error = { code: 'compile_error', message: msg || `build step failed (${exitCode !== null ? `exit ${exitCode}` : signal})` };
    }

    // Report the exit now (the process has ended); the uploads follow and report on their own, so
    // a slow upload never holds back — or loses — how the job ended.
    const keep: Record<StreamName, string> = { stdout: caps.stdout.spoolPath, stderr: caps.stderr.spoolPath };
    const target = this.opts.upload;
    const toUpload: StreamCapture[] = [];
    for (const c of [caps.stdout, caps.stderr]) {
      if (c.spooledBytes === 0) {
        if (c.spoolCreated) rmSync(c.spoolPath, { force: true });
      } else if (target) toUpload.push(c);
    }
    const exit: JobExit = {
      type: 'job.exit',
      jobId: spec.jobId,
      state,
      exitCode,
      signal,
      timedOut: stop === 'timeout',
      durationMs,
      stdout: inline.stdout,
      stderr: inline.stderr,
      stdoutTruncated: inline.stdoutTruncated,
      stderrTruncated: inline.stderrTruncated,
      streams: {
        stdout: { bytes: caps.stdout.bytes, lines: caps.stdout.totalLines(), artifactTruncated: caps.stdout.artifactTruncated() },
        stderr: { bytes: caps.stderr.bytes, lines: caps.stderr.totalLines(), artifactTruncated: caps.stderr.artifactTruncated() },
      },
      artifactsUploaded: toUpload.length === 0 && (target !== null || caps.stdout.spooledBytes + caps.stderr.spooledBytes === 0),
    };
    if (toUpload.length) exit.pendingArtifacts = toUpload.map((c) => c.stream);
    if (error) exit.error = error;
    if (phase) exit.phase = phase;
    const artifacts = target
      ? this.uploadAll(
          spec,
          target,
          toUpload.map((c) => ({
            stream: c.stream,
            file: c.spoolPath,
            bytes: c.spooledBytes,
            lines: c.artifactLines(),
            truncated: c.artifactTruncated(),
            grant: this.jobs.get(spec.jobId)?.grant,
          })),
        )
      : Promise.resolve([]);
    return { exit, spool: target ? null : keep, artifacts, inlineRelayed };
  }

  /** Uploads each spooled stream (one after the other) and says how each ended; spools of failed uploads stay on disk. */
  private async uploadAll(spec: JobSpec, target: UploadTarget, items: Omit<UploadItem, 'jobId' | 'handle'>[]): Promise<JobArtifact[]> {
    const out: JobArtifact[] = [];
    for (const it of items) {
      const r = await uploadArtifact(target, { ...it, jobId: spec.jobId, handle: spec.artifactHandle });
      if (r.ok) {
        rmSync(it.file, { force: true });
        out.push({ type: 'job.artifact', jobId: spec.jobId, stream: it.stream, state: 'complete', bytes: it.bytes });
      } else {
        this.opts.log.error(`job ${spec.jobId}: ${r.error.message} (spool kept at ${it.file})`);
        out.push({ type: 'job.artifact', jobId: spec.jobId, stream: it.stream, state: 'failed', bytes: it.bytes, error: r.error.message.slice(0, 1000) });
      }
    }
    return out;
  }
}

/** A result with nothing to upload. */
const settled = (exit: JobExit): JobResult => ({ exit, spool: null, artifacts: Promise.resolve([]), inlineRelayed: false });

function emptyExit(jobId: string, t0: number): JobExit {
  const empty = { bytes: 0, lines: 0, artifactTruncated: false };
  return {
    type: 'job.exit',
    jobId,
    state: 'failed_to_start',
    exitCode: null,
    signal: null,
    timedOut: false,
    durationMs: Math.round(performance.now() - t0),
    stdout: '',
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: { stdout: empty, stderr: { ...empty } },
    artifactsUploaded: true,
  };
}

/**
 * Never an exit 0: the process did not run. The message is the reason alone (the OS's or the
 * sandbox's); the edge words it for its caller (`Error: execute: spawn failed (…)`, reference 001).
 */
function failedToStart(jobId: string, t0: number, detail: string): JobExit {
  return { ...emptyExit(jobId, t0), error: { code: 'spawn_failed', message: detail || 'the process could not be started' } };
}

/**
 * Bytes of each stream relayed live: the edge keeps them for the live tail and as the readable
 * prefix when the artifact never arrives (kill -9, failed upload). The relay reads them from the
 * spool, so a stream whose artifact cap is below the inline cap relays only what is spooled (the
 * exit's inline result carries the rest).
 */
function liveBytes(plan: Pick<JobPlan, 'inlineBytes' | 'artifactBytes'>): number {
  return Math.max(plan.inlineBytes, Math.min(plan.artifactBytes, LIVE_OUTPUT_MAX_BYTES));
}

/** The watchdog's environment: where `timeout`, `kill` and `runsc` are, nothing else. */
const WATCHDOG_ENV = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' };

/** Up to `max` bytes from `src` until it ends (or is destroyed); '' for no stream. */
async function readSome(src: Readable | null, max: number): Promise<string> {
  if (!src) return '';
  let text = '';
  try {
    for await (const chunk of src as AsyncIterable<Buffer>) {
      if (text.length < max) text += chunk.toString('latin1').slice(0, max - text.length);
      if (text.includes('\n')) break;
    }
  } catch {
    /* destroyed: what we have */
  }
  return text;
}

/** Sum of /proc/PID/io write_bytes over `pids` (each read is tiny and never blocks: procfs). */
async function writtenBytes(pids: number[]): Promise<number> {
  let total = 0;
  await Promise.all(
    pids.map(async (pid) => {
      try {
        const m = /^write_bytes: (\d+)$/m.exec(await readFile(`/proc/${pid}/io`, 'utf8'));
        if (m) total += Number(m[1]);
      } catch {
        /* gone */
      }
    }),
  );
  return total;
}
