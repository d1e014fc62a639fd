/**
 * Wires the connection to the job runner: job.start → runner, output and exits → socket.
 * A job's exit goes out when its process ends; its artifact uploads follow, each reported with
 * a `job.artifact`. Exits and reports are kept until the edge acknowledges them (job.ack) and
 * re-sent after every reconnect, so a result survives a dropped socket.
 */
import type { AgentMessage, JobArtifact, JobExit, JobSpec, RuntimeInfo, SandboxKind, UploadGrant } from '../src/contracts/agent-protocol.ts';
import { PROTOCOL_VERSION } from '../src/contracts/agent-protocol.ts';
import type { CredentialValue } from '../src/contracts/secrets.ts';
import { AGENT_MESSAGE_BUDGET_BYTES, EXIT_PART_CHARS, splitText } from '../src/contracts/limits.ts';
import { EdgeConnection } from './connection.ts';
import { traceLine, type TraceStep } from '../src/contracts/trace.ts';
import type { JobRunner } from './jobs/runner.ts';
import type { Logger } from './log.ts';
import type { AgentMetrics } from './metrics.ts';
import type { WorkspaceStore } from './workspaces/store.ts';
import { WORKSPACES_CAPABILITY } from '../src/contracts/workspaces.ts';
import { join } from 'node:path';

export interface AgentOptions {
  url: string;
  token: string;
  agentId: string;
  version: string;
  capacity: number;
  sandbox: SandboxKind;
  runtimes: RuntimeInfo[];
  /** Placement labels (`--label`), advertised in hello. */
  labels?: string[];
  runner: JobRunner;
  log: Logger;
  /** The gateway refused this agent's claims for good (it does not reconnect). */
  onRefused?: (reason: string) => void;
  /** Counters for `--metrics-port` (executor/metrics.ts). */
  metrics?: AgentMetrics;
  /** Per-task workspaces: set only when the sandbox can mount them (the agent then announces the capability). */
  workspaces?: WorkspaceStore;
  /** Drops idle sandboxes that hold a workspace mounted (the driver's `dropWorkspace`). */
  dropWorkspace?: (dir: string) => Promise<void>;
}

/** Exits kept for an edge that never acks (a lost edge must not grow the agent without bound). */
const MAX_UNACKED = 1000;

export class Agent {
  private readonly o: AgentOptions;
  private readonly conn: EdgeConnection;
  private readonly unacked = new Map<string, JobExit>();
  /** Artifact reports not yet acknowledged, by `jobId/stream`. */
  private readonly unackedArtifacts = new Map<string, JobArtifact>();
  /** Jobs whose uploads still run. */
  private readonly uploading = new Set<string>();
  /** Why the edge cancelled a running job, for its log line. */
  private readonly cancelReasons = new Map<string, string>();
  /** Welcomed connections so far: frames and an exit sent under the same count went on the same socket, in order. */
  private connection = 0;

  constructor(o: AgentOptions) {
    this.o = o;
    this.conn = new EdgeConnection({
      url: o.url,
      token: o.token,
      log: o.log,
      hello: () => ({
        type: 'hello',
        v: PROTOCOL_VERSION,
        agentId: o.agentId,
        version: o.version,
        capacity: o.capacity,
        sandbox: o.sandbox,
        runtimes: o.runtimes,
        labels: o.labels ?? [],
        ...(o.workspaces ? { capabilities: [WORKSPACES_CAPABILITY] } : {}),
        running: this.inFlight(),
      }),
      running: () => this.inFlight(),
      onRefused: o.onRefused,
      onWelcome: (w) => {
        this.connection++;
        if (this.connection > 1 && o.metrics) o.metrics.reconnects++;
        o.log.info(`connected to ${o.url} as agent ${o.agentId} (team ${w.team})`);
        // Exits first: the edge records how a job ended before how its uploads ended.
        for (const exit of this.unacked.values()) this.sendExit(exit);
        for (const report of this.unackedArtifacts.values()) this.send(report);
        // An egress answer decided while this agent was away is asked for again.
        if (this.connection > 1) o.runner.egressAskAgain();
      },
      onMessage: (m) => {
        if (m.type === 'job.start') {
          stamp('agent.job_start');
          this.startJob(m.spec, m.upload, m.credentials);
        } else if (m.type === 'job.cancel') {
          // The reason goes on the job's one line, written when it ends.
          if (o.runner.cancel(m.jobId)) this.cancelReasons.set(m.jobId, m.reason);
          else o.log.info(`cancel for job ${m.jobId}, which is not running here (${m.reason})`);
        } else if (m.type === 'job.input') {
          this.send(o.runner.input(m));
        } else if (m.type === 'egress.answer') {
          if (!o.runner.egressAnswer(m))
            o.log.info(`egress answer ${m.askId} for job ${m.jobId}: no connection waits for it (the job ended, or the wait ran out)`);
        } else if (m.type === 'workspace.delete') {
          void this.deleteWorkspace(m.id);
        } else if (m.type === 'job.ack') {
          if (m.stream) this.unackedArtifacts.delete(`${m.jobId}/${m.stream}`);
          else this.unacked.delete(m.jobId);
        }
      },
    });
  }

