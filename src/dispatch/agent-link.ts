/**
 * The link to the team's executor agents: their WebSockets (hibernation API), who each socket is
 * (its attachment: identity only, ≤ 16 KiB), each socket's message budget, liveness and revocation.
 * The agents themselves — what each said in its `hello` — are in the registry (the `agents` table,
 * src/dispatch/agent-registry.ts), which this capability owns.
 *
 * Liveness costs an idle team nothing: an agent's heartbeat (AGENT_PING) is answered by the platform
 * without waking the object, which reads when it last did (`DispatchHost.lastPing`) only when it is
 * awake anyway — to place a job (a silent agent gets none), to list agents, and in the alarm, which
 * runs only while something is due (a running job, a queue deadline): no alarm is armed for liveness
 * alone, and no row is written per heartbeat. Revocation reaches the object as `revoke` (the edge's
 * revoke calls it before answering); nothing here asks D1.
 *
 * Memory holds caches only (attachments read once per instance, the registry's rows, when each
 * socket last sent a message, `last_seen` write throttling of protocol-2 heartbeats, the budgets —
 * see agent-budget.ts for what a restart means for those): a restarted object reads every socket's
 * attachment and every agent's row back from the platform and from SQLite.
 */
import type { AgentHello, EdgeMessage } from '../contracts/agent-protocol.ts';
import { AGENT_RECONNECT_MAX_BACKOFF_MS, MISSED_HEARTBEATS } from '../contracts/agent-protocol.ts';
import { AGENT_GRANT_HEADER, parseAgentGrant, type AgentGrant } from '../contracts/agent-grant.ts';
import type { AgentView } from '../contracts/job-view.ts';
import { attachmentBytes } from '../contracts/limits.ts';
import { HIBERNATION_ATTACHMENT_MAX_BYTES } from '../platform/limits.ts';
import { AGENT_CONNECT_AUDIT_TOOL, type AuditEntry } from '../store/audit.ts';
import { AgentBudget } from './agent-budget.ts';
import { AgentRegistry } from './agent-registry.ts';
import type { DispatchHost, TimedWork } from './capability-host.ts';

/** What the link uses of the object: its sockets and their pings, the clock, the team, its audit, and SQLite for the registry. */
type LinkHost = Pick<DispatchHost, 'sql' | 'transactionSync' | 'sockets' | 'lastPing' | 'now' | 'team' | 'heartbeatMs' | 'audit'>;
import type { SchedAgent } from './scheduler.ts';

/** The only per-socket state: who this is. Everything else is in SQLite (attachment ≤ 16 KiB). */
export interface AgentAttachment {
  subject: string;
  tokenId: string;
  /** What the token lets this agent claim in `hello` (null: what it says; src/contracts/agent-grant.ts). */
  grant: AgentGrant | null;
  agentId: string | null;
  connectedAt: number;
  /** Set when the socket was closed over its message budget: all it still sends is dropped unread, after a hibernation too. */
  refused?: true;
}

export type LiveAgent = { ws: WebSocket; att: AgentAttachment & { agentId: string } };

/** An agent silent (or a job's agent gone) for this many heartbeats is gone. */
export { MISSED_HEARTBEATS };

export class AgentLink implements TimedWork {
  private readonly host: LinkHost;
  /** The agents themselves (the alarm prunes it: capabilities.ts). */
  readonly registry: AgentRegistry;
  /** The agent's last socket went away: its jobs are orphaned, not failed (it may reconnect and deliver them). */
  private readonly onGone: (agentId: string, now: number) => void;
  /**
   * Attachments already read in this instance's life: deserializing one is a structured clone,
   * and a governed call walks every socket's attachment several times (placement, liveness).
   * Only `attach` writes attachments and it writes both; after hibernation or a restart the
   * instance is new and the map empty, so a socket's attachment is read from the platform again.
   */
  private readonly attachments = new WeakMap<WebSocket, Readonly<AgentAttachment> | null>();
  /** When each agent's `last_seen` was last written by this instance (protocol-2 heartbeats). */
  private readonly touched = new Map<string, number>();
  /** When each socket last sent a JSON message this instance read (its pings are timed by the platform). */
  private readonly heard = new WeakMap<WebSocket, number>();
  /** Each socket's message budget (memory only: see agent-budget.ts for what a restart means). */
  private readonly budgets = new WeakMap<WebSocket, AgentBudget>();
  /** Sockets closed over their budget, for the one check each of their messages costs (`isRefused`). */
  private readonly refusedSockets = new WeakSet<WebSocket>();

