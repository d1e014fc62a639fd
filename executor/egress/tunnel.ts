/**
 * CONNECT tunnels through the proxy: `CONNECT host:port` is decided for its host and port, dialled
 * to exactly the address the proxy judged, and must carry TLS whose ClientHello names the CONNECT
 * host (SNI); only then does anything go upstream. Both directions count against the job's caps.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { normalizeHost, parseHost } from './address.ts';
import type { Conn } from './connection-log.ts';
import type { EgressGate } from './gate.ts';
import { refusal, refusalText } from './refusal.ts';
import { HELLO_MAX_BYTES, readClientHello } from './sni.ts';

export async function openTunnel(gate: EgressGate, req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
  client.on('error', () => {});
  const m = /^(\[[0-9A-Za-z:.%_-]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(req.url ?? '');
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65_535) {
    client.end(refusal(400, `gatehouse egress: CONNECT needs host:port, got "${(req.url ?? '').slice(0, 100)}"\n`));
    return;
  }
  const parsed = parseHost(m[1]);
  const host = parsed.kind === 'address' ? parsed.address.address : parsed.kind === 'name' ? parsed.name : normalizeHost(m[1]);
  const port = Number(m[2]);
  const conn = gate.begin(host, port, 'CONNECT');
  conn.sockets.add(client);
  const deny = (status: number, reason: string, policyKey?: string) => {
    gate.refuse(conn, reason, policyKey);
    client.end(refusal(status, refusalText(host, port, reason, policyKey)));
  };
  if (parsed.kind === 'invalid') return deny(400, parsed.reason);
  const v = await gate.check(parsed, port, undefined);
  if (!v.ok) return deny(v.status, v.reason, v.policyKey);
  const target = await gate.resolve(parsed, port, v);
  if (!target.ok) return deny(target.status, target.reason, target.policyKey);
  conn.rec.address = target.address;
  if (gate.ended() || client.destroyed) return deny(403, 'the job ended');

  const upstream = gate.dial(target.address, target.port);
  conn.sockets.add(upstream);
  const connected = await new Promise<Error | null>((r) => {
    upstream.once('connect', () => r(null));
    upstream.once('error', (e) => r(e));
  });
  if (connected) {
    conn.rec.reason = `${v.reason}; connect failed: ${connected.message}`;
    client.end(refusal(502, `gatehouse egress: ${host}:${port} (${target.address}) could not be reached: ${connected.message}\n`));
    gate.finish(conn, undefined);
    return;
  }
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  // The tunnel carries TLS to the CONNECT host only: read the ClientHello before anything goes upstream.
  const hello = await readHello(client, head, gate.helloWaitMs);
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
    gate.finish(conn, why);
    return;
  }
  conn.rec.reason = v.reason;
  if (!gate.count(conn, 'up', hello.bytes.length)) return;
  upstream.write(hello.bytes);
  pipe(gate, conn, client, upstream, 'up');
  pipe(gate, conn, upstream, client, 'down');
}

/** Reads the first TLS record(s) from the client (after `head`), without consuming what follows. */
function readHello(
  client: Duplex,
  head: Buffer,
  waitMs: number,
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
    timer = setTimeout(() => finish({ kind: 'timeout', bytes: buf }), waitMs);
    client.on('data', onData);
    client.on('close', onClose);
    client.resume();
  });
}

/** Copies `from` to `to`, counting against the job's caps, with backpressure; either end closing closes both. */
function pipe(gate: EgressGate, conn: Conn, from: Duplex, to: Duplex, dir: 'up' | 'down'): void {
  from.on('data', (d: Buffer) => {
    if (!gate.count(conn, dir, d.length)) return;
    if (!to.write(d)) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  });
  from.on('end', () => to.end());
  from.on('error', () => to.destroy());
  from.on('close', () => {
    to.destroy();
    gate.finish(conn, gate.capPassed() ? 'byte cap' : undefined);
  });
  from.resume();
}
