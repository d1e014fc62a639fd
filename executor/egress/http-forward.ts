/**
 * Plain HTTP through the proxy: an absolute-URI request (`GET http://host/path`) is decided for
 * its host, port and method, its Host header must name that host (no domain fronting), and it
 * goes to exactly the address the proxy judged with exactly one Host, the checked one.
 */
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { normalizeHost, parseHost } from './address.ts';
import type { EgressGate } from './gate.ts';
import { refusalReason, refusalText } from './refusal.ts';

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

export async function forwardHttp(gate: EgressGate, req: IncomingMessage, res: ServerResponse): Promise<void> {
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
  const conn = gate.begin(host, port, method);
  const deny = (status: number, reason: string, policyKey?: string) => {
    gate.refuse(conn, reason, policyKey);
    const body = refusalText(host, port, reason, policyKey);
    if (!res.headersSent) res.writeHead(status, refusalReason(status, body), { 'content-type': 'text/plain', connection: 'close' });
    res.end(body);
  };
  if (parsed.kind === 'invalid') return deny(400, parsed.reason);
  // The upstream serves what Host names: it must be the host decided for, or one allowed address fronts any other name.
  const fronted = frontedHost(req.rawHeaders, host, port);
  if (fronted) return deny(403, fronted);
  const v = await gate.check(parsed, port, method);
  if (!v.ok) return deny(v.status, v.reason, v.policyKey);
  const target = await gate.resolve(parsed, port, v);
  if (!target.ok) return deny(target.status, target.reason, target.policyKey);
  conn.rec.address = target.address;
  conn.rec.reason = v.reason;
  if (gate.ended()) return deny(403, 'the job ended');

  const upstream = gate.dial(target.address, target.port);
  conn.sockets.add(upstream);
  conn.sockets.add(req.socket);
  upstream.on('data', (d: Buffer) => gate.count(conn, 'down', d.length));
  // Exactly one Host, the checked one (an HTTP/1.0 request may have sent none).
  const headers: [string, string][] = [['Host', url.host]];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const k = req.rawHeaders[i].toLowerCase();
    if (k !== 'host' && (!HOP_BY_HOP.has(k) || k === 'transfer-encoding')) headers.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
  }
  const path = url.pathname + url.search;
  gate.count(conn, 'up', method.length + path.length + headers.reduce((n, [k, x]) => n + k.length + x.length + 4, 16));
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
    r.on('end', () => gate.finish(conn, undefined));
    r.on('error', () => gate.finish(conn, undefined));
  });
  out.on('error', (e) => {
    if (!res.headersSent) {
      conn.rec.decision = 'allowed';
      res
        .writeHead(502, { 'content-type': 'text/plain', connection: 'close' })
        .end(`gatehouse egress: ${host}:${port} (${target.address}) failed: ${e.message}\n`);
    } else res.destroy();
    gate.finish(conn, gate.capPassed() ? 'byte cap' : undefined);
  });
  req.on('data', (d: Buffer) => {
    if (gate.count(conn, 'up', d.length) && !out.write(d)) {
      req.pause();
      out.once('drain', () => req.resume());
    }
  });
  req.on('end', () => out.end());
  res.on('close', () => {
    if (!conn.done) {
      upstream.destroy();
      gate.finish(conn, gate.capPassed() ? 'byte cap' : undefined);
    }
  });
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