  constructor(host: LinkHost, onGone: (agentId: string, now: number) => void) {
    this.host = host;
    this.registry = new AgentRegistry(host);
    this.onGone = onGone;
  }

  /** How long an agent may stay silent before it is gone. */
  get silentMs(): number {
    return MISSED_HEARTBEATS * this.host.heartbeatMs;
  }

  /**
   * A socket for an agent the Worker authenticated (its identity in the upgrade's headers), or the
   * refusal to answer with. The caller hands the socket to the platform (`acceptWebSocket`) first.
   */
  attachmentFor(request: Request): { ok: true; att: AgentAttachment } | { ok: false; message: string } {
    const grant = parseAgentGrant(request.headers.get(AGENT_GRANT_HEADER));
    if (!grant.ok) return { ok: false, message: grant.message };
    return {
      ok: true,
      att: {
        subject: request.headers.get('X-Gatehouse-Subject') ?? '',
        tokenId: request.headers.get('X-Gatehouse-Token-Id') ?? '',
        grant: grant.value,
        agentId: null,
        connectedAt: this.host.now(),
      },
    };
  }

  attach(ws: WebSocket, att: AgentAttachment): void {
    // Identity only, far below the platform limit; checked so a change that grows it fails loudly here.
    if (attachmentBytes(att) > HIBERNATION_ATTACHMENT_MAX_BYTES / 4) throw new Error('agent attachment grew beyond identity');
    ws.serializeAttachment(att);
    this.attachments.set(ws, Object.freeze({ ...att }));
  }

  attachmentOf(ws: WebSocket): AgentAttachment | null {
    if (this.attachments.has(ws)) return this.attachments.get(ws) as AgentAttachment | null;
    const att = (ws.deserializeAttachment() as AgentAttachment | null) ?? null;
    this.attachments.set(ws, att && Object.freeze(att));
    return att;
  }

  budgetOf(ws: WebSocket): AgentBudget {
    let b = this.budgets.get(ws);
    if (!b) {
      b = new AgentBudget(this.host.heartbeatMs, this.host.now());
      this.budgets.set(ws, b);
    }
    return b;
  }

  /**
   * Marks a socket over its message budget as refused: in memory, and in its attachment, which
   * outlives a hibernation (a few bytes of the 16 KiB it may hold). Called before it is closed.
   */
  refuse(ws: WebSocket): void {
    this.refusedSockets.add(ws);
    const att = this.attachmentOf(ws);
    if (att && !att.refused) this.attach(ws, { ...att, refused: true });
  }

  /** Whether `ws` was refused: a set lookup, or after a hibernation its attachment (read once per instance). */
  isRefused(ws: WebSocket): boolean {
    if (this.refusedSockets.has(ws)) return true;
    if (this.attachmentOf(ws)?.refused !== true) return false;
    this.refusedSockets.add(ws);
    return true;
  }

  /** Open sockets of agents that said hello. */
  live(): LiveAgent[] {
    const out: LiveAgent[] = [];
    for (const ws of this.host.sockets()) {
      if (ws.readyState !== WebSocket.OPEN) continue;
      const att = this.attachmentOf(ws);
      if (att?.agentId) out.push({ ws, att: att as LiveAgent['att'] });
    }
    return out;
  }

