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
 */
import { randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import {
  EGRESS_ASK_WAIT_MS,
  EGRESS_CONNECTIONS_MAX,
  type EgressAnswer,
  type EgressAsk,
  type EgressConnection,
  type EgressLog,
  type NetworkAllow,
  type NetworkGrant,
} from '../../src/contracts/network.ts';
import type { Logger } from '../log.ts';
import { type Address, type Host, normalizeHost, parseAddress, parseHost } from './address.ts';
import { decide, decideAddresses } from './decide.ts';
import { HELLO_MAX_BYTES, readClientHello } from './sni.ts';
import type { TestHosts } from './test-hosts.ts';

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
}

/** Connections one job may hold open to its proxy at once (each costs the agent a socket or two). */
const MAX_CLIENT_CONNECTIONS = 256;
/** Records sent per `egress.log` message (the contract's maximum). */
const LOG_BATCH = 50;
/** Response headers that belong to one hop (RFC 9110 §7.6.1) and are not forwarded. */
const HOP_BY_HOP = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'upgrade',
  'transfer-encoding',
]);

type Verdict =
  | { ok: true; reason: string; entry: NetworkAllow | null; index: number | null }
  | { ok: false; status: number; reason: string; policyKey?: string };
/** A host the proxy may look at: an address or a name (an invalid one is refused before). */
type Target = Exclude<Host, { kind: 'invalid' }>;

interface Conn {
  rec: EgressConnection;
  t0: number;
  sockets: Set<Duplex>;
  done: boolean;
}

export class EgressProxy {
  private readonly o: EgressProxyOptions;
  private readonly server: Server;
  private readonly src: string;
  private up = 0;
  private down = 0;
  /** Set once a byte cap was passed: which one. */
  private capHit: 'up' | 'down' | null = null;
  private readonly open = new Set<Conn>();
  private readonly clients = new Set<Duplex>();
  /** `host:port method` a person allowed or denied, for the rest of the job. */
  private readonly decided = new Map<string, { allow: boolean; by: string }>();
  private readonly asking = new Map<string, Promise<{ allow: boolean; by: string }>>();
  /** Asks without an answer yet, by id: the ask as sent (sent again after a reconnect, `askAgain`) and what its answer settles. */
  private readonly waiting = new Map<string, { ask: EgressAsk; settle: (a: { allow: boolean; by: string }) => void }>();
  private pending: EgressConnection[] = [];
  private listed = 0;
  private dropped = 0;
  private closed = false;
  private settle: (() => void) | null = null;

