/**
 * A stand-in gateway for agent tests: accepts the agent WebSocket (RFC 6455 framing, by
 * hand: Node has no WebSocket server and we add no dependency), records what the agent
 * sends, and takes artifact PUTs. Loopback only. Like the real edge it keeps each stream's live
 * output as a gap-free prefix, and fills in the inline output of an exit that left it to the live
 * frames (`inlineFromLive`, kept on the recorded message) with the shared `inlineResult`.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { AGENT_CONNECT_PATH, AGENT_PING, AGENT_PONG, ARTIFACT_UPLOAD_PATH, type JobExit, type JobSpec } from '../../src/contracts/agent-protocol.ts';
import { encodeFrame, parseFrame } from '../support/ws-frames.ts';
import { decodeOutputFrame } from '../../src/contracts/output-frame.ts';
import { inlineResult } from '../../src/contracts/inline-result.ts';

export interface Upload {
  path: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export class FakeEdge {
  url = '';
  token = 'good-token';
  readonly received: Record<string, unknown>[] = [];
  readonly uploads: Upload[] = [];
  /** When each heartbeat (a ping, or protocol 2's `heartbeat`) arrived (ms since the epoch). */
  readonly heartbeatTimes: number[] = [];
  /** While set, a ping is answered with a pong, as the gateway's platform does (off: an edge that never answers one). */
  pong = false;
  /** While set, artifact PUTs wait for it before they are answered (a slow upload target). */
  uploadGate: Promise<void> | null = null;
  /** Status the artifact PUTs get (e.g. 400: a refused upload, which the agent does not retry). */
  uploadStatus = 201;
  /** Every HTTP request and upgrade attempt, whatever it asked for. */
  requests = 0;
  connections = 0;
  private server: Server;
  private socket: Socket | null = null;
  private waiters: { pred: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] = [];
  /** Messages already consumed by `next` are not matched again. */
  private cursor = 0;
  /** Live output kept per `jobId/stream`, as one prefix from offset 0 (what the edge's job_output holds). */
  private readonly live = new Map<string, Buffer>();
  /** The inline cap of each job started through `send` (an exit may leave its inline output to the live frames). */
  private readonly inlineCaps = new Map<string, number>();

  constructor() {
    this.server = createServer((req, res) => {
      this.requests++;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.headers.authorization !== `Bearer ${this.token}`) {
          res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"code":"unauthenticated","message":"token refused"}}');
          return;
        }
        if (req.method === 'PUT' && req.url?.startsWith(ARTIFACT_UPLOAD_PATH)) {
          const upload = { path: req.url, headers: req.headers, body: Buffer.concat(chunks) };
          void (this.uploadGate ?? Promise.resolve()).then(() => {
            if (this.uploadStatus < 300) this.uploads.push(upload);
            res.writeHead(this.uploadStatus).end(this.uploadStatus < 300 ? '{}' : '{"error":{"code":"invalid_argument","message":"refused by the test"}}');
          });
          return;
        }
        res.writeHead(426).end('upgrade required');
      });
    });
    this.server.on('upgrade', (req, socket: Socket) => this.upgrade(req, socket));
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    const { port } = this.server.address() as { port: number };
    this.url = `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    this.socket?.destroy();
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(() => r(undefined)));
  }

  private upgrade(req: IncomingMessage, socket: Socket): void {
    this.requests++;
    if (req.url !== AGENT_CONNECT_PATH || req.headers.authorization !== `Bearer ${this.token}`) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    const accept = createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    this.connections++;
    this.socket = socket;
    let buf = Buffer.alloc(0);
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const f = parseFrame(buf);
        if (!f) break;
        buf = buf.subarray(f.size);
        if (f.opcode === 1 && this.pong && f.payload.toString('utf8') === AGENT_PING) socket.write(encodeFrame(Buffer.from(AGENT_PONG), 1));
        if (f.opcode === 1) this.onMessage(JSON.parse(f.payload.toString('utf8')) as Record<string, unknown>);
        else if (f.opcode === 2) this.onFrame(f.payload);
        else if (f.opcode === 8) socket.end();
        else if (f.opcode === 9) socket.write(encodeFrame(f.payload, 10));
      }
    });
    socket.on('error', () => {});
  }

  /** A binary frame is live output: recorded as a `job.output` entry (`data` as text, `bytes` as sent). */
  private onFrame(payload: Buffer): void {
    const d = decodeOutputFrame(payload);
    if (!d.ok) throw new Error(`the agent sent a malformed output frame: ${d.reason}`);
    const bytes = Buffer.from(d.frame.data);
    const key = `${d.frame.jobId}/${d.frame.stream}`;
    const kept = this.live.get(key) ?? Buffer.alloc(0);
    // As the edge keeps it: bytes already kept are skipped, a frame past the end (after a gap) ignored.
    if (d.frame.offset <= kept.length) this.live.set(key, Buffer.concat([kept, bytes.subarray(kept.length - d.frame.offset)]));
    this.onMessage({ type: 'job.output', jobId: d.frame.jobId, stream: d.frame.stream, offset: d.frame.offset, data: bytes.toString('utf8'), bytes });
  }

  private onMessage(m: Record<string, unknown>): void {
    if (m.type === 'heartbeat' || m.type === 'ping') this.heartbeatTimes.push(Date.now());
    if (m.type === 'job.exit' && m.inlineFromLive === true) m = this.inlineFromLive(m as unknown as JobExit);
    this.received.push(m);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(m)) return true;
      w.resolve(m);
      return false;
    });
  }

  /** The first message (from now on, or already received and not yet taken) matching `pred`. */
  next(pred: (m: Record<string, unknown>) => boolean, timeoutMs = 10_000): Promise<Record<string, unknown>> {
    for (let i = this.cursor; i < this.received.length; i++) {
      if (pred(this.received[i])) {
        this.cursor = i + 1;
        return Promise.resolve(this.received[i]);
      }
    }
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no matching message in ${timeoutMs} ms; got ${JSON.stringify(this.received.slice(-5))}`)), timeoutMs);
      this.waiters.push({
        pred,
        resolve: (m) => {
          clearTimeout(t);
          this.cursor = this.received.length;
          resolve(m);
        },
      });
    });
  }

  /** A live-form exit as the edge stores it: its inline output rebuilt from the kept live bytes (the flag stays, for tests to see). */
  private inlineFromLive(m: JobExit): Record<string, unknown> {
    if (m.stdout !== '' || m.stderr !== '') throw new Error(`job ${m.jobId}: an exit that leaves its inline output to the live frames carries text`);
    const cap = this.inlineCaps.get(m.jobId);
    if (cap === undefined) throw new Error(`job ${m.jobId}: an inlineFromLive exit of a job not started through this edge`);
    const head = (stream: 'stdout' | 'stderr') => ({ head: this.live.get(`${m.jobId}/${stream}`) ?? Buffer.alloc(0), total: m.streams[stream].bytes });
    return { ...m, ...inlineResult(head('stdout'), head('stderr'), cap) };
  }

  send(m: unknown): void {
    const start = m as { type?: string; spec?: JobSpec };
    if (start.type === 'job.start' && start.spec?.limits) this.inlineCaps.set(start.spec.jobId, start.spec.limits.inlineBytes);
    this.sendRaw(typeof m === 'string' ? m : JSON.stringify(m));
  }

  sendRaw(text: string): void {
    this.socket?.write(encodeFrame(Buffer.from(text), 1));
  }

  /** Closes the socket with a close frame carrying `code` and `reason`, as the edge does when it refuses an agent. */
  close(code: number, reason: string): void {
    const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
    payload.writeUInt16BE(code, 0);
    payload.write(reason, 2);
    this.socket?.end(encodeFrame(payload, 8));
    this.socket = null;
  }

  /** Drops the socket without a close handshake (a network failure). */
  drop(): void {
    this.socket?.destroy();
    this.socket = null;
  }
}