  /** `workspace.delete`: its idle sandboxes go first (they hold it mounted), then its directory. */
  private async deleteWorkspace(id: string): Promise<void> {
    const store = this.o.workspaces;
    if (!store) {
      this.send({ type: 'workspace.deleted', id, ok: false, message: 'this agent holds no workspaces' });
      return;
    }
    await this.o.dropWorkspace?.(join(store.dir, id));
    const r = store.delete(id);
    this.o.log.info(`workspace ${id} deleted${r.message ? `: ${r.message}` : ''}`);
    this.send({ type: 'workspace.deleted', id, ok: r.ok, ...(r.message ? { message: r.message } : {}) });
  }

  start(): void {
    this.conn.start();
  }

  /** Whether a welcomed connection to the gateway is open now. */
  get connected(): boolean {
    return this.conn.ready;
  }

  async stop(): Promise<void> {
    await this.o.runner.shutdown();
    // Give the exits of cancelled jobs a moment to go out before closing.
    for (const exit of this.unacked.values()) this.sendExit(exit);
    this.conn.stop();
  }

  /** Running jobs, and finished ones whose result or uploads the edge has not acknowledged yet. */
  private inFlight(): string[] {
    const reports = [...this.unackedArtifacts.values()].map((r) => r.jobId);
    return [...new Set([...this.o.runner.runningIds(), ...this.unacked.keys(), ...this.uploading, ...reports])];
  }

  private send(m: AgentMessage): boolean {
    return this.conn.send(m);
  }

  private startJob(spec: JobSpec, grant: UploadGrant | undefined, credentials: CredentialValue[] | undefined): void {
    const { log, runner } = this.o;
    // Asks need the edge now (no connection: refused at once); records are best effort, sent before the exit.
    const edge = { ask: (m: AgentMessage) => this.send(m), log: (m: AgentMessage) => void this.send(m) };
    // The connection the job's first live frame went on (later ones went on it too unless the count moved since).
    let framesOn: number | null = null;
    const sendFrame = (f: Uint8Array) => {
      const sent = this.conn.sendFrame(f);
      if (sent) framesOn ??= this.connection;
      return sent;
    };
    const r = runner.start(spec, { sendFrame, buffered: () => this.conn.buffered() }, grant, edge, credentials);
    if (!r.accepted) {
      log.warn(`refused job ${spec.jobId}: ${r.error.code}: ${r.error.message}`);
      this.send(r.error);
      return;
    }
    if (this.o.metrics) this.o.metrics.jobsStarted++;
    void r.done.then(async ({ exit: ended, artifacts, inlineRelayed }) => {
      stamp('agent.exit_ready');
      this.o.metrics?.jobEnded(ended.state);
      const cancelled = this.cancelReasons.get(spec.jobId);
      // The edge's reason for a cancel (an interactive session's idle TTL, a kill's reason) is how the job ended.
      const exit = cancelled && ended.state === 'cancelled' && !ended.error ? { ...ended, error: { code: 'cancelled', message: cancelled } } : ended;
      this.cancelReasons.delete(spec.jobId);
      jobLine(log, spec, exit, cancelled);
      if (this.unacked.size >= MAX_UNACKED) this.unacked.delete(this.unacked.keys().next().value!);
      // Kept whole: a re-send (after a reconnect) carries the text, since the new socket's edge may lack frames.
      this.unacked.set(spec.jobId, exit);
      if (exit.pendingArtifacts?.length) this.uploading.add(spec.jobId);
      this.sendExit(inlineRelayed && framesOn === this.connection ? liveInlineForm(exit) : exit);
      stamp('agent.exit_sent');
      try {
        for (const report of await artifacts) {
          if (this.unackedArtifacts.size >= 2 * MAX_UNACKED) this.unackedArtifacts.delete(this.unackedArtifacts.keys().next().value!);
          this.unackedArtifacts.set(`${report.jobId}/${report.stream}`, report);
          // A stored stream says nothing here; the runner logs a failed upload (with where its spool file is kept).
          this.send(report);
        }
      } finally {
        this.uploading.delete(spec.jobId);
      }
    });
  }

