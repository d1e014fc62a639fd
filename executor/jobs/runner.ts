/**
 * The job runner: takes `job.start` specs, enforces capacity and the local floor, runs each
 * job in a fresh sandbox with a timeout that kills the whole sandbox, captures and spools
 * output, produces a truthful JobExit as soon as the process ends, then uploads the artifacts
 * and reports how each upload ended. This file admits jobs and takes each through its course; a
 * launched job is watched by supervise.ts, and its exit and result are made by job-exit.ts.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import type { JobError, JobSpec, StreamName, UploadGrant } from '../../src/contracts/agent-protocol.ts';
import type { Logger } from '../log.ts';
import type { Sandbox, SandboxDriver } from '../sandbox/types.ts';
import type { RuntimeTable } from '../runtimes/probe.ts';
import { StreamCapture } from './capture.ts';
import { OutputRelay, type LiveSink } from './relay.ts';
import { launchScript } from './launcher.ts';
import { jobRlimits } from './limits.ts';
import { expandTemplate, planJob, type Ceilings, type JobPlan } from './plan.ts';
import { checkCwd } from './resolve.ts';
import type { UploadTarget } from './upload.ts';
import { failedToStart, finishJob, settled, stoppedEarly, type JobResult } from './job-exit.ts';
import { superviseLaunch } from './supervise.ts';
import { LIVE_OUTPUT_MAX_BYTES } from '../../src/contracts/limits.ts';
import type { EgressAnswer, NetworkGrant } from '../../src/contracts/network.ts';
import { EgressProxy, type EgressEdge } from '../egress/proxy.ts';
import type { AgentCa } from '../egress/agent-ca.ts';
import type { HeldCredential } from '../egress/gate.ts';
import { holdCredentials } from '../egress/credential-trust.ts';
import type { CredentialValue } from '../../src/contracts/secrets.ts';
import { forwarderAvailable, openJobEgress } from '../egress/sandbox-side.ts';
import type { TestHosts } from '../egress/test-hosts.ts';
import type { JobInput, JobInputAck } from '../../src/contracts/interactive.ts';
import { JobStdin } from './stdin.ts';
import { onTerminal, ttyAvailable } from './tty.ts';
import type { PreparedWorkspace, WorkspaceStore } from '../workspaces/store.ts';
import { workspaceLimitError, workspacePlanRoot, workspaceRefusal } from '../workspaces/job.ts';

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
  /** The agent's egress CA (agent-ca.ts): the proxy terminates TLS with it for a job's credential hosts. */
  agentCa?: AgentCa;
  /** PEM certificates (--extra-ca) the proxy trusts, besides Node's roots, on its own TLS to a credential host. */
  upstreamCas?: string[];
  /** Set in every job's env after the job's own (the trusted CA variables, sandbox/trusted-cas.ts): a job spec cannot change them. */
  agentEnv?: Record<string, string>;
  /** Per-task workspaces; absent: a job that names one is refused. */
  workspaces?: WorkspaceStore;
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
  /** An interactive job's stdin (`job.input`). */
  stdin?: JobStdin;
}

