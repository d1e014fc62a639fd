/**
 * TeamDispatcher: one Durable Object per team. It holds the team's executor-agent WebSockets
 * (hibernation API), tracks their capacity and liveness, enforces the team's concurrency limit
 * (strongly consistent: one DO instance decides), hands jobs to agents and relays their events
 * back to the waiting tool call as an NDJSON stream.
 */
import { DurableObject } from 'cloudflare:workers';
import type { Env } from '../env.ts';
import {
  PROTOCOL_VERSION, parseAgentMessage,
  type AgentHello, type EdgeMessage, type JobExit, type JobSpec,
} from '../contracts/agent-protocol.ts';
import { describeIssues } from '../contracts/errors.ts';
import { RUNTIMES, type RuntimeName } from '../contracts/runtimes.ts';
import { DispatchRequest, DO_PATHS, type AgentView, type DispatchEvent } from './events.ts';
import { concurrencyLimitMessage } from '../policy/engine.ts';
import { recordJobRunning, recordJobEnd } from '../store/jobs.ts';

/** Per-socket state that must survive hibernation (serialized attachment). */
interface AgentAttachment {
  subject: string;
  connectedAt: number;
  lastSeen: number;
  hello: AgentHello | null;
  /** Job ids the agent itself reports running (hello/heartbeat). */
  running: string[];
}

interface ActiveJob {
  spec: JobSpec;
  agentId: string;
  cancelKey: string;
  startedAt: number;
  /** Set when the agent's socket went away: the job is `lost` unless the agent returns in time. */
  orphanedAt: number | null;
  send: (e: DispatchEvent) => void;
  finish: () => void;
}

interface Waiter {
  req: DispatchRequest;
  deadline: number;
  send: (e: DispatchEvent) => void;
  finish: () => void;
  timer: ReturnType<typeof setTimeout>;
}

const MISSED_HEARTBEATS = 3;
/** How long past its own timeout a job may take to report before the edge calls it lost. */
const JOB_GRACE_MS = 60_000;

export class TeamDispatcher extends DurableObject<Env> {
  private jobs = new Map<string, ActiveJob>();
  private queue: Waiter[] = [];
  /** Results already accepted: an agent re-sending after a reconnect gets an ack, not a second result. */
  private accepted = new Set<string>();

  private heartbeatMs(): number {
    const n = Number(this.env.HEARTBEAT_MS ?? '5000');
    return Number.isFinite(n) && n >= 100 ? n : 5000;
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const team = request.headers.get('X-Gatehouse-Team') ?? '';
    if (team) await this.rememberTeam(team);
    switch (url.pathname) {
      case DO_PATHS.connect:
        return this.acceptAgent(request);
      case DO_PATHS.run:
        return this.run(request);
      case DO_PATHS.cancel: {
        const { cancelKey, reason } = (await request.json()) as { cancelKey: string; reason?: string };
        return Response.json({ cancelled: this.cancelByKey(cancelKey, reason ?? 'cancelled by the client') });
      }
      case DO_PATHS.agents:
        return Response.json({ agents: this.agentViews() });
      default:
        return new Response('not found', { status: 404 });
    }
  }

  /** The team this DO serves: every request carries it; storage keeps it for wake-ups from alarms/sockets. */
  private teamName: string | null = null;

  private async rememberTeam(team: string): Promise<void> {
    if (this.teamName === team) return;
    this.teamName = team;
    if ((await this.ctx.storage.get('team')) !== team) await this.ctx.storage.put('team', team);
  }

  private async team(): Promise<string> {
    this.teamName ??= ((await this.ctx.storage.get('team')) as string | undefined) ?? '';
    return this.teamName;
  }

  // ---- agent sockets ----

  private acceptAgent(request: Request): Response {
    if (request.headers.get('Upgrade')?.toLowerCase() !== 'websocket') {
      return Response.json({ error: { code: 'invalid_argument', message: 'expected a WebSocket upgrade' } }, { status: 426 });
    }
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    const now = Date.now();
    const att: AgentAttachment = { subject: request.headers.get('X-Gatehouse-Subject') ?? '', connectedAt: now, lastSeen: now, hello: null, running: [] };
    this.ctx.acceptWebSocket(server);
    server.serializeAttachment(att);
    void this.ensureAlarm();
    return new Response(null, { status: 101, webSocket: client });
  }

