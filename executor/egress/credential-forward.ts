/**
 * HTTPS to a credential host (docs/credentials.md): instead of a blind tunnel, the proxy terminates the
 * job's TLS with a certificate its agent CA (agent-ca.ts) made for exactly that host, reads each HTTP/1.1
 * request, replaces any header of the bound names the job sent with `header: scheme value` from the team
 * secret, and sends it over a new TLS connection to the upstream, verified as any client verifies it
 * (system roots, plus the agent's own extra CAs). Other hosts never reach this file: they stay tunnels.
 * Upstream connections are kept alive across the job's requests through one tunnel.
 */
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, rootCertificates, TLSSocket } from 'node:tls';
import type { Conn } from './connection-log.ts';
import type { CredentialRoute, EgressGate } from './gate.ts';
import { refusalReason, refusalText } from './refusal.ts';

/** Request headers that belong to one hop and are not forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'proxy-connection', 'keep-alive', 'proxy-authorization', 'te', 'trailer', 'upgrade', 'transfer-encoding', 'host']);
const RESPONSE_HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'trailer', 'upgrade', 'transfer-encoding']);

/** Serves the job's side of one CONNECT tunnel to `host:port` (dialled at `address`), adding the credentials. */
export function forwardWithCredentials(
  gate: EgressGate,
  conn: Conn,
  client: Duplex,
  hello: Buffer,
  to: { host: string; port: number; address: string; dialPort: number; first: Socket },
  route: CredentialRoute,
): void {
  const leaf = route.ca.leaf(to.host);
  client.unshift(hello);
  const tls = new TLSSocket(client as Socket, { isServer: true, key: leaf.key, cert: leaf.cert, ALPNProtocols: ['http/1.1'] });
  tls.on('error', () => tls.destroy());
  conn.sockets.add(tls);
  conn.rec.credential = [...new Set(route.credentials.map((c) => c.binding.secret))].join(',');
  let first: Socket | null = to.first;
  const ca = route.upstreamCas?.length ? [...rootCertificates, ...route.upstreamCas] : undefined;
  const agent = new HttpsAgent({ keepAlive: true, maxSockets: 4 });
  // Every upstream connection goes to the address the proxy judged, verified for the host's name.
  agent.createConnection = () => {
    const raw = first ?? gate.dial(to.address, to.dialPort);
    first = null;
    conn.sockets.add(raw);
    return tlsConnect({ socket: raw, servername: to.host, ca, ALPNProtocols: ['http/1.1'] });
  };
  const server = createServer({ requestTimeout: 0 }, (req, res) => forwardOne(gate, conn, to, route, agent, req, res));
  server.on('clientError', (_e, s: Duplex) => s.destroy());
  tls.on('close', () => {
    agent.destroy();
    first?.destroy();
    gate.finish(conn, gate.capPassed() ? 'byte cap' : undefined);
  });
  server.emit('connection', tls);
}

function forwardOne(
  gate: EgressGate,
  conn: Conn,
  to: { host: string; port: number },
  route: CredentialRoute,
  agent: HttpsAgent,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const authority = to.port === 443 ? to.host : `${to.host}:${to.port}`;
  const path = req.url ?? '/';
  const hostHeader = (req.headers.host ?? '').toLowerCase().replace(/\.?(:443)?$/, '');
  // Inside the tunnel a request must stay on the tunnel's host: the credential is for it alone.
  if (!path.startsWith('/') || (hostHeader && hostHeader !== authority.toLowerCase())) {
    res
      .writeHead(421, { 'content-type': 'text/plain', connection: 'close' })
      .end(`gatehouse egress: this connection is for ${authority} only; the request names ${(req.headers.host ?? path).slice(0, 100)}\n`);
    return;
  }
  // The request is readable here, unlike in a blind tunnel: an entry's `methods` hold (a read-only token stays read-only).
  const method = (req.method ?? 'GET').toUpperCase();
  const no = gate.methodRefusal(to.host, to.port, method);
  if (no) {
    gate.refuse(gate.begin(to.host, to.port, method), no.reason, no.policyKey);
    const body = refusalText(to.host, to.port, no.reason, no.policyKey);
    res.writeHead(403, refusalReason(403, body), { 'content-type': 'text/plain', connection: 'close' }).end(body);
    return;
  }
  const bound = new Set(route.credentials.map((c) => c.binding.header.toLowerCase()));
  const headers: [string, string][] = [['Host', authority]];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const k = req.rawHeaders[i].toLowerCase();
    // The job's own value for a bound header is dropped: it can neither override nor learn the secret's.
    if (!HOP_BY_HOP.has(k) && !bound.has(k)) headers.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
  }
  for (const c of route.credentials) headers.push([c.binding.header, c.binding.scheme ? `${c.binding.scheme} ${c.value}` : c.value]);
  if (req.headers['transfer-encoding']) headers.push(['Transfer-Encoding', 'chunked']);
  gate.count(conn, 'up', method.length + path.length + req.rawHeaders.reduce((n, x) => n + x.length + 2, 16));
  const out = httpsRequest({ method, path, headers: groupHeaders(headers), agent, setHost: false });
  out.on('response', (r) => {
    const h: Record<string, string | string[]> = {};
    for (const [k, x] of Object.entries(r.headers)) if (x !== undefined && !RESPONSE_HOP_BY_HOP.has(k)) h[k] = x;
    res.writeHead(r.statusCode ?? 502, r.statusMessage, h);
    // Held back while the job reads slowly: a download never piles up in the agent's memory.
    r.on('data', (d: Buffer) => {
      if (gate.count(conn, 'down', d.length) && !res.write(d)) {
        r.pause();
        res.once('drain', () => r.resume());
      }
    });
    r.on('end', () => res.end());
    r.on('error', () => res.destroy());
  });
  out.on('error', (e) => {
    if (!res.headersSent) {
      res.writeHead(502, { 'content-type': 'text/plain' }).end(`gatehouse egress: ${authority} failed: ${e.message}\n`);
    } else res.destroy();
  });
  req.on('data', (d: Buffer) => {
    if (gate.count(conn, 'up', d.length) && !out.write(d)) {
      req.pause();
      out.once('drain', () => req.resume());
    }
  });
  req.on('end', () => out.end());
}

/** Raw header pairs as one value per name (repeated names as a list). */
function groupHeaders(pairs: [string, string][]): Record<string, string | string[]> {
  const m: Record<string, string | string[]> = {};
  const names = new Map<string, string>();
  for (const [k, v] of pairs) {
    const name = names.get(k.toLowerCase()) ?? k;
    names.set(k.toLowerCase(), name);
    const e = m[name];
    m[name] = e === undefined ? v : Array.isArray(e) ? [...e, v] : [e, v];
  }
  return m;
}