/** Sends nothing: a runner without an edge (tests) refuses every ask and drops the records. */
const NO_EDGE: EgressEdge = { ask: () => false, log: () => {} };

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
  start(spec: JobSpec, live: LiveSink, grant?: UploadGrant, edge: EgressEdge = NO_EDGE, credentials?: CredentialValue[]): StartResult {
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
    const held = network ? holdCredentials(network, credentials) : { ok: true as const, held: [] };
    if (!held.ok) return refuse('invalid_argument', held.message);
    if (held.held.length && !this.opts.agentCa)
      return refuse('network_unavailable', 'the job has credentials and this agent has no egress CA to add them with');
    if (spec.interactive?.tty && !ttyAvailable()) {
      return refuse(
        'spawn_failed',
        'the job asks for a terminal (tty), which needs util-linux `script` (/usr/bin/script) on the agent host; install util-linux',
      );
    }
    const wsRefusal = workspaceRefusal(spec, d, this.opts.workspaces);
    if (wsRefusal) return refuse(wsRefusal.code, wsRefusal.message);
    const hostVisible = d.kind === 'none';
    // A workspace job's cwd is checked in its own directory (in `run` when this job creates it).
    const planRoot = workspacePlanRoot(spec, this.opts.root, this.opts.workspaces);
    const planned = planJob(planRoot.spec, {
      root: planRoot.root,
      workspaceInside: hostVisible ? this.opts.root : '/workspace',
      hostVisible,
      runtimes: this.opts.runtimes,
      ceilings: this.opts.ceilings,
    });
    const t0 = performance.now();
    if (!planned.ok && planned.failure.kind === 'refuse') return refuse(planned.failure.error.code, planned.failure.error.message);
    const job: LiveJob = { spec, grant, sandbox: null, stop: null, stopNow: () => {}, stdin: spec.interactive ? new JobStdin(spec.jobId) : undefined };
    this.jobs.set(spec.jobId, job);
    const done = (async (): Promise<JobResult> => {
      try {
        if (!planned.ok) return settled(failedToStart(spec.jobId, t0, planned.failure.kind === 'spawn_failed' ? planned.failure.detail : ''));
        return await this.run(job, planned.plan, live, t0, network, edge, held.ok ? held.held : []);
      } catch (e) {
        this.opts.log.error(`job ${spec.jobId}: ${(e as Error).stack ?? e}`);
        return settled(failedToStart(spec.jobId, t0, (e as Error).message));
      } finally {
        job.stdin?.end();
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

  /** A `job.input` from the edge: written to the job's stdin (or refused), answered with its ack. */
  input(m: JobInput): JobInputAck {
    const stdin = this.jobs.get(m.jobId)?.stdin;
    if (stdin) return stdin.write(m);
    const why = this.jobs.has(m.jobId) ? 'the job is not interactive (its stdin was closed at start)' : 'the job is not running on this agent';
    return { type: 'job.input.ack', jobId: m.jobId, seq: m.seq, ok: false, error: why };
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

  private async run(
    job: LiveJob,
    planned: JobPlan,
    live: LiveSink,
    t0: number,
    network: NetworkGrant | null,
    edge: EgressEdge,
    held: HeldCredential[],
  ): Promise<JobResult> {
    const { spec } = job;
    const { log, driver } = this.opts;
    let plan = planned;
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
    let limits = plan.limits;
    let ws: PreparedWorkspace | null = null;
    let wsOk = false;
    try {
      if (spec.workspace && this.opts.workspaces) {
        const prepared = await this.opts.workspaces.prepare(spec.workspace);
        if (!prepared.ok) return settled(failedToStart(spec.jobId, t0, prepared.error.message, prepared.error.code));
        ws = prepared.value;
        const room = spec.workspace.quotaBytes - ws.bytes;
        if (room <= 0) {
          const full = workspaceLimitError(spec.workspace, ws.bytes);
          return settled(failedToStart(spec.jobId, t0, full.message, full.code));
        }
        if (!ws.clone && spec.cwd) {
          const cwd = checkCwd(ws.hostDir, spec.cwd);
          if (!cwd.ok) return settled(failedToStart(spec.jobId, t0, cwd.error.message, cwd.error.code));
          plan = { ...plan, cwd: cwd.value };
        } else if (ws.clone) plan = { ...plan, cwd: spec.cwd };
        // The quota is enforced as the job's disk-write limit (what it may still add), and checked again after it.
        limits = { ...limits, diskWriteBytes: Math.min(limits.diskWriteBytes, room) };
      }
      let sandbox: Sandbox;
      try {
        // A hardened git runs through the launcher script, which only a fresh sandbox starts. So does a job with
        // network (a sandbox that may reach the host socket of its proxy), and an interactive one (stdin is its own).
        const workspaceDir = ws ? { workspaceDir: ws.hostDir } : {};
        sandbox = network
          ? await driver.acquire(spec.jobId, limits, undefined, { egress: true, ...workspaceDir })
          : await driver.acquire(spec.jobId, limits, plan.hardenGit || ws?.clone || spec.interactive ? undefined : spec.reuse, workspaceDir);
      } catch (e) {
        return settled(failedToStart(spec.jobId, t0, `sandbox did not start: ${(e as Error).message}`));
      }
      job.sandbox = sandbox;
      try {
        if (job.stop) return settled(stoppedEarly(spec.jobId, t0, job.stop));
        let env = { ...plan.env, ...this.opts.agentEnv };
        let prelude: { argv: string[]; failure: string } | undefined;
        if (network) {
          const opened = await openJobEgress(sandbox, () => {
            const ca = this.opts.agentCa;
            const credentials = held.length && ca ? { held, ca, upstreamCas: this.opts.upstreamCas } : undefined;
            job.proxy = new EgressProxy({ jobId: spec.jobId, grant: network, edge, testHosts: this.opts.egressTestHosts ?? null, log, credentials });
            return job.proxy;
          });
          if (!opened.ok) return settled(failedToStart(spec.jobId, t0, opened.message));
          env = { ...env, ...opened.inside.env };
          prelude = opened.inside.prelude;
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
        const argv = c ? expandTemplate(c.run, vars) : plan.argv!;
        const run = spec.interactive?.tty ? onTerminal(argv, spec.interactive.tty) : argv;
        const rlimits = jobRlimits(limits, driver.processLimitByRlimit);
        const script = launchScript({
          cwd: cwdInside,
          env,
          build,
          run,
          rlimits,
          ...(plan.hardenGit ? { hardenGit: plan.hardenGit } : {}),
          ...(prelude ? { prelude } : {}),
          ...(ws?.clone ? { clone: { git: '/usr/bin/git', ...ws.clone, into: sandbox.workspaceInside } } : {}),
        });
        const steps = plan.hardenGit || network || ws?.clone ? undefined : { cwd: cwdInside, env, ...(build ? { build } : {}), run, rlimits };
        const launched = await superviseLaunch(
          sandbox,
          { script, steps },
          {
            jobId: spec.jobId,
            stopped: () => job.stop !== null,
            stdin: spec.stdin,
            ...(job.stdin ? { keepStdin: (w: Writable) => job.stdin?.attach(w) } : {}),
            caps,
            timeoutMs: plan.timeoutMs,
            diskWriteBytes: limits.diskWriteBytes,
            graceMs: this.graceMs,
            drainMs: this.drainMs,
            diskPollMs: this.opts.diskPollMs,
            log,
          },
        );
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
        const wsAfter = ws ? await this.opts.workspaces!.bytes(ws.id) : 0;
        const wsError =
          ws && spec.workspace
            ? workspaceLimitError(spec.workspace, wsAfter, { diskExceeded: launched.diskExceeded, end, clone: ws.clone, hostDir: ws.hostDir })
            : null;
        wsOk = ws !== null && (wsError === null || wsError.code !== 'workspace_error');
        const limitError =
          wsError && (wsError.code === 'workspace_error' || wsError.over)
            ? { code: wsError.code, message: wsError.message }
            : launched.diskExceeded
              ? { code: 'disk_write_limit', message: `the job was stopped: it wrote more than ${limits.diskWriteBytes} bytes to disk (limits.diskWriteBytes)` }
              : end.kind === 'signaled' && end.signal === 'SIGKILL' && !job.stop && launched.memoryHit
                ? { code: 'memory_limit', message: `the job was killed: it used more than ${limits.memoryBytes} bytes of memory (limits.memoryBytes)` }
                : undefined;
        const upload = this.opts.upload ? { target: this.opts.upload, grant: job.grant, log } : null;
        const notices = [...timeoutNotice(spec.timeoutMs, plan.timeoutMs), ...(job.proxy?.refusalNotices() ?? [])];
        const result = await finishJob(spec, t0, { end, stop: job.stop, phase, compileError, limitError, notices }, caps, relay, upload);
        if (ws) result.exit.workspace = { id: ws.id, bytes: wsAfter };
        return result;
      } finally {
        // The job's connections end with it; their records go out before its exit does.
        await job.proxy?.close();
        void sandbox.destroy().catch((e) => log.error(`sandbox ${sandbox.id} teardown: ${(e as Error).message}`));
      }
    } finally {
      ws?.release(wsOk);
      clearTimeout(timer);
      await relay.close();
      await caps.stdout.close();
      await caps.stderr.close();
    }
  }
}

/** Said in the result when this agent's ceiling (--max-timeout-ms) cut the timeout the edge sent. */
function timeoutNotice(asked: number, given: number): string[] {
  return given < asked ? [`timeout ${asked}ms lowered to ${given}ms: this agent's ceiling (its --max-timeout-ms)`] : [];
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
