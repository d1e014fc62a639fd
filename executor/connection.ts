/**
 * The agent's one outbound socket to its gateway: connects with the agent token, says
 * `hello`, waits for `welcome`, sends heartbeats, and reconnects with jittered exponential
 * backoff whenever the socket goes away. Jobs are not this module's business: it hands
 * parsed edge messages to `onMessage` and sends what it is given.
 *
 * A heartbeat is the fixed AGENT_PING, which the gateway's platform answers (AGENT_PONG) without
 * waking the team's object; the jobs the agent holds go as `running` at a heartbeat only when they
 * changed since the gateway last heard them (in `hello` or a `running`). A gateway that answered
 * pings and then stays silent for MISSED_HEARTBEATS intervals is a dead link: the agent reconnects.
 */
import { WebSocket, getGlobalDispatcher, request, type Dispatcher } from 'undici';
import { AGENT_CLAIM_REFUSED_CLOSE } from '../src/contracts/agent-grant.ts';
import {
  AGENT_CONNECT_PATH,
  AGENT_PING,
  AGENT_PROTOCOL_CLOSE,
  AGENT_RECONNECT_MAX_BACKOFF_MS,
  MISSED_HEARTBEATS,
  PROTOCOL_VERSION,
  parseEdgeMessage,
  type AgentHello,
  type AgentMessage,
  type EdgeMessage,
} from '../src/contracts/agent-protocol.ts';

/** Close codes after which the agent stops (its service manager must not restart it either): what the user has to change. */
const PERMANENT_REFUSALS: Record<number, { reason: string; fix: string }> = {
  [AGENT_CLAIM_REFUSED_CLOSE]: {
    reason: 'claims not granted',
    fix: 'run it with the sandbox, labels and --id its token grants (gatehouse token list shows them), or use a token that grants these claims',
  },
  [AGENT_PROTOCOL_CLOSE]: {
    reason: `agent protocol v${PROTOCOL_VERSION} not spoken by the gateway`,
    fix: 'install the agent of the same Gatehouse version as the gateway',
  },
};
import type { Logger } from './log.ts';

/**
 * The socket's upgrade request goes without `Sec-WebSocket-Extensions`, so no permessage-deflate is
 * negotiated: every message would otherwise be deflated by one side and inflated by the other, CPU on
 * the agent and the gateway for each job's few small JSON messages (and for live output, already
 * binary, which compresses little). undici offers the extension on every upgrade; this drops it.
 */
const noCompression: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) => {
  const headers = opts.headers;
  if (!headers || Array.isArray(headers) || typeof headers !== 'object' || !('sec-websocket-extensions' in headers)) return dispatch(opts, handler);
  const { 'sec-websocket-extensions': _offered, ...rest } = headers as Record<string, string | string[] | undefined>;
  return dispatch({ ...opts, headers: rest }, handler);
};

/** What the agent's socket connects through (and the bench's simulated agent, bench/emulator-floor.ts): no compression. */
export function agentSocketDispatcher(): Dispatcher {
  return getGlobalDispatcher().compose(noCompression);
}

type Welcome = Extract<EdgeMessage, { type: 'welcome' }>;
type Pong = Extract<EdgeMessage, { type: 'pong' }>;

export interface ConnectionOptions {
  /** Gateway base URL (http or https). */
  url: string;
  token: string;
  log: Logger;
  /** Built at each connect: the running job ids change between attempts. */
  hello: () => AgentHello;
  /** The jobs the agent holds now (as `hello` lists them): sent as `running` at a heartbeat when they changed. */
  running: () => string[];
  onWelcome: (w: Welcome) => void;
  /** job.start / job.cancel / job.ack / egress.answer, after validation. */
  onMessage: (m: Exclude<EdgeMessage, Welcome | Pong>) => void;
  /**
   * The gateway refused this agent for good (its hello claims more than its token grants): the
   * connection has stopped, since every reconnect would say the same.
   */
  onRefused?: (reason: string) => void;
  /** Backoff bounds for reconnects. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

function connectUrl(base: string): string {
  return base.replace(/\/+$/, '').replace(/^http/i, 'ws') + AGENT_CONNECT_PATH;
}

export class EdgeConnection {
  private readonly o: ConnectionOptions;
  private ws: WebSocket | null = null;
  private welcomed = false;
  private heartbeat: NodeJS.Timeout | null = null;
  /** The jobs as the gateway last heard them on this connection (in `hello` or `running`), sorted and joined. */
  private saidRunning = '';
  /** When the gateway was last heard from on this connection (any message, its pongs included). */
  private heardAt = 0;
  /** Whether it answered a ping on this connection: only then does its silence count (a stand-in edge may never). */
  private ponged = false;
  private retry: NodeJS.Timeout | null = null;
  private attempt = 0;
  private stopped = false;

