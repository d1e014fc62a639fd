/**
 * A loopback proxy between an executor agent and the gateway, for whole-system tests of what a
 * network does to an agent: it forwards every HTTP request and the agent's WebSocket unchanged,
 * reads (never alters) the agent's messages and counts the bytes it sends, and on request holds or refuses artifact uploads, or
 * one upload request once (a slow or failing upload target), or drops the agent's socket without the agent process
 * noticing anything but a broken connection. Listens on 127.0.0.1 only.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { ARTIFACT_UPLOAD_PATH, UPLOAD_AGENT_HEADER, UPLOAD_TOKEN_HEADER } from '../../src/contracts/agent-protocol.ts';
import { parseFrame } from '../support/ws-frames.ts';
import { decodeOutputFrame } from '../../src/contracts/output-frame.ts';

type Msg = Record<string, unknown>;

export class AgentProxy {
  url = '';
  /** Every message the agent sent through the proxy, in order, across its connections. */
  readonly fromAgent: Msg[] = [];
  /** WebSocket connections the agent opened through the proxy. */
  connections = 0;
  /** Bytes the agent wrote on its WebSockets as they cross the network (every frame with its header), across connections. */
  agentSocketBytes = 0;
  /** Payload bytes of the agent's WebSocket messages: binary (live output frames, header included) and text (JSON). */
  readonly agentPayloadBytes = { binary: 0, text: 0 };
  /** When (performance.now()) each of the agent's heartbeats passed the proxy. */
  readonly heartbeatTimes: number[] = [];
  private readonly target: URL;
  private readonly server: Server;
  private readonly pairs = new Set<{ agent: Socket; gateway: Socket }>();
  private gate: Promise<void> | null = null;
  private refuseWith: number | null = null;
  private dropAfterExit: string | null = null;
  private failing: { suffix: string; status: number; times: number } | null = null;
  /** Every artifact upload request the agent made (`METHOD path`, and the status it got), in order. */
  readonly uploadRequests: { request: string; status: number }[] = [];
  /** The upload headers the agent sent for each artifact handle (its agent id and the job's upload grant): what a test sends to act as that agent. */
  readonly uploadGrants = new Map<string, Record<string, string>>();

  constructor(gatewayUrl: string) {
    this.target = new URL(gatewayUrl);
    this.server = createServer((req, res) => void this.forward(req, res));
    this.server.on('upgrade', (req, socket: Socket, head: Buffer) => this.upgrade(req, socket, head));
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  async stop(): Promise<void> {
    this.dropAgentSockets();
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(() => r(undefined)));
  }

  /** Artifact body uploads (PUT; a stream's search index goes through) wait until the returned function is called. */
  holdUploads(): () => void {
    let release!: () => void;
    this.gate = new Promise<void>((r) => (release = r));
    return () => {
      this.gate = null;
      release();
    };
  }

  /** Artifact uploads are answered with `status` (never reaching the gateway); null forwards them again. */
  refuseUploads(status: number | null): void {
    this.refuseWith = status;
  }

  /** The next `times` upload requests whose path ends with `suffix` (e.g. `/multipart/2`) are answered `status`. */
  failNextUpload(suffix: string, status: number, times = 1): void {
    this.failing = { suffix, status, times };
  }

  /** Cuts every agent socket (no close handshake): what a network failure does. */
  dropAgentSockets(): void {
    for (const p of this.pairs) {
      p.agent.destroy();
      p.gateway.destroy();
    }
    this.pairs.clear();
  }

  /**
   * The next `job.exit` of `jobId` reaches the gateway, and the agent's socket is cut right after
   * it: the gateway's acknowledgement never reaches the agent, which sends the exit again.
   */
  dropRightAfterExitOf(jobId: string): void {
    this.dropAfterExit = jobId;
  }

  messages(type: string, jobId?: string): Msg[] {
    return this.fromAgent.filter((m) => m.type === type && (jobId === undefined || m.jobId === jobId));
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const upload = req.url?.startsWith(ARTIFACT_UPLOAD_PATH) ? `${req.method} ${req.url}` : null;
    const agent = req.headers[UPLOAD_AGENT_HEADER.toLowerCase()];
    const token = req.headers[UPLOAD_TOKEN_HEADER.toLowerCase()];
    if (upload && typeof agent === 'string' && typeof token === 'string') {
      this.uploadGrants.set(req.url!.slice(ARTIFACT_UPLOAD_PATH.length + 1).split('/')[0], { [UPLOAD_AGENT_HEADER]: agent, [UPLOAD_TOKEN_HEADER]: token });
    }
    const refuse = (status: number) => {
      req.resume();
      res
        .writeHead(status, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { code: 'upstream_error', message: 'upload refused by the test proxy' } }));
      this.uploadRequests.push({ request: upload!, status });
    };
    if (upload && this.failing && req.url!.endsWith(this.failing.suffix)) {
      const { status } = this.failing;
      if (--this.failing.times <= 0) this.failing = null;
      return refuse(status);
    }
    if (req.method === 'PUT' && upload) {
      if (this.gate && !req.url!.endsWith('/index')) await this.gate;
      if (this.refuseWith !== null) return refuse(this.refuseWith);
    }
    const up = request(
      {
        // The gateway's own Host: it checks tokens against its own origin.
        host: this.target.hostname,
        port: this.target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: this.target.host },
      },
      (r) => {
        if (upload) this.uploadRequests.push({ request: upload, status: r.statusCode ?? 502 });
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  }

  private upgrade(req: IncomingMessage, agent: Socket, head: Buffer): void {
    const gateway = connect(Number(this.target.port), this.target.hostname);
    const pair = { agent, gateway };
    this.pairs.add(pair);
    this.connections++;
    const close = () => {
      agent.destroy();
      gateway.destroy();
      this.pairs.delete(pair);
    };
    agent.on('error', close);
    gateway.on('error', close);
    agent.on('close', close);
    gateway.on('close', close);
    gateway.on('connect', () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i];
        lines.push(`${name}: ${name.toLowerCase() === 'host' ? this.target.host : req.rawHeaders[i + 1]}`);
      }
      gateway.write(lines.join('\r\n') + '\r\n\r\n');
      if (head.length) gateway.write(head);
      gateway.pipe(agent);
      let buf = Buffer.alloc(0);
      agent.on('data', (d: Buffer) => {
        gateway.write(d);
        this.agentSocketBytes += d.byteLength;
        buf = Buffer.concat([buf, d]);
        for (;;) {
          const f = parseFrame(buf);
          if (!f) break;
          buf = buf.subarray(f.size);
          if (f.opcode === 2) this.agentPayloadBytes.binary += f.payload.byteLength;
          if (f.opcode === 1) this.agentPayloadBytes.text += f.payload.byteLength;
          if (f.opcode === 2) {
            // Live output (binary): recorded by where it starts and how much it carries.
            const d = decodeOutputFrame(f.payload);
            if (d.ok)
              this.fromAgent.push({ type: 'job.output', jobId: d.frame.jobId, stream: d.frame.stream, offset: d.frame.offset, bytes: d.frame.data.byteLength });
            continue;
          }
          if (f.opcode !== 1) continue;
          let m: Msg;
          try {
            m = JSON.parse(f.payload.toString('utf8')) as Msg;
          } catch {
            continue;
          }
          this.fromAgent.push(m);
          if (m.type === 'heartbeat') this.heartbeatTimes.push(performance.now());
          if (m.type === 'job.exit' && m.jobId === this.dropAfterExit) {
            this.dropAfterExit = null;
            agent.destroy(); // the acknowledgement has nowhere to go
            gateway.end(); // the exit itself is delivered
            this.pairs.delete(pair);
            return;
          }
        }
      });
    });
  }
}