  constructor(o: EgressProxyOptions) {
    this.o = o;
    this.src = o.grant.source || 'network';
    // No request timeout: a long upload is bounded by the byte cap and the job's own timeout.
    this.server = createServer({ requestTimeout: 0 }, (req, res) => void this.onRequest(req, res));
    this.server.maxConnections = MAX_CLIENT_CONNECTIONS;
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.onConnect(req, socket, head));
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
    const w = this.waiting.get(a.askId);
    if (!w) return false;
    w.settle({ allow: a.decision === 'allow', by: a.by });
    return true;
  }

  /**
   * Sends every ask still waiting again, as it was (after the agent reconnected): an answer the
   * edge sent while the agent was away never arrived, and the edge answers an ask it already
   * decided again (src/dispatch/egress.ts). Without this the connection would wait for its own
   * time to run out and be refused though a person had allowed it.
   */
  askAgain(): void {
    for (const { ask } of this.waiting.values()) this.o.edge.ask(ask);
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
    for (const w of this.waiting.values()) w.settle({ allow: false, by: 'the job ended' });
    const server = new Promise<void>((r) => this.server.close(() => r()));
    for (const c of this.open) for (const s of c.sockets) s.destroy();
    for (const s of this.clients) s.destroy();
    this.server.closeAllConnections();
    // Records of closed connections are written by their close handlers.
    if (this.open.size) await Promise.race([new Promise<void>((r) => (this.settle = r)), new Promise((r) => setTimeout(r, 2000))]);
    for (const c of [...this.open]) this.finish(c, undefined);
    await server;
    this.flush(true);
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = (req.method ?? 'GET').toUpperCase();
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('gatehouse egress: this is a proxy: send absolute-URI requests (http://host/path) or CONNECT\n');
      return;
    }
    if (url.protocol !== 'http:') {
      res.writeHead(400, { 'content-type': 'text/plain' }).end(`gatehouse egress: only http:// is forwarded; use CONNECT for ${url.protocol}\n`);
      return;
    }
    const parsed = parseHost(url.hostname);
    const host = parsed.kind === 'address' ? parsed.address.address : parsed.kind === 'name' ? parsed.name : normalizeHost(url.hostname);
    const port = url.port ? Number(url.port) : 80;
    const conn = this.begin(host, port, method);
    const deny = (status: number, reason: string, policyKey?: string) => {
      this.refuse(conn, reason);
      if (!res.headersSent) res.writeHead(status, { 'content-type': 'text/plain', connection: 'close' });
      res.end(refusalText(host, port, reason, policyKey));
    };
    if (parsed.kind === 'invalid') return deny(400, parsed.reason);
    // The upstream serves what Host names: it must be the host decided for, or one allowed address fronts any other name.
    const fronted = frontedHost(req.rawHeaders, host, port);
    if (fronted) return deny(403, fronted);
    const v = await this.check(parsed, port, method);
    if (!v.ok) return deny(v.status, v.reason, v.policyKey);
    const target = await this.resolve(parsed, port, v);
    if (!target.ok) return deny(target.status, target.reason, target.policyKey);
    conn.rec.address = target.address;
    conn.rec.reason = v.reason;
    if (this.closed) return deny(403, 'the job ended');

    const upstream = this.dial(target.address, target.port);
    conn.sockets.add(upstream);
    conn.sockets.add(req.socket);
    upstream.on('data', (d: Buffer) => this.count(conn, 'down', d.length));
    // Exactly one Host, the checked one (an HTTP/1.0 request may have sent none).
    const headers: [string, string][] = [['Host', url.host]];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const k = req.rawHeaders[i].toLowerCase();
      if (k !== 'host' && (!HOP_BY_HOP.has(k) || k === 'transfer-encoding')) headers.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
    }
    const path = url.pathname + url.search;
    this.count(conn, 'up', method.length + path.length + headers.reduce((n, [k, x]) => n + k.length + x.length + 4, 16));
    const out = httpRequest({
      method,
      path,
      headers: Object.fromEntries(groupHeaders(headers)),
      setHost: false,
      createConnection: () => upstream,
    });
    out.on('response', (r) => {
      const h: Record<string, string | string[]> = {};
      for (const [k, x] of Object.entries(r.headers)) if (x !== undefined && !HOP_BY_HOP.has(k)) h[k] = x;
      res.writeHead(r.statusCode ?? 502, r.statusMessage, h);
      r.pipe(res);
      r.on('end', () => this.finish(conn, undefined));
      r.on('error', () => this.finish(conn, undefined));
    });
    out.on('error', (e) => {
      if (!res.headersSent) {
        conn.rec.decision = 'allowed';
        res
          .writeHead(502, { 'content-type': 'text/plain', connection: 'close' })
          .end(`gatehouse egress: ${host}:${port} (${target.address}) failed: ${e.message}\n`);
      } else res.destroy();
      this.finish(conn, this.capHit ? 'byte cap' : undefined);
    });
    req.on('data', (d: Buffer) => {
      if (this.count(conn, 'up', d.length) && !out.write(d)) {
        req.pause();
        out.once('drain', () => req.resume());
      }
    });
    req.on('end', () => out.end());
    res.on('close', () => {
      if (!conn.done) {
        upstream.destroy();
        this.finish(conn, this.capHit ? 'byte cap' : undefined);
      }
    });
  }

  private async onConnect(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    client.on('error', () => {});
    const m = /^(\[[0-9A-Za-z:.%_-]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(req.url ?? '');
    if (!m || Number(m[2]) < 1 || Number(m[2]) > 65_535) {
      client.end(refusal(400, `gatehouse egress: CONNECT needs host:port, got "${(req.url ?? '').slice(0, 100)}"\n`));
      return;
    }
    const parsed = parseHost(m[1]);
    const host = parsed.kind === 'address' ? parsed.address.address : parsed.kind === 'name' ? parsed.name : normalizeHost(m[1]);
    const port = Number(m[2]);
    const conn = this.begin(host, port, 'CONNECT');
    conn.sockets.add(client);
    const deny = (status: number, reason: string, policyKey?: string) => {
      this.refuse(conn, reason);
      client.end(refusal(status, refusalText(host, port, reason, policyKey)));
    };
    if (parsed.kind === 'invalid') return deny(400, parsed.reason);
    const v = await this.check(parsed, port, undefined);
    if (!v.ok) return deny(v.status, v.reason, v.policyKey);
    const target = await this.resolve(parsed, port, v);
    if (!target.ok) return deny(target.status, target.reason, target.policyKey);
    conn.rec.address = target.address;
    if (this.closed || client.destroyed) return deny(403, 'the job ended');

    const upstream = this.dial(target.address, target.port);
    conn.sockets.add(upstream);
    const connected = await new Promise<Error | null>((r) => {
      upstream.once('connect', () => r(null));
      upstream.once('error', (e) => r(e));
    });
    if (connected) {
      conn.rec.reason = `${v.reason}; connect failed: ${connected.message}`;
      client.end(refusal(502, `gatehouse egress: ${host}:${port} (${target.address}) could not be reached: ${connected.message}\n`));
      this.finish(conn, undefined);
      return;
    }
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    // The tunnel carries TLS to the CONNECT host only: read the ClientHello before anything goes upstream.
    const hello = await this.readHello(client, head);
    if (hello.kind === 'sni' ? normalizeHost(hello.name) !== host : hello.kind !== 'none' || parsed.kind !== 'address') {
      const why =
        hello.kind === 'sni'
          ? `sni mismatch: the TLS server name is ${hello.name.slice(0, 100)}, the CONNECT host ${host}`
          : hello.kind === 'none'
            ? 'no sni: the ClientHello names no server (a tunnel to a host name must)'
            : hello.kind === 'timeout'
              ? 'no TLS ClientHello in time'
              : 'not tls: a CONNECT tunnel carries TLS only';
      upstream.destroy();
      client.destroy();
      conn.rec.decision = 'refused';
      this.finish(conn, why);
      return;
    }
    conn.rec.reason = v.reason;
    if (!this.count(conn, 'up', hello.bytes.length)) return;
    upstream.write(hello.bytes);
    this.pipe(conn, client, upstream, 'up');
    this.pipe(conn, upstream, client, 'down');
  }

  /** Reads the first TLS record(s) from the client (after `head`), without consuming what follows. */
  private readHello(
    client: Duplex,
    head: Buffer,
  ): Promise<{ kind: 'sni'; name: string; bytes: Buffer } | { kind: 'none' | 'not-tls' | 'timeout'; bytes: Buffer }> {
    return new Promise((resolve) => {
      let buf = head;
      let timer: NodeJS.Timeout | null = null;
      const finish = (r: Parameters<typeof resolve>[0]) => {
        if (timer) clearTimeout(timer);
        client.off('data', onData);
        client.off('close', onClose);
        client.pause();
        resolve(r);
      };
      const look = () => {
        const r = readClientHello(buf);
        if (r.kind === 'more' && buf.length < HELLO_MAX_BYTES) return false;
        if (r.kind === 'sni') finish({ kind: 'sni', name: r.name, bytes: buf });
        else finish({ kind: r.kind === 'more' ? 'not-tls' : r.kind, bytes: buf });
        return true;
      };
      const onData = (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        look();
      };
      const onClose = () => finish({ kind: 'timeout', bytes: buf });
      if (buf.length && look()) return;
      timer = setTimeout(() => finish({ kind: 'timeout', bytes: buf }), this.o.helloWaitMs ?? 10_000);
      client.on('data', onData);
      client.on('close', onClose);
      client.resume();
    });
  }

  /** Copies `from` to `to`, counting against the job's caps, with backpressure; either end closing closes both. */
  private pipe(conn: Conn, from: Duplex, to: Duplex, dir: 'up' | 'down'): void {
    from.on('data', (d: Buffer) => {
      if (!this.count(conn, dir, d.length)) return;
      if (!to.write(d)) {
        from.pause();
        to.once('drain', () => from.resume());
      }
    });
    from.on('end', () => to.end());
    from.on('error', () => to.destroy());
    from.on('close', () => {
      to.destroy();
      this.finish(conn, this.capHit ? 'byte cap' : undefined);
    });
    from.resume();
  }

  /** Adds `n` bytes to the job's total; past the cap closes every connection of the job and returns false. */
  private count(conn: Conn, dir: 'up' | 'down', n: number): boolean {
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
    for (const c of this.open) {
      c.rec.reason = c.rec.reason ? `${c.rec.reason}; byte cap` : 'byte cap';
      for (const s of c.sockets) s.destroy();
    }
    return false;
  }

  /** The grant's verdict, with an ask to the edge for an unlisted host when the grant says `ask`. */
  private async check(target: Target, port: number, method: string | undefined): Promise<Verdict> {
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
    const a = await this.askEdge(host, port, method);
    if (a.allow) return { ok: true, reason: `approved (${a.by})`, entry: null, index: null };
    return { ok: false, status: 403, reason: `${d.reason}; asked, not approved (${a.by})`, policyKey: d.policyKey };
  }

  /**
   * One ask per host, port and method at a time; the answer holds for the rest of the job (a
   * timeout does not). Approving GET does not let a POST through; a tunnel's method (inside TLS)
   * is not visible, so a CONNECT is approved as CONNECT.
   */
  private askEdge(host: string, port: number, method: string | undefined): Promise<{ allow: boolean; by: string }> {
    const key = `${host}:${port} ${method ?? 'CONNECT'}`;
    const known = this.decided.get(key);
    if (known) return Promise.resolve(known);
    let p = this.asking.get(key);
    if (p) return p;
    const askId = randomBytes(8).toString('hex');
    const wait = this.o.askWaitMs ?? EGRESS_ASK_WAIT_MS;
    p = new Promise<{ allow: boolean; by: string }>((resolve) => {
      const timer = setTimeout(() => done({ allow: false, by: `no answer within ${Math.round(wait / 1000)} s` }, false), wait);
      const done = (a: { allow: boolean; by: string }, keep: boolean) => {
        clearTimeout(timer);
        this.waiting.delete(askId);
        this.asking.delete(key);
        if (keep && !this.closed) this.decided.set(key, a);
        resolve(a);
      };
      const ask: EgressAsk = {
        type: 'egress.ask',
        jobId: this.o.jobId,
        askId,
        host,
        port,
        ...(method && method !== 'CONNECT' ? { method: method.slice(0, 16) } : {}),
      };
      this.waiting.set(askId, { ask, settle: (a) => done(a, true) });
      const sent = this.o.edge.ask(ask);
      if (!sent) done({ allow: false, by: 'the gateway is not reachable to ask' }, false);
    });
    this.asking.set(key, p);
    return p;
  }

  /**
   * The address to dial: the literal's canonical address, or the name resolved once, every
   * answer judged; the connection goes to exactly the address judged.
   */
  private async resolve(
    target: Target,
    port: number,
    allowed: { entry: NetworkAllow | null; index: number | null },
  ): Promise<{ ok: true; address: string; port: number } | { ok: false; status: number; reason: string; policyKey?: string }> {
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

  private dial(address: string, port: number): Socket {
    const s = this.o.dial ? this.o.dial(address, port) : connect({ host: address, port });
    s.on('error', () => {});
    return s;
  }

  private begin(host: string, port: number, method: string): Conn {
    const conn: Conn = {
      rec: {
        host: host.slice(0, 253),
        port,
        method: method.slice(0, 16),
        decision: 'allowed',
        reason: '',
        bytesUp: 0,
        bytesDown: 0,
        startedAt: new Date().toISOString(),
        ms: 0,
      },
      t0: performance.now(),
      sockets: new Set(),
      done: false,
    };
    this.open.add(conn);
    return conn;
  }

  private refuse(conn: Conn, reason: string): void {
    conn.rec.decision = 'refused';
    this.finish(conn, reason);
    this.o.log?.info(`job ${this.o.jobId}: egress to ${conn.rec.host}:${conn.rec.port} refused: ${reason}`);
  }

  /** Writes the connection's record once (its end), with `why` added to the reason. */
  private finish(conn: Conn, why: string | undefined): void {
    if (conn.done) return;
    conn.done = true;
    this.open.delete(conn);
    const r = conn.rec;
    if (why && !r.reason.endsWith(why)) r.reason = r.reason ? `${r.reason}; ${why}` : why;
    r.reason = r.reason.slice(0, 300);
    r.ms = Math.max(0, Math.round(performance.now() - conn.t0));
    if (this.listed >= EGRESS_CONNECTIONS_MAX) this.dropped++;
    else {
      this.listed++;
      this.pending.push(r);
      if (this.pending.length >= LOG_BATCH) this.flush(false);
    }
    if (!this.open.size) this.settle?.();
  }

  private flush(last: boolean): void {
    while (this.pending.length || (last && this.dropped)) {
      const connections = this.pending.splice(0, LOG_BATCH);
      const tail = last && !this.pending.length;
      this.o.edge.log({ type: 'egress.log', jobId: this.o.jobId, connections, ...(tail && this.dropped ? { dropped: this.dropped } : {}) });
      if (tail) break;
    }
  }
}

/** The body of a refusal: the host, why, and the policy key that would change it. */
function refusalText(host: string, port: number, reason: string, policyKey?: string): string {
  return `gatehouse egress: refused ${host.includes(':') ? `[${host}]` : host}:${port}: ${reason}${policyKey ? `. To allow it, change ${policyKey} in the team policy` : ''}\n`;
}

/** A complete HTTP/1.1 error response for a raw socket (CONNECT, upgrade). */
function refusal(status: number, body: string): string {
  const text = { 400: 'Bad Request', 403: 'Forbidden', 501: 'Not Implemented', 502: 'Bad Gateway' }[status] ?? 'Error';
  return `HTTP/1.1 ${status} ${text}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** Raw header pairs as one value per name (repeated names joined, as HTTP allows; set-cookie kept as a list). */
function groupHeaders(pairs: [string, string][]): [string, string | string[]][] {
  const m = new Map<string, [string, string[]]>();
  for (const [k, v] of pairs) {
    const e = m.get(k.toLowerCase());
    if (e) e[1].push(v);
    else m.set(k.toLowerCase(), [k, [v]]);
  }
  return [...m.values()].map(([k, v]) => [k, v.length === 1 ? v[0] : v]);
}

/**
 * Why a plain HTTP request's Host header does not name the host and port it was decided for
 * (null when every Host header does; none at all is HTTP/1.0's way and gets the checked one).
 * Compared as the proxy compares hosts: case, a trailing dot, the default port 80 and the
 * spelling of an address do not matter.
 */
function frontedHost(rawHeaders: readonly string[], host: string, port: number): string | null {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toLowerCase() !== 'host') continue;
    const value = rawHeaders[i + 1].trim();
    const m = /^(\[[^\]]*\]|[^:[\]]*)(?::(\d{1,5}))?$/.exec(value);
    const h = m ? parseHost(m[1]) : null;
    const named = h?.kind === 'address' ? h.address.address : h?.kind === 'name' ? h.name : null;
    if (named !== host || (m?.[2] ? Number(m[2]) : 80) !== port) {
      return `host header mismatch: the request is for ${host}:${port}, its Host header names "${value.slice(0, 100)}" (a request reaches only the host it was decided for)`;
    }
  }
  return null;
}