  socketOf(agentId: string): WebSocket | null {
    return this.live().find((a) => a.att.agentId === agentId)?.ws ?? null;
  }

  send(ws: WebSocket, m: EdgeMessage): boolean {
    try {
      ws.send(JSON.stringify(m));
      return true;
    } catch {
      return false;
    }
  }

  /** The socket sent a JSON message (output frames are bulk data, not a sign of life). Memory only. */
  hear(ws: WebSocket, now: number): void {
    this.heard.set(ws, now);
  }

  /**
   * When the agent on `ws` was last heard from: its last ping the platform answered, its last
   * message, or — before either — its hello. Read only when the object is awake anyway.
   */
  lastHeard(ws: WebSocket, att: LiveAgent['att']): number {
    const row = this.registry.get(att.agentId);
    return Math.max(att.connectedAt, row?.last_seen ?? 0, this.host.lastPing(ws) ?? 0, this.heard.get(ws) ?? 0);
  }

  /** Whether the agent on `ws` has been silent longer than MISSED_HEARTBEATS heartbeats: it is gone, socket or not. */
  silent(ws: WebSocket, att: LiveAgent['att'], now: number): boolean {
    return now - this.lastHeard(ws, att) > this.silentMs;
  }

  /**
   * A protocol-2 heartbeat (`heartbeat`, every interval): its agent's `last_seen` is written as it
   * always was, at most every quarter heartbeat, so liveness holds after the object was evicted
   * between two of them. A protocol-3 agent's pings never reach the object and write nothing.
   */
  touch(agentId: string, now: number): void {
    if (now - (this.touched.get(agentId) ?? -Infinity) < this.host.heartbeatMs / 4) return;
    this.touched.set(agentId, now);
    this.registry.touch(agentId, now);
  }

  /** The socket stops speaking for its agent; the agent's jobs are orphaned once no socket of it is left. */
  drop(ws: WebSocket, why: string): void {
    const att = this.attachmentOf(ws);
    const agentId = att?.agentId;
    if (!att || !agentId) return;
    const lastHeard = this.lastHeard(ws, { ...att, agentId });
    this.attach(ws, { ...att, agentId: null });
    console.log(`agent ${agentId} ${why}`);
    if (this.socketOf(agentId)) return;
    this.registry.disconnected(agentId, lastHeard);
    this.onGone(agentId, this.host.now());
  }

  /** `drop`, then closes the socket with `code`. */
  dropAndClose(ws: WebSocket, why: string, code: number, reason: string): void {
    this.drop(ws, why);
    try {
      ws.close(code, reason);
    } catch {
      /* gone */
    }
  }

  /**
   * Whether `hello` may bind this socket to its agent id: an id is bound to the token subject that
   * registered it while it is in use (a socket speaks for it, or `busy()`: jobs run on it). On success the socket speaks for the
   * agent, any older socket of the same agent is closed (a reconnect replaces it) and the registry
   * holds what the agent said.
   */
  bind(ws: WebSocket, att: AgentAttachment, hello: AgentHello, busy: () => boolean, now: number): boolean {
    const known = this.registry.get(hello.agentId);
    if (known && known.subject !== att.subject && (this.socketOf(hello.agentId) !== null || busy())) {
      console.warn(`refused hello: agent id ${hello.agentId} belongs to subject ${known.subject}, not ${att.subject}`);
      ws.close(4003, `agent id "${hello.agentId}" is in use by another agent token; pick another --id`);
      return false;
    }
    for (const other of this.host.sockets()) {
      if (other === ws) continue;
      const o = this.attachmentOf(other);
      if (o?.agentId !== hello.agentId) continue;
      this.attach(other, { ...o, agentId: null });
      try {
        other.close(1000, 'replaced by a new connection of the same agent');
      } catch {
        /* gone */
      }
    }
    this.attach(ws, { ...att, agentId: hello.agentId });
    this.registry.connect(hello, att, now);
    return true;
  }