  constructor(o: ConnectionOptions) {
    this.o = o;
  }

  get ready(): boolean {
    return this.welcomed && this.ws?.readyState === WebSocket.OPEN;
  }

  start(): void {
    this.stopped = false;
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.clearHeartbeat();
    try {
      this.ws?.close(1000, 'agent shutting down');
    } catch {
      /* already closed */
    }
    this.ws = null;
  }

  /** Sends on a welcomed socket; false when there is none (the caller keeps what must survive). */
  send(m: AgentMessage): boolean {
    if (!this.ready) return false;
    try {
      this.ws!.send(JSON.stringify(m));
      return true;
    } catch (e) {
      this.o.log.warn(`send failed: ${(e as Error).message}`);
      return false;
    }
  }

  /** Sends a binary live-output frame on a welcomed socket; false when there is none. */
  sendFrame(frame: Uint8Array): boolean {
    if (!this.ready) return false;
    try {
      this.ws!.send(frame);
      return true;
    } catch (e) {
      this.o.log.warn(`send failed: ${(e as Error).message}`);
      return false;
    }
  }

  /** Bytes handed to the socket and not yet written to the network; null without a welcomed socket. */
  buffered(): number | null {
    return this.ready ? this.ws!.bufferedAmount : null;
  }

  private connect(): void {
    if (this.stopped) return;
    const { log } = this.o;
    let opened = false;
    let ws: WebSocket;
    try {
      ws = new WebSocket(connectUrl(this.o.url), {
        headers: { Authorization: `Bearer ${this.o.token}` },
        dispatcher: agentSocketDispatcher(),
      });
    } catch (e) {
      log.error(`cannot connect to ${this.o.url}: ${(e as Error).message}`);
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    this.welcomed = false;
    ws.addEventListener('open', () => {
      opened = true;
      const hello = this.o.hello();
      this.saidRunning = runningKey(hello.running);
      ws.send(JSON.stringify(hello));
    });
    ws.addEventListener('message', (ev) => {
      // A socket given up for a dead link (or replaced) speaks for nothing any more.
      if (this.ws !== ws) return;
      this.heardAt = Date.now();
      const data = typeof ev.data === 'string' ? ev.data : new ArrayBuffer(0);
      const parsed = parseEdgeMessage(data);
      if (!parsed.ok) {
        log.warn(`ignored a message from the gateway: ${parsed.reason}`);
        return;
      }
      const m = parsed.message;
      if (m.type === 'welcome' && m.v !== PROTOCOL_VERSION) {
        // A gateway that took the hello but speaks another version: its jobs could not be read right. Stop for good, like a refused hello.
        this.refuse(ws, `the gateway speaks agent protocol v${m.v}; this agent speaks v${PROTOCOL_VERSION}`);
        return;
      }
      if (m.type === 'welcome') {
        this.welcomed = true;
        this.attempt = 0;
        this.startHeartbeat(ws, m.heartbeatMs);
        this.o.onWelcome(m);
        return;
      }
      if (m.type === 'pong') {
        this.ponged = true;
        return;
      }
      if (!this.welcomed) {
        log.warn(`ignored ${m.type} before welcome`);
        return;
      }
      try {
        this.o.onMessage(m);
      } catch (e) {
        log.error(`handling ${m.type}: ${(e as Error).stack ?? e}`);
      }
    });
    ws.addEventListener('error', () => {
      /* 'close' follows; it decides */
    });
    ws.addEventListener('close', (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.welcomed = false;
      this.clearHeartbeat();
      if (this.stopped) return;
      // Refusals that a reconnect cannot change: the token's grant, or the protocol version this agent speaks.
      const fix = PERMANENT_REFUSALS[ev.code];
      if (fix) {
        const reason = ev.reason || fix.reason;
        log.error(`the gateway refused this agent (close code ${ev.code}): ${reason} — ${fix.fix}; not reconnecting`);
        this.stopped = true;
        this.o.onRefused?.(reason);
        return;
      }
      if (opened) {
        log.warn(`disconnected from ${this.o.url} (code ${ev.code}${ev.reason ? `: ${ev.reason}` : ''}); reconnecting`);
        this.scheduleReconnect();
      } else {
        void this.explainRefusal().finally(() => this.scheduleReconnect());
      }
    });
  }

  /** This agent refuses the gateway for good (another protocol version): closes with AGENT_PROTOCOL_CLOSE, logs what to install, stops. */
  private refuse(ws: WebSocket, reason: string): void {
    const fix = PERMANENT_REFUSALS[AGENT_PROTOCOL_CLOSE].fix;
    this.o.log.error(`this agent refused the gateway (close code ${AGENT_PROTOCOL_CLOSE}): ${reason} — ${fix}; not reconnecting`);
    this.stopped = true;
    this.ws = null;
    try {
      ws.close(AGENT_PROTOCOL_CLOSE, reason);
    } catch {
      /* already closing */
    }
    this.o.onRefused?.(reason);
  }

  /**
   * A failed WebSocket handshake does not say why; one plain request to the same URL does
   * (401/403 means the token was refused, which retrying will not fix by itself).
   */
  private async explainRefusal(): Promise<void> {
    const { log } = this.o;
    const httpUrl = this.o.url.replace(/\/+$/, '') + AGENT_CONNECT_PATH;
    try {
      const r = await request(httpUrl, { headers: { authorization: `Bearer ${this.o.token}` }, headersTimeout: 5000, bodyTimeout: 5000 });
      const body = (await r.body.text()).slice(0, 300);
      if (r.statusCode === 401 || r.statusCode === 403) {
        log.error(
          `the gateway refused the agent token (HTTP ${r.statusCode}): ${body || 'no detail'} — check --token-file (or GATEHOUSE_AGENT_TOKEN); retrying`,
        );
      } else {
        log.warn(`could not connect to ${this.o.url} (HTTP ${r.statusCode} to a plain request); retrying`);
      }
    } catch (e) {
      log.warn(`could not reach ${this.o.url}: ${(e as Error).message}; retrying`);
    }
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    const min = this.o.minBackoffMs ?? 250;
    const max = this.o.maxBackoffMs ?? AGENT_RECONNECT_MAX_BACKOFF_MS;
    const base = Math.min(max, min * 2 ** this.attempt++);
    const wait = Math.round(base / 2 + Math.random() * (base / 2)); // jitter: agents of a team don't reconnect in step
    this.retry = setTimeout(() => this.connect(), wait);
  }

  private startHeartbeat(ws: WebSocket, ms: number): void {
    this.clearHeartbeat();
    this.heardAt = Date.now();
    this.ponged = false;
    this.heartbeat = setInterval(() => this.beat(ws, ms), ms);
  }

  /** One heartbeat: the link is checked, the ping sent, and the jobs the agent holds if they changed. */
  private beat(ws: WebSocket, ms: number): void {
    if (this.ws !== ws || !this.ready) return;
    const silentFor = Date.now() - this.heardAt;
    if (this.ponged && silentFor > MISSED_HEARTBEATS * ms) {
      this.abandon(ws, silentFor);
      return;
    }
    try {
      ws.send(AGENT_PING);
    } catch (e) {
      this.o.log.warn(`send failed: ${(e as Error).message}`);
      return;
    }
    const jobs = this.o.running();
    const key = runningKey(jobs);
    if (key !== this.saidRunning && this.send({ type: 'running', jobs })) this.saidRunning = key;
  }

  /**
   * The gateway answered pings on this socket and has said nothing for MISSED_HEARTBEATS intervals:
   * the link is dead even if TCP has not noticed. The socket is given up (its late close is ignored)
   * and a new one opened; the jobs keep running and their results are re-sent after the hello.
   */
  private abandon(ws: WebSocket, silentFor: number): void {
    this.o.log.warn(`no answer from ${this.o.url} for ${silentFor} ms (${MISSED_HEARTBEATS} heartbeats); reconnecting`);
    this.ws = null;
    this.welcomed = false;
    this.clearHeartbeat();
    try {
      ws.close(1000, 'no pong');
    } catch {
      /* already closing */
    }
    this.scheduleReconnect();
  }

  private clearHeartbeat(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }
}

/** A set of job ids as one comparable string (order does not matter). */
function runningKey(jobs: readonly string[]): string {
  return [...jobs].sort().join('\n');
}
