/**
 * The egress proxy of one job: the job's only way out of its sandbox. It listens on a Unix
 * socket the sandbox is given (sandbox.ts), speaks HTTP `CONNECT host:port` for TLS and plain
 * HTTP forwarding of absolute-URI requests, and decides every connection against the job's
 * grant (src/contracts/network.ts):
 * - the host must be covered by an entry (exact or `*.suffix`, ports default 80/443, methods for
 *   plain HTTP), or the grant is `open`, or a person approved it (`unlisted: ask`, one answer
 *   per host, port and method; CONNECT is its own method);
 * - an IP literal in any spelling is reduced to its canonical address (address.ts); a name is
 *   resolved by the proxy itself, once. Any special-purpose address (loopback, private,
 *   link-local, metadata, …, also embedded in IPv6) is refused unless the entry says
 *   `privateAddresses: true`, and the proxy dials exactly the address it judged (no second
 *   lookup: DNS rebinding cannot change it afterwards);
 * - a CONNECT tunnel must start with a TLS ClientHello whose SNI is the CONNECT host; a plain
 *   HTTP request's Host header must name the host of its absolute URI (no domain fronting);
 * - bytes up and down over all the job's connections stay under the grant's caps (past them
 *   every connection of the job is closed and new ones are refused).
 * Every connection is recorded (EgressConnection) and reported to the edge in `egress.log`
 * batches. One proxy per job: the socket a job holds is its identity, nothing to authenticate.
 *
 * This file holds the decisions and the caps; plain HTTP is http-forward.ts, CONNECT tunnel.ts,
 * asking a person approvals.ts, the records connection-log.ts.
 */
import { lookup } from 'node:dns/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { EGRESS_ASK_WAIT_MS, type EgressAnswer, type EgressAsk, type EgressLog, type NetworkAllow, type NetworkGrant } from '../../src/contracts/network.ts';
import type { Logger } from '../log.ts';
import { type Address, parseAddress } from './address.ts';
import { Approvals } from './approvals.ts';
import type { AgentCa } from './agent-ca.ts';
import { type Conn, ConnectionLog } from './connection-log.ts';
import type { CredentialRoute, HeldCredential } from './gate.ts';
import { decide, decideAddresses } from './decide.ts';
import type { EgressGate, Resolved, Target, Verdict } from './gate.ts';
import { forwardHttp } from './http-forward.ts';
import { refusal } from './refusal.ts';
import type { TestHosts } from './test-hosts.ts';
import { openTunnel } from './tunnel.ts';

/** What the proxy needs of the agent's connection to the edge. */
export interface EgressEdge {
  /** Sends an ask; false when the edge cannot be reached now (the connection is refused at once). */
  ask(m: EgressAsk): boolean;
  /** Sends a batch of connection records. */
  log(m: EgressLog): void;
}

export interface EgressProxyOptions {
  jobId: string;
  grant: NetworkGrant;
  edge: EgressEdge;
  /** Test mode: these names resolve to 127.0.0.1 (test-hosts.ts); null in production. */
  testHosts?: TestHosts | null;
  /** Name → addresses (default: the system resolver, every address). */
  resolve?: (host: string) => Promise<string[]>;
  /** Opens a TCP connection to an address the proxy checked (tests record where it goes). */
  dial?: (address: string, port: number) => Socket;
  /** How long a connection waits for a person's answer (EGRESS_ASK_WAIT_MS). */
  askWaitMs?: number;
  /** How long a tunnel waits for the client's ClientHello. */
  helloWaitMs?: number;
  log?: Logger;
  /** The job's credentials with their values (from its job.start) and the agent's CA to terminate TLS for their hosts. */
  credentials?: { held: HeldCredential[]; ca: AgentCa; upstreamCas?: string[] };
}

/** Connections one job may hold open to its proxy at once (each costs the agent a socket or two). */
const MAX_CLIENT_CONNECTIONS = 256;

export class EgressProxy implements EgressGate {
  readonly helloWaitMs: number;
  private readonly o: EgressProxyOptions;
  private readonly server: Server;
  private readonly src: string;
  private readonly conns: ConnectionLog;
  private readonly approvals: Approvals;
  private up = 0;
  private down = 0;
  /** Set once a byte cap was passed: which one. */
  private capHit: 'up' | 'down' | null = null;
  private readonly clients = new Set<Duplex>();
  private closed = false;