  async webSocketMessage(ws: WebSocket, raw: string | ArrayBuffer): Promise<void> {
    const parsed = parseAgentMessage(raw);
    const att = ws.deserializeAttachment() as AgentAttachment;
    if (!parsed.ok) {
      console.warn(`agent ${att.hello?.agentId ?? '(before hello)'}: rejected message: ${parsed.reason}`);
      return;
    }
    const msg = parsed.message;
    att.lastSeen = Date.now();
    if (msg.type !== 'hello' && !att.hello) {
      console.warn(`agent sent ${msg.type} before hello; closing`);
      ws.close(1002, 'hello first');
      return;
    }
    switch (msg.type) {
      case 'hello': {
        // A reconnecting agent replaces its previous socket (same agent id).
        for (const other of this.ctx.getWebSockets()) {
          if (other === ws) continue;
          const o = other.deserializeAttachment() as AgentAttachment;
          if (o.hello?.agentId === msg.agentId) other.close(1000, 'replaced by a new connection');
        }
        att.hello = msg;
        att.running = msg.running;
        for (const id of msg.running) {
          const j = this.jobs.get(id);
          if (j && j.agentId === msg.agentId) j.orphanedAt = null;
        }
        ws.serializeAttachment(att);
        this.sendTo(ws, { type: 'welcome', v: PROTOCOL_VERSION, team: await this.team(), heartbeatMs: this.heartbeatMs() });
        this.pump();
        return;
      }
      case 'heartbeat':
        att.running = msg.running;
        ws.serializeAttachment(att);
        return;
      case 'job.output': {
        ws.serializeAttachment(att);
        this.jobs.get(msg.jobId)?.send({ type: 'output', stream: msg.stream, data: msg.data });
        return;
      }
      case 'job.exit': {
        ws.serializeAttachment(att);
        this.sendTo(ws, { type: 'job.ack', jobId: msg.jobId });
        if (this.accepted.has(msg.jobId)) return;
        this.accepted.add(msg.jobId);
        this.finishJob(msg.jobId, msg, att.hello!.agentId);
        return;
      }
      case 'job.error': {
        ws.serializeAttachment(att);
        const j = this.jobs.get(msg.jobId);
        if (!j) return;
        this.jobs.delete(msg.jobId);
        j.send({ type: 'error', code: msg.code, message: msg.message });
        j.finish();
        void this.record(async () => recordJobEnd(this.env.DB, await this.team(), msg.jobId, { state: 'failed_to_start', error: msg.message }));
        this.pump();
        return;
      }
    }
  }