  /** A result whose inline output would not fit one WebSocket message goes as parts, then the exit. */
  private sendExit(exit: JobExit): void {
    for (const m of exitMessages(exit)) if (!this.send(m)) return;
  }
}

/**
 * The one log line of a job, written when its process ends: id, state (with exit code or signal)
 * and duration, as `job 7c1e… exited 0 in 41 ms`; what it ran, a failure's reason or a cancel's
 * reason follow in parentheses. In JSON the same facts are fields.
 */
function jobLine(log: Logger, spec: JobSpec, exit: JobExit, cancelled: string | undefined): void {
  const what = `${spec.mode}${spec.runtime ? ` ${spec.runtime}` : ''}`;
  const why = cancelled ?? (exit.error ? `${exit.error.code}: ${exit.error.message.split('\n')[0].slice(0, 200)}` : undefined);
  const code = exit.exitCode !== null ? ` ${exit.exitCode}` : '';
  const signal = exit.signal ? ` ${exit.signal}` : '';
  log.info(`job ${spec.jobId} ${exit.state}${code}${signal} in ${exit.durationMs} ms (${what}${why ? `; ${why}` : ''})`, {
    job: spec.jobId,
    state: exit.state,
    exitCode: exit.exitCode,
    signal: exit.signal,
    durationMs: exit.durationMs,
    mode: spec.mode,
    ...(spec.runtime ? { runtime: spec.runtime } : {}),
    ...(why ? { reason: why } : {}),
  });
}

/**
 * `exit` on its first send when every byte of its inline result went out as live frames on the
 * socket it goes on: the text is left to the edge to rebuild from them (`inlineFromLive`), so the
 * output crosses the socket once, as binary. An exit with no inline text has nothing to save.
 */
function liveInlineForm(exit: JobExit): JobExit {
  if (exit.stdout === '' && exit.stderr === '') return exit;
  return { ...exit, stdout: '', stderr: '', inlineFromLive: true };
}

/**
 * The messages that carry `exit`: itself when it fits the message budget, else its inline
 * output in `job.exit.part` pieces followed by the exit with empty output and the part counts.
 */
export function exitMessages(exit: JobExit, budget = AGENT_MESSAGE_BUDGET_BYTES, partChars = EXIT_PART_CHARS): AgentMessage[] {
  if (Buffer.byteLength(JSON.stringify(exit)) <= budget) return [exit];
  const out: AgentMessage[] = [];
  const counts = { stdout: 0, stderr: 0 };
  for (const stream of ['stdout', 'stderr'] as const) {
    const pieces = exit[stream] === '' ? [] : splitText(exit[stream], partChars);
    pieces.forEach((data, seq) => {
      out.push({ type: 'job.exit.part', jobId: exit.jobId, stream, seq, data });
    });
    counts[stream] = pieces.length;
  }
  out.push({ ...exit, stdout: '', stderr: '', parts: counts });
  return out;
}

/** Bench only (`node bench/hotpath.ts --trace` sets HOTPATH_TRACE=1): the agent's steps of a call (src/contracts/trace.ts). */
const TRACING = process.env.HOTPATH_TRACE === '1';
function stamp(step: TraceStep): void {
  if (TRACING) console.log(traceLine(step));
}