  constructor(o: EgressProxyOptions) {
    this.o = o;
    this.src = o.grant.source || 'network';
    this.helloWaitMs = o.helloWaitMs ?? 10_000;
    this.conns = new ConnectionLog({ jobId: o.jobId, send: (m: EgressLog) => o.edge.log(m), log: o.log });
    this.approvals = new Approvals({ jobId: o.jobId, send: (m: EgressAsk) => o.edge.ask(m), waitMs: o.askWaitMs ?? EGRESS_ASK_WAIT_MS });
    // No request timeout: a long upload is bounded by the byte cap and the job's own timeout.
    this.server = createServer({ requestTimeout: 0 }, (req, res) => void forwardHttp(this, req, res));
    this.server.maxConnections = MAX_CLIENT_CONNECTIONS;
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void openTunnel(this, req, socket, head));
    this.server.on('connection', (s: Socket) => {
      this.clients.add(s);
      s.on('close', () => this.clients.delete(s));
    });
    // An upgrade (WebSocket over plain HTTP) would turn a checked request into an unchecked stream.
    this.server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => socket.end(refusal(501, 'gatehouse egress: protocol upgrades are not forwarded\n')));
    this.server.on('clientError', (_e, socket: Duplex) => socket.destroy());
  }

  /** Listens on a Unix socket path, or (tests) a TCP port on 127.0.0.1. Resolves with the TCP port, 0 for a path. */
  listen(target: string | { port: number }): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      const done = () => {
        this.server.off('error', reject);
        const a = this.server.address();
        resolve(typeof a === 'object' && a ? a.port : 0);
      };
      if (typeof target === 'string') this.server.listen(target, done);
      else this.server.listen(target.port, '127.0.0.1', done);
    });
  }

  /** An `egress.answer` for this job; false when no connection waits for it. */
  answer(a: EgressAnswer): boolean {
    return this.approvals.answer(a);
  }

  /** After the agent reconnected: every ask still waiting goes to the edge again (approvals.ts). */
  askAgain(): void {
    this.approvals.askAgain();
  }

  /** Bytes the job sent and received through the proxy so far. */
  totals(): { up: number; down: number } {
    return { up: this.up, down: this.down };
  }

  /**
   * Stops the proxy (the job ended): refuses new connections, closes open ones, answers waiting
   * asks with a refusal, and sends every record not yet sent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.approvals.close();
    const server = new Promise<void>((r) => this.server.close(() => r()));
    for (const c of this.conns.open) for (const s of c.sockets) s.destroy();
    for (const s of this.clients) s.destroy();
    this.server.closeAllConnections();
    // Records of closed connections are written by their close handlers.
    await this.conns.allEnded(2000);
    for (const c of [...this.conns.open]) this.conns.finish(c, undefined);
    await server;
    this.conns.flush(true);
  }

  ended(): boolean {
    return this.closed;
  }

  capPassed(): boolean {
    return this.capHit !== null;
  }

  begin(host: string, port: number, method: string): Conn {
    return this.conns.begin(host, port, method);
  }

  refuse(conn: Conn, reason: string, policyKey?: string): void {
    this.conns.refuse(conn, reason, policyKey);
  }

  /** One line per distinct refusal, for the job's result (JobExit.notices). */
  refusalNotices(): string[] {
    return this.conns.refusalNotices();
  }

  finish(conn: Conn, why: string | undefined): void {
    this.conns.finish(conn, why);
  }

  /** Adds `n` bytes to the job's total; past the cap closes every connection of the job and returns false. */
  count(conn: Conn, dir: 'up' | 'down', n: number): boolean {
    if (this.capHit) return false;
    if (dir === 'up') {
      this.up += n;
      conn.rec.bytesUp += n;
    } else {
      this.down += n;
      conn.rec.bytesDown += n;
    }
    const max = dir === 'up' ? this.o.grant.maxBytesUp : this.o.grant.maxBytesDown;
    if ((dir === 'up' ? this.up : this.down) <= max) return true;
    this.capHit = dir;
    this.o.log?.warn(`job ${this.o.jobId}: network byte cap passed (${this.src}.maxBytes${dir === 'up' ? 'Up' : 'Down'} = ${max}): closing its connections`);
    for (const c of this.conns.open) {
      c.rec.reason = c.rec.reason ? `${c.rec.reason}; byte cap` : 'byte cap';
      for (const s of c.sockets) s.destroy();
    }
    return false;
  }

  /** The grant's verdict, with an ask to the edge for an unlisted host when the grant says `ask`. */
  async check(target: Target, port: number, method: string | undefined): Promise<Verdict> {
    const host = target.kind === 'address' ? target.address.address : target.name;
    if (this.capHit) {
      const key = `${this.src}.maxBytes${this.capHit === 'up' ? 'Up' : 'Down'}`;
      return { ok: false, status: 403, reason: `byte cap: the job passed ${key}`, policyKey: key };
    }
    if (this.closed) return { ok: false, status: 403, reason: 'the job ended' };
    const d = decide(this.o.grant, host, port, method);
    if (d.allowed) return { ok: true, reason: d.reason, entry: d.entry, index: d.index };
    if (d.kind !== 'unlisted' || this.o.grant.unlisted !== 'ask') return { ok: false, status: 403, reason: d.reason, policyKey: d.policyKey };
    // An approval never grants private addresses: a special-purpose literal is refused without asking anyone.
    if (target.kind === 'address') {
      const p = decideAddresses(this.src, { entry: null, index: null }, host, [target.address]);
      if (!p.ok) return { ok: false, status: 403, reason: p.reason, policyKey: p.policyKey };
    }
    const a = await this.approvals.ask(host, port, method);
    if (a.allow) return { ok: true, reason: `approved (${a.by})`, entry: null, index: null };
    return { ok: false, status: 403, reason: `${d.reason}; asked, not approved (${a.by})`, policyKey: d.policyKey };
  }

  /**
   * The address to dial: the literal's canonical address, or the name resolved once, every
   * answer judged; the connection goes to exactly the address judged.
   */
  async resolve(target: Target, port: number, allowed: { entry: NetworkAllow | null; index: number | null }): Promise<Resolved> {
    let addresses: Address[];
    let host: string;
    if (target.kind === 'address') {
      host = target.address.address;
      addresses = [target.address];
    } else {
      host = target.name;
      const test = this.o.testHosts?.get(host);
      if (test) return { ok: true, address: '127.0.0.1', port: test.port ?? port };
      let answers: string[];
      try {
        answers = this.o.resolve ? await this.o.resolve(host) : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
      } catch (e) {
        return { ok: false, status: 502, reason: `cannot resolve ${host}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
      }
      if (!answers.length) return { ok: false, status: 502, reason: `cannot resolve ${host}: no address` };
      addresses = [];
      for (const x of answers) {
        const a = parseAddress(x);
        if (!a) return { ok: false, status: 502, reason: `cannot resolve ${host}: the resolver answered "${String(x).slice(0, 64)}", not an address` };
        addresses.push(a);
      }
    }
    const d = decideAddresses(this.src, allowed, host, addresses);
    if (!d.ok) return { ok: false, status: 403, reason: d.reason, policyKey: d.policyKey };
    return { ok: true, address: d.address.address, port };
  }

  methodRefusal(host: string, port: number, method: string): { reason: string; policyKey: string } | null {
    // A tunnel the grant allowed for any method (an entry without `methods`, `mode: open`, an approval) is not narrowed here.
    const d = decide(this.o.grant, host, port, method);
    return !d.allowed && d.kind === 'method' ? { reason: d.reason, policyKey: d.policyKey } : null;
  }

  /** Credentials are added over TLS on 443 only, to exactly the hosts they are bound to. */
  credentialRoute(host: string, port: number): CredentialRoute | null {
    const c = this.o.credentials;
    if (!c || port !== 443) return null;
    const held = c.held.filter((h) => h.binding.hosts.includes(host));
    return held.length ? { ca: c.ca, credentials: held, upstreamCas: c.upstreamCas } : null;
  }

  dial(address: string, port: number): Socket {
    const s = this.o.dial ? this.o.dial(address, port) : connect({ host: address, port });
    s.on('error', () => {});
    return s;
  }
}