  async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    this.dropAgentSocket(ws, `closed (${code}${reason ? `: ${reason}` : ''})`);
  }

  async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    this.dropAgentSocket(ws, `socket error: ${String(error)}`);
  }

  /** Jobs of a vanished agent are not failed at once: the agent may reconnect and deliver them. */
  private dropAgentSocket(ws: WebSocket, why: string): void {
    const att = ws.deserializeAttachment() as AgentAttachment | null;
    const agentId = att?.hello?.agentId;
    if (!agentId) return;
    console.log(`agent ${agentId} ${why}`);
    const stillConnected = this.liveSockets().some((s) => s !== ws && (s.deserializeAttachment() as AgentAttachment).hello?.agentId === agentId);
    if (stillConnected) return;
    const now = Date.now();
    for (const j of this.jobs.values()) if (j.agentId === agentId && j.orphanedAt === null) j.orphanedAt = now;
    void this.ensureAlarm();
  }

  private sendTo(ws: WebSocket, m: EdgeMessage): boolean {
    try {
      ws.send(JSON.stringify(m));
      return true;
    } catch {
      return false;
    }
  }

  private liveSockets(): WebSocket[] {
    return this.ctx.getWebSockets().filter((ws) => ws.readyState === WebSocket.OPEN);
  }

  private agents(): { ws: WebSocket; att: AgentAttachment; hello: AgentHello; load: number }[] {
    const out = [];
    for (const ws of this.liveSockets()) {
      const att = ws.deserializeAttachment() as AgentAttachment;
      if (!att.hello) continue;
      const mine = [...this.jobs.values()].filter((j) => j.agentId === att.hello!.agentId).length;
      // Jobs the agent runs that this instance no longer tracks (e.g. after an eviction) still use slots.
      const untracked = att.running.filter((id) => !this.jobs.has(id)).length;
      out.push({ ws, att, hello: att.hello, load: mine + untracked });
    }
    return out;
  }

  private agentViews(): AgentView[] {
    return this.agents().map(({ att, hello, load }) => ({
      agentId: hello.agentId, version: hello.version, sandbox: hello.sandbox, capacity: hello.capacity, running: load,
      runtimes: hello.runtimes, connectedAt: att.connectedAt, lastSeen: att.lastSeen,
    }));
  }

  // ---- jobs ----

  private async run(request: Request): Promise<Response> {
    let body: unknown;
    try {
      body = await request.json();
    } catch {
      return Response.json({ error: { code: 'invalid_argument', message: 'body is not JSON' } }, { status: 400 });
    }
    const parsed = DispatchRequest.safeParse(body);
    if (!parsed.success) {
      return Response.json({ error: { code: 'invalid_argument', message: describeIssues(parsed.error.issues) } }, { status: 400 });
    }
    const req = parsed.data;
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const writer = writable.getWriter();
    const enc = new TextEncoder();
    let open = true;
    const finish = () => {
      if (!open) return;
      open = false;
      writer.close().catch(() => {});
    };
    const send = (e: DispatchEvent) => {
      if (!open) return;
      writer.write(enc.encode(JSON.stringify(e) + '\n')).catch(() => {
        // The caller went away (client disconnected): stop the job rather than run it for nobody.
        open = false;
        this.cancelJob(req.spec.jobId, 'the caller disconnected');
      });
    };
    this.admit(req, send, finish);
    return new Response(readable, { headers: { 'Content-Type': 'application/x-ndjson' } });
  }

  private admit(req: DispatchRequest, send: (e: DispatchEvent) => void, finish: () => void): void {
    const agents = this.agents();
    if (agents.length === 0) {
      void this.team().then((t) => {
        send({ type: 'error', code: 'no_agent', message: noAgentMessage(t) });
        finish();
      });
      return;
    }
    if (req.runtime && !agents.some((a) => a.hello.runtimes.some((r) => r.name === req.runtime))) {
      const def = RUNTIMES[req.runtime as RuntimeName];
      send({
        type: 'error', code: 'runtime_unavailable',
        message: `runtime "${req.runtime}" is not installed on any connected executor agent; install ${def ? `the Debian package ${def.debianPackage}` : 'its toolchain'} on the agent host and restart the agent`,
      });
      finish();
      return;
    }
    if (this.tryStart(req, send, finish)) return;
    if (req.queueWaitMs <= 0) {
      this.refuseBusy(req, send, finish);
      return;
    }
    const w: Waiter = {
      req, send, finish, deadline: Date.now() + req.queueWaitMs,
      timer: setTimeout(() => {
        const i = this.queue.indexOf(w);
        if (i < 0) return;
        this.queue.splice(i, 1);
        this.refuseBusy(req, send, finish);
      }, req.queueWaitMs),
    };
    this.queue.push(w);
    send({ type: 'queued', position: this.queue.length });
  }

  private refuseBusy(req: DispatchRequest, send: (e: DispatchEvent) => void, finish: () => void): void {
    const active = this.jobs.size;
    const agents = this.agents();
    const slots = agents.reduce((n, a) => n + a.hello.capacity, 0);
    const message = active >= req.maxConcurrentJobs || slots >= req.maxConcurrentJobs
      ? concurrencyLimitMessage(active, req.maxConcurrentJobs)
      : `All executor agents are busy (${active}/${slots} slots in use on ${agents.length} agent${agents.length === 1 ? '' : 's'}); try again later or start another agent`;
    send({ type: 'error', code: 'concurrency_limit', message });
    finish();
  }

  /** Starts the job on the least-loaded agent with a free slot, within the team limit. */
  private tryStart(req: DispatchRequest, send: (e: DispatchEvent) => void, finish: () => void): boolean {
    if (this.jobs.size >= req.maxConcurrentJobs) return false;
    const candidates = this.agents()
      .filter((a) => a.load < a.hello.capacity)
      .filter((a) => !req.runtime || a.hello.runtimes.some((r) => r.name === req.runtime))
      .sort((a, b) => a.load / a.hello.capacity - b.load / b.hello.capacity);
    const agent = candidates[0];
    if (!agent) return false;
    if (!this.sendTo(agent.ws, { type: 'job.start', spec: req.spec })) return false;
    const now = Date.now();
    this.jobs.set(req.spec.jobId, { spec: req.spec, agentId: agent.hello.agentId, cancelKey: req.cancelKey, startedAt: now, orphanedAt: null, send, finish });
    send({ type: 'started', agentId: agent.hello.agentId });
    void this.record(async () => recordJobRunning(this.env.DB, await this.team(), req.spec.jobId, agent.hello.agentId, now));
    void this.ensureAlarm();
    return true;
  }

  /** Fills free slots from the queue, oldest first. */
  private pump(): void {
    while (this.queue.length) {
      const w = this.queue[0];
      if (!this.tryStart(w.req, w.send, w.finish)) return;
      clearTimeout(w.timer);
      this.queue.shift();
    }
  }

  private finishJob(jobId: string, exit: JobExit, agentId: string): void {
    const j = this.jobs.get(jobId);
    this.jobs.delete(jobId);
    this.accepted.add(jobId);
    if (j) {
      j.send({ type: 'exit', exit, agentId });
      j.finish();
    }
    void this.record(async () => recordJobEnd(this.env.DB, await this.team(), jobId, { state: exit.state, exitCode: exit.exitCode, signal: exit.signal, durationMs: exit.durationMs, error: exit.error?.message }));
    this.pump();
  }

  private cancelByKey(cancelKey: string, reason: string): boolean {
    const queued = this.queue.findIndex((w) => w.req.cancelKey === cancelKey);
    if (queued >= 0) {
      const [w] = this.queue.splice(queued, 1);
      clearTimeout(w.timer);
      w.send({ type: 'error', code: 'cancelled', message: `cancelled before it started: ${reason}` });
      w.finish();
      return true;
    }
    for (const [id, j] of this.jobs) if (j.cancelKey === cancelKey) return this.cancelJob(id, reason);
    return false;
  }

  private cancelJob(jobId: string, reason: string): boolean {
    const j = this.jobs.get(jobId);
    if (!j) return false;
    const agent = this.agents().find((a) => a.hello.agentId === j.agentId);
    // The agent answers with job.exit state `cancelled`; that result is what the caller gets.
    if (agent) return this.sendTo(agent.ws, { type: 'job.cancel', jobId, reason });
    return false;
  }

  // ---- liveness ----

  private async ensureAlarm(): Promise<void> {
    const current = await this.ctx.storage.getAlarm();
    if (current === null) await this.ctx.storage.setAlarm(Date.now() + this.heartbeatMs());
  }

  async alarm(): Promise<void> {
    const hb = this.heartbeatMs();
    const now = Date.now();
    const silentFor = MISSED_HEARTBEATS * hb;
    for (const ws of this.liveSockets()) {
      const att = ws.deserializeAttachment() as AgentAttachment;
      if (now - att.lastSeen > silentFor) {
        ws.close(4000, `no heartbeat for ${now - att.lastSeen}ms`);
        this.dropAgentSocket(ws, 'missed heartbeats');
      }
    }
    for (const [id, j] of this.jobs) {
      const orphaned = j.orphanedAt !== null && now - j.orphanedAt > silentFor;
      const overdue = now - j.startedAt > j.spec.timeoutMs + JOB_GRACE_MS;
      if (orphaned || overdue) this.finishJob(id, lostExit(id, now - j.startedAt, orphaned ? `executor agent ${j.agentId} disconnected and did not come back within ${silentFor}ms` : `executor agent ${j.agentId} did not report the job's end within its timeout plus ${JOB_GRACE_MS}ms`), j.agentId);
    }
    if (this.jobs.size > 0 || this.liveSockets().length > 0) await this.ctx.storage.setAlarm(Date.now() + hb);
  }

  /** D1 bookkeeping must never break the relay of a result. */
  private async record(f: () => Promise<unknown>): Promise<void> {
    try {
      await f();
    } catch (e) {
      console.error(`job bookkeeping failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
}

export function noAgentMessage(team: string): string {
  return `no executor agent is connected for team '${team}'; start one with: npx gatehouse agent --url <gateway url> --token-file <file with the agent token> --root <workspace dir> (mint the token with: gatehouse token create --team ${team} --scope agent)`;
}

function lostExit(jobId: string, durationMs: number, why: string): JobExit {
  const empty = { bytes: 0, lines: 0, artifactTruncated: false };
  return {
    type: 'job.exit', jobId, state: 'lost', exitCode: null, signal: null, timedOut: false, durationMs,
    stdout: '', stderr: '', stdoutTruncated: false, stderrTruncated: false,
    streams: { stdout: empty, stderr: empty }, artifactsUploaded: false,
    error: { code: 'lost', message: why },
  };
}