  /** A token was revoked: every agent socket that authenticated with it goes now. */
  revoke(tokenId: string): number {
    let n = 0;
    for (const ws of this.host.sockets()) {
      if (this.attachmentOf(ws)?.tokenId !== tokenId) continue;
      n += 1;
      this.dropAndClose(ws, 'its token was revoked', 4001, 'agent token revoked');
    }
    return n;
  }

  /** The team was suspended: every agent is told why and disconnected (it retries, and is refused until the team resumes). */
  disconnectAll(reason: string): number {
    let n = 0;
    for (const ws of this.host.sockets()) {
      n += 1;
      this.dropAndClose(ws, reason, 4003, reason.slice(0, 120));
    }
    return n;
  }

  /** Writes a denied agent-connection row to the audit log (a refused hello, a socket over its budget). */
  async audit(att: AgentAttachment, reason: string, command: AuditEntry['command']): Promise<void> {
    try {
      this.host.audit({
        team: await this.host.team(),
        subject: att.subject,
        tokenId: att.tokenId,
        tool: AGENT_CONNECT_AUDIT_TOOL,
        decision: 'denied',
        reason,
        command,
      });
    } catch (e) {
      console.error(`could not audit the connection of agent ${att.agentId ?? '(before hello)'}: ${(e as Error).message}`);
    }
  }

  /**
   * The alarm's part (it runs only while something is due, e.g. a job runs): agents silent for
   * longer than MISSED_HEARTBEATS heartbeats are dropped, so their jobs are orphaned and then lost.
   */
  onAlarm(now: number): void {
    for (const { ws, att } of this.live()) {
      if (!this.silent(ws, att, now)) continue;
      const silentFor = now - this.lastHeard(ws, att);
      this.dropAndClose(ws, `missed heartbeats (silent for ${silentFor}ms)`, 4000, `no heartbeat for ${silentFor}ms`);
    }
  }

  /** How long after an object restart (every socket dropped) an orphan's grace starts: when the slowest agent is back. */
  restartGraceAt(now: number): number {
    return now + Math.max(0, AGENT_RECONNECT_MAX_BACKOFF_MS - this.silentMs);
  }

  /**
   * Every agent the registry knows, with its load, whether a socket speaks for it that is not silent
   * (a frozen agent's socket may stay open), and when it was last heard from, pings included.
   */
  views(load: ReadonlyMap<string, number>): AgentView[] {
    const now = this.host.now();
    const heard = new Map<string, { at: number; connected: boolean }>();
    for (const { ws, att } of this.live()) heard.set(att.agentId, { at: this.lastHeard(ws, att), connected: !this.silent(ws, att, now) });
    return this.registry.all().map((r) => {
      const h = heard.get(r.id);
      return this.registry.view({ ...r, last_seen: Math.max(r.last_seen, h?.at ?? 0) }, load.get(r.id) ?? 0, h?.connected ?? false);
    });
  }

  /** The agents a job may be placed on, as the scheduler sees them: connected, and heard from within MISSED_HEARTBEATS heartbeats. */
  schedAgents(load: ReadonlyMap<string, number>): SchedAgent[] {
    const out: SchedAgent[] = [];
    const now = this.host.now();
    for (const { ws, att } of this.live()) {
      if (this.silent(ws, att, now)) continue;
      const r = this.registry.get(att.agentId);
      if (!r) continue;
      out.push({
        id: r.id,
        capacity: r.capacity,
        running: load.get(r.id) ?? 0,
        sandbox: r.sandbox,
        labels: JSON.parse(r.labels) as string[],
        runtimes: (JSON.parse(r.runtimes) as { name: string }[]).map((x) => x.name),
        protocol: r.protocol,
        capabilities: r.capabilities ? (JSON.parse(r.capabilities) as string[]) : [],
      });
    }
    return out;
  }

  /** The agent's registry row (subject, sandbox) for placing a job on it. */
  agent(agentId: string) {
    return this.registry.get(agentId);
  }
}
