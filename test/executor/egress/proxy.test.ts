/**
 * The egress proxy against real sockets on 127.0.0.1: a test resolver answers public-looking
 * addresses and a test dialer sends every connection to a local upstream, recording the address
 * the proxy chose, so nothing ever leaves 127.0.0.1.
 */
import { once } from 'node:events';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EgressProxy, type EgressEdge } from '../../../executor/egress/proxy.ts';
import { until } from '../../support/until.ts';
import type { EgressAsk, EgressLog, NetworkAllow, NetworkGrant } from '../../../src/contracts/network.ts';

const PUBLIC = '93.184.216.34';
const BIG = 1 << 20;

let http: Server;
let httpPort = 0;
let tcp: TcpServer;
let tcpPort = 0;
/** Bytes each raw TCP upstream connection received so far. */
const tcpReceived: Buffer[] = [];
const seen: { method: string; url: string; body: string; hosts: string[] }[] = [];

beforeAll(async () => {
  http = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', body: Buffer.concat(chunks).toString(), hosts: req.headersDistinct.host ?? [] });
      if (req.url === '/big') res.writeHead(200, { 'content-length': String(BIG) }).end(Buffer.alloc(BIG, 120));
      else res.writeHead(200, { 'content-type': 'text/plain' }).end(`upstream ${req.method} ${req.url} ${Buffer.concat(chunks).toString()}`);
    });
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  httpPort = (http.address() as { port: number }).port;
  tcp = createTcpServer((s) => {
    const i = tcpReceived.push(Buffer.alloc(0)) - 1;
    s.on('data', (d: Buffer) => (tcpReceived[i] = Buffer.concat([tcpReceived[i], d])));
    s.on('error', () => {});
  });
  tcp.listen(0, '127.0.0.1');
  await once(tcp, 'listening');
  tcpPort = (tcp.address() as { port: number }).port;
});
afterAll(async () => {
  http.closeAllConnections();
  await new Promise((r) => http.close(r));
  await new Promise((r) => tcp.close(r));
});

interface Rig {
  proxy: EgressProxy;
  port: number;
  dialed: string[];
  lookups: string[];
  asks: EgressAsk[];
  logs: EgressLog[];
}
const rigs: Rig[] = [];
afterEach(async () => {
  for (const r of rigs.splice(0)) await r.proxy.close();
});

function grant(allow: NetworkAllow[], more: Partial<NetworkGrant> = {}): NetworkGrant {
  return { mode: 'allowlist', allow, unlisted: 'deny', maxBytesUp: 1 << 20, maxBytesDown: 4 << 20, source: 'network', ...more };
}

async function rig(
  g: NetworkGrant,
  o: { resolve?: (host: string, n: number) => string[]; ask?: (m: EgressAsk) => boolean; askWaitMs?: number; upstream?: 'http' | 'tcp' } = {},
): Promise<Rig> {
  const dialed: string[] = [];
  const lookups: string[] = [];
  const asks: EgressAsk[] = [];
  const logs: EgressLog[] = [];
  const edge: EgressEdge = {
    ask: (m) => {
      asks.push(m);
      return o.ask ? o.ask(m) : true;
    },
    log: (m) => logs.push(m),
  };
  const proxy = new EgressProxy({
    jobId: 'job-1',
    grant: g,
    edge,
    askWaitMs: o.askWaitMs,
    resolve: async (host) => {
      lookups.push(host);
      return o.resolve ? o.resolve(host, lookups.length) : [PUBLIC];
    },
    // Wherever the proxy decided to go, the bytes go to a local upstream; the address is recorded.
    dial: (address, port) => {
      dialed.push(`${address}:${port}`);
      return connect({ host: '127.0.0.1', port: port === 443 || o.upstream === 'tcp' ? tcpPort : httpPort });
    },
  });
  const port = await proxy.listen({ port: 0 });
  const r = { proxy, port, dialed, lookups, asks, logs };
  rigs.push(r);
  return r;
}

/** A plain-HTTP request through the proxy (absolute URI). */
function viaProxy(port: number, url: string, method = 'GET', body?: string): Promise<{ status: number; text: string; bytes: number; aborted: boolean }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request({ host: '127.0.0.1', port, method, path: url, headers: { host: u.host }, agent: false }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let aborted = false;
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('aborted', () => (aborted = true));
      res.on('error', () => (aborted = true));
      res.on('close', () => {
        const b = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, text: b.subarray(0, 2000).toString(), bytes: b.length, aborted: aborted || !res.complete });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** CONNECT through the proxy: the status line's code and, on 200, the tunnel socket. */
function tunnel(port: number, target: string): Promise<{ status: number; socket: Socket; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'CONNECT', path: target, agent: false });
    req.on('connect', (res: IncomingMessage, socket: Socket, head: Buffer) => {
      if (res.statusCode === 200) return resolve({ status: 200, socket, text: '' });
      // Node hands over the socket for any answer to CONNECT: a refusal's body follows on it.
      const chunks = [head];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('close', () => resolve({ status: res.statusCode ?? 0, socket, text: Buffer.concat(chunks).toString() }));
    });
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, socket: res.socket as Socket, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Starts TLS in the tunnel with `servername` (none: no SNI) and resolves once the proxy closed it or upstream got bytes. */
async function tlsThrough(socket: Socket, servername: string | null): Promise<void> {
  const t = tlsConnect({ socket, ...(servername === null ? {} : { servername }), rejectUnauthorized: false });
  t.on('error', () => {});
  await new Promise((r) => {
    t.on('close', r);
    socket.on('close', r);
    // The raw upstream never answers: once it holds the ClientHello, the test ends the tunnel.
    const poll = setInterval(() => {
      if (tcpReceived.some((b) => b.length > 0)) {
        clearInterval(poll);
        r(undefined);
      }
    }, 20);
    t.on('close', () => clearInterval(poll));
  });
  t.destroy();
  socket.destroy();
}

async function records(r: Rig) {
  await r.proxy.close();
  return r.logs.flatMap((l) => l.connections);
}

describe('egress proxy: plain HTTP', () => {
  it('forwards a request to an allowed host, to the address it resolved, and records it', async () => {
    const r = await rig(grant([{ host: 'registry.test' }]));
    const res = await viaProxy(r.port, 'http://registry.test/pkg?x=1', 'POST', 'hello');
    expect(res.status).toBe(200);
    expect(res.text).toBe('upstream POST /pkg?x=1 hello');
    expect(r.dialed).toEqual([`${PUBLIC}:80`]);
    const recs = await records(r);
    expect(recs).toHaveLength(1);
    expect(recs[0]).toMatchObject({
      host: 'registry.test',
      port: 80,
      address: PUBLIC,
      method: 'POST',
      decision: 'allowed',
      reason: 'network.allow[0] (registry.test)',
    });
    expect(recs[0].bytesUp).toBeGreaterThan(5);
    expect(recs[0].bytesDown).toBeGreaterThan(20);
  });

  it('refuses an unlisted host with 403 naming the host and the policy key, without resolving or dialing it', async () => {
    const r = await rig(grant([{ host: 'registry.test' }], { source: 'rules[2].network' }));
    const res = await viaProxy(r.port, 'http://evil.test/upload', 'POST', 'secret');
    expect(res.status).toBe(403);
    expect(res.text).toContain('evil.test:80');
    expect(res.text).toContain('rules[2].network.allow');
    expect(r.dialed).toEqual([]);
    expect(r.lookups).toEqual([]);
    const recs = await records(r);
    expect(recs[0]).toMatchObject({ host: 'evil.test', decision: 'refused', method: 'POST' });
    expect(recs[0].reason).toContain('not in rules[2].network.allow');
  });

  it('matches *.suffix wildcards on subdomains only', async () => {
    const r = await rig(grant([{ host: '*.pkg.test' }]));
    expect((await viaProxy(r.port, 'http://a.b.pkg.test/')).status).toBe(200);
    expect((await viaProxy(r.port, 'http://pkg.test/')).status).toBe(403);
    expect((await viaProxy(r.port, 'http://evilpkg.test/')).status).toBe(403);
  });

  it('allows ports 80 and 443 by default and only the listed ones when ports are given', async () => {
    const r = await rig(grant([{ host: 'registry.test' }, { host: 'api.test', ports: [8080] }]));
    const other = await viaProxy(r.port, 'http://registry.test:8080/');
    expect(other.status).toBe(403);
    expect(other.text).toContain('network.allow[0].ports');
    expect((await viaProxy(r.port, 'http://api.test:8080/')).status).toBe(200);
    expect((await viaProxy(r.port, 'http://api.test/')).status).toBe(403);
  });

  it('applies method rules to plain HTTP', async () => {
    const r = await rig(grant([{ host: 'registry.test', methods: ['GET', 'HEAD'] }]));
    expect((await viaProxy(r.port, 'http://registry.test/a')).status).toBe(200);
    const post = await viaProxy(r.port, 'http://registry.test/a', 'POST', 'data');
    expect(post.status).toBe(403);
    expect(post.text).toContain('method POST');
    expect(post.text).toContain('network.allow[0].methods');
    expect(seen.some((s) => s.method === 'POST' && s.body === 'data' && s.url === '/a')).toBe(false);
  });

  it('refuses a name that resolves to a private address, unless the entry allows private addresses', async () => {
    for (const a of ['10.1.2.3', '127.0.0.1', '169.254.169.254', '100.64.0.1', 'fd00::1', '::1', 'fe80::1', '::ffff:127.0.0.1', '224.0.0.1']) {
      const r = await rig(grant([{ host: 'internal.test' }]), { resolve: () => [a] });
      const res = await viaProxy(r.port, 'http://internal.test/');
      expect(res.status, a).toBe(403);
      expect(res.text).toContain('private address');
      expect(r.dialed).toEqual([]);
    }
    const ok = await rig(grant([{ host: 'internal.test', privateAddresses: true }]), { resolve: () => ['10.1.2.3'] });
    expect((await viaProxy(ok.port, 'http://internal.test/')).status).toBe(200);
    expect(ok.dialed).toEqual(['10.1.2.3:80']);
  });

  it('refuses an IP literal in a private range even when the grant is open', async () => {
    const r = await rig(grant([], { mode: 'open' }));
    expect((await viaProxy(r.port, 'http://127.0.0.1:80/')).status).toBe(403);
    expect((await viaProxy(r.port, 'http://anything.test/')).status).toBe(200);
    expect(r.dialed).toEqual([`${PUBLIC}:80`]);
  });

  it('connects to the address it checked: a resolver that rebinds to 127.0.0.1 after the check is never asked again', async () => {
    // First answer public, every later one loopback: a proxy that looked up twice would dial 127.0.0.1.
    const r = await rig(grant([{ host: 'rebind.test' }]), { resolve: (_h, n) => (n === 1 ? [PUBLIC] : ['127.0.0.1']) });
    expect((await viaProxy(r.port, 'http://rebind.test/')).status).toBe(200);
    expect(r.dialed).toEqual([`${PUBLIC}:80`]);
    expect(r.lookups).toEqual(['rebind.test']);
    // The next connection looks up again and gets loopback: refused, not dialed.
    expect((await viaProxy(r.port, 'http://rebind.test/')).status).toBe(403);
    expect(r.dialed).toEqual([`${PUBLIC}:80`]);
  });

  it('refuses a name when any of its answers is private, even among public ones (a rebinding name)', async () => {
    const r = await rig(grant([{ host: 'mixed.test' }]), { resolve: () => [PUBLIC, '::ffff:7f00:1'] });
    const res = await viaProxy(r.port, 'http://mixed.test/');
    expect(res.status).toBe(403);
    expect(res.text).toContain('private address mixed.test resolves to 127.0.0.1 (loopback 127.0.0.0/8)');
    expect(res.text).toContain('network.allow[0].privateAddresses');
    expect(r.dialed).toEqual([]);
  });

  it('refuses a literal in any spelling under open mode, and dials the canonical address an entry with privateAddresses allows', async () => {
    const r = await rig(grant([{ host: '10.0.0.7', privateAddresses: true }], { mode: 'open' }));
    for (const url of ['http://[0:0:0:0:0:ffff:7f00:1]/', 'http://[::ffff:a9fe:a9fe]/', 'http://0x7f000001/', 'http://[64:ff9b::7f00:1]/']) {
      const res = await viaProxy(r.port, url);
      expect(res.status, url).toBe(403);
      expect(res.text, url).toMatch(/private address \S+ \((loopback|link-local)/);
    }
    expect(r.dialed).toEqual([]);
    expect((await viaProxy(r.port, 'http://[::ffff:a00:7]/')).status).toBe(200);
    expect(r.dialed).toEqual(['10.0.0.7:80']);
    expect(r.lookups).toEqual([]);
  });
});

describe('egress proxy: the Host header of plain HTTP', () => {
  /** A request through the proxy with its own Host header (undici's fetch would replace it). */
  function withHost(port: number, url: string, ...hosts: string[]): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const headers: [string, string][] = hosts.map((h) => ['Host', h]);
      const req = request({ host: '127.0.0.1', port, method: 'GET', path: url, headers: headers.flat(), setHost: false, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('refuses a request whose Host names another host than its absolute URI (domain fronting), before resolving or dialing', async () => {
    const r = await rig(grant([{ host: 'allowed.test' }]));
    const res = await withHost(r.port, 'http://allowed.test/', 'evil.example');
    expect(res.status).toBe(403);
    expect(res.text).toContain('host header mismatch: the request is for allowed.test:80, its Host header names "evil.example"');
    const port = await withHost(r.port, 'http://allowed.test/', 'allowed.test:8080');
    expect(port.status).toBe(403);
    // A second Host header is a second chance to front: every one must match.
    const two = await withHost(r.port, 'http://allowed.test/', 'allowed.test', 'evil.example');
    expect(two.status).toBe(403);
    expect(r.lookups).toEqual([]);
    expect(r.dialed).toEqual([]);
    const recs = await records(r);
    expect(recs.every((x) => x.decision === 'refused' && x.reason.startsWith('host header mismatch'))).toBe(true);
  });

  it('lets a matching Host through: case, a trailing dot and the default port do not matter; upstream gets one Host', async () => {
    const r = await rig(grant([{ host: 'allowed.test' }]));
    for (const h of ['allowed.test', 'ALLOWED.test', 'allowed.test.', 'allowed.test:80']) {
      const res = await withHost(r.port, 'http://allowed.test/front', h);
      expect(res.status, h).toBe(200);
    }
    expect((await withHost(r.port, 'http://allowed.test:80/front', 'allowed.test')).status).toBe(200);
    expect(r.dialed).toHaveLength(5);
    expect(seen.filter((x) => x.url === '/front').map((x) => x.hosts)).toEqual(Array(5).fill(['allowed.test']));
  });
});

describe('egress proxy: CONNECT', () => {
  afterEach(() => {
    tcpReceived.length = 0;
  });

  it('tunnels TLS whose SNI is the CONNECT host', async () => {
    const r = await rig(grant([{ host: 'registry.test' }]));
    const t = await tunnel(r.port, 'registry.test:443');
    expect(t.status).toBe(200);
    await tlsThrough(t.socket, 'registry.test');
    await r.proxy.close();
    expect(r.dialed).toEqual([`${PUBLIC}:443`]);
    expect(tcpReceived.length).toBe(1);
    expect(tcpReceived[0][0]).toBe(22); // a TLS handshake record reached the upstream
    expect(r.logs.flatMap((l) => l.connections)[0]).toMatchObject({ host: 'registry.test', port: 443, method: 'CONNECT', decision: 'allowed' });
  });

  it('refuses a tunnel whose SNI names another host: nothing reaches the upstream', async () => {
    const r = await rig(grant([{ host: 'registry.test' }]));
    const t = await tunnel(r.port, 'registry.test:443');
    expect(t.status).toBe(200);
    await tlsThrough(t.socket, 'evil.test');
    const recs = await records(r);
    await new Promise((res) => setTimeout(res, 50));
    expect(tcpReceived.every((b) => b.length === 0)).toBe(true);
    expect(recs[0]).toMatchObject({ host: 'registry.test', decision: 'refused', bytesUp: 0 });
    expect(recs[0].reason).toContain('sni mismatch');
  });

  it('refuses a tunnel to a host name whose ClientHello has no SNI, and one that is not TLS', async () => {
    const r = await rig(grant([{ host: 'registry.test' }]));
    const t = await tunnel(r.port, 'registry.test:443');
    await tlsThrough(t.socket, '');
    const t2 = await tunnel(r.port, 'registry.test:443');
    t2.socket.write('SSH-2.0-OpenSSH_9.6\r\n');
    await once(t2.socket, 'close');
    const recs = await records(r);
    await new Promise((res) => setTimeout(res, 50));
    expect(tcpReceived.every((b) => b.length === 0)).toBe(true);
    expect(recs.map((x) => x.reason.split(':')[0]).sort()).toEqual(['no sni', 'not tls']);
  });

  it('refuses CONNECT to an unlisted host or port with 403 before any tunnel', async () => {
    const r = await rig(grant([{ host: 'registry.test' }]));
    const t = await tunnel(r.port, 'evil.test:443');
    expect(t.status).toBe(403);
    expect(t.text).toContain('evil.test:443');
    expect(t.text).toContain('network.allow');
    const p = await tunnel(r.port, 'registry.test:22');
    expect(p.status).toBe(403);
    expect(p.text).toContain('ports');
    expect(r.dialed).toEqual([]);
  });
});

describe('egress proxy: byte caps', () => {
  it('ends the download that passes maxBytesDown and refuses the job any further connection', async () => {
    const r = await rig(grant([{ host: 'registry.test' }], { maxBytesDown: 100_000 }));
    const big = await viaProxy(r.port, 'http://registry.test/big');
    expect(big.bytes).toBeLessThan(BIG);
    expect(big.aborted).toBe(true);
    expect(r.proxy.totals().down).toBeLessThanOrEqual(100_000 + 65_536 + 1000);
    const after = await viaProxy(r.port, 'http://registry.test/small');
    expect(after.status).toBe(403);
    expect(after.text).toContain('network.maxBytesDown');
    const recs = await records(r);
    expect(recs[0].reason).toContain('byte cap');
  });

  it('ends an upload that passes maxBytesUp', async () => {
    const r = await rig(grant([{ host: 'registry.test' }], { maxBytesUp: 10_000 }));
    const res = await viaProxy(r.port, 'http://registry.test/up', 'POST', 'x'.repeat(200_000)).catch(() => ({ status: 0, text: '', bytes: 0, aborted: true }));
    expect(res.status === 0 || res.aborted).toBe(true);
    expect(seen.some((s) => s.url === '/up' && s.body.length === 200_000)).toBe(false);
  });
});

describe('egress proxy: unlisted ask', () => {
  it('holds the connection until the edge allows, then covers host:port for the rest of the job', async () => {
    let r: Rig;
    r = await rig(grant([], { unlisted: 'ask' }), {
      ask: (m) => {
        setTimeout(() => r.proxy.answer({ type: 'egress.answer', jobId: 'job-1', askId: m.askId, decision: 'allow', by: 'approval ap_1' }), 50);
        return true;
      },
    });
    const first = await viaProxy(r.port, 'http://new.test/a');
    expect(first.status).toBe(200);
    expect(r.asks).toHaveLength(1);
    expect(r.asks[0]).toMatchObject({ type: 'egress.ask', jobId: 'job-1', host: 'new.test', port: 80, method: 'GET' });
    expect((await viaProxy(r.port, 'http://new.test/b')).status).toBe(200);
    expect(r.asks).toHaveLength(1);
    const recs = await records(r);
    expect(recs[0].reason).toBe('approved (approval ap_1)');
  });

  it('an approval is for the method asked: approving GET does not let a POST through, which asks anew', async () => {
    let r: Rig;
    r = await rig(grant([], { unlisted: 'ask' }), {
      ask: (m) => {
        const decision = m.method === 'GET' ? 'allow' : 'deny';
        setTimeout(() => r.proxy.answer({ type: 'egress.answer', jobId: 'job-1', askId: m.askId, decision, by: `approval for ${m.method}` }), 10);
        return true;
      },
    });
    expect((await viaProxy(r.port, 'http://asked.test/a')).status).toBe(200);
    const post = await viaProxy(r.port, 'http://asked.test/a', 'POST', 'exfiltrated');
    expect(post.status).toBe(403);
    expect(post.text).toContain('not approved (approval for POST)');
    expect(r.asks.map((a) => a.method)).toEqual(['GET', 'POST']);
    expect(seen.some((x) => x.body === 'exfiltrated')).toBe(false);
    // The GET answer still holds; a tunnel to the same host and port is its own ask (CONNECT).
    expect((await viaProxy(r.port, 'http://asked.test/b')).status).toBe(200);
    expect(r.asks).toHaveLength(2);
    expect((await tunnel(r.port, 'asked.test:80')).status).toBe(403);
    expect(r.asks).toHaveLength(3);
    expect(r.asks[2]).toMatchObject({ host: 'asked.test', port: 80 });
    expect(r.asks[2].method).toBeUndefined();
  });

  it('never asks a person about a special-purpose address: an approval could not grant it', async () => {
    const r = await rig(grant([], { unlisted: 'ask' }));
    const t = await tunnel(r.port, '[0:0:0:0:0:ffff:7f00:1]:8897');
    expect(t.status).toBe(403);
    expect(t.text).toContain('private address 127.0.0.1 (loopback 127.0.0.0/8)');
    expect(t.text).toContain('network.allow[].privateAddresses');
    expect(r.asks).toEqual([]);
  });

  it('refuses when the edge denies', async () => {
    let r: Rig;
    r = await rig(grant([], { unlisted: 'ask' }), {
      ask: (m) => {
        setTimeout(() => r.proxy.answer({ type: 'egress.answer', jobId: 'job-1', askId: m.askId, decision: 'deny', by: 'approval ap_2' }), 10);
        return true;
      },
    });
    const res = await viaProxy(r.port, 'http://new.test/');
    expect(res.status).toBe(403);
    expect(res.text).toContain('not approved (approval ap_2)');
    expect(r.dialed).toEqual([]);
  });

  it('sends an ask still waiting again, as it was, when asked to (a reconnect); its answer lets the connection through', async () => {
    const r = await rig(grant([], { unlisted: 'ask' }));
    const pending = viaProxy(r.port, 'http://later.test/x');
    await until(async () => r.asks.length === 1, 10_000, 'the ask');
    // The answer sent while the agent was away never arrived: after the reconnect the ask goes again.
    r.proxy.askAgain();
    expect(r.asks).toHaveLength(2);
    expect(r.asks[1]).toEqual(r.asks[0]);
    expect(r.proxy.answer({ type: 'egress.answer', jobId: 'job-1', askId: r.asks[1].askId, decision: 'allow', by: 'approval ap_3' })).toBe(true);
    expect((await pending).status).toBe(200);
    // Nothing waits any more: nothing is sent again.
    r.proxy.askAgain();
    expect(r.asks).toHaveLength(2);
  });

  it('refuses when no answer comes within the wait, and when the edge cannot be asked', async () => {
    const r = await rig(grant([], { unlisted: 'ask' }), { askWaitMs: 100 });
    const res = await viaProxy(r.port, 'http://slow.test/');
    expect(res.status).toBe(403);
    expect(res.text).toContain('no answer within');
    const off = await rig(grant([], { unlisted: 'ask' }), { ask: () => false });
    const t = await tunnel(off.port, 'slow.test:443');
    expect(t.status).toBe(403);
    expect(t.text).toContain('not reachable');
  });
});

describe('egress proxy: records', () => {
  it('sends records in batches of at most 50', async () => {
    const r = await rig(grant([]));
    for (let i = 0; i < 60; i++) await viaProxy(r.port, `http://h${i}.test/`);
    await r.proxy.close();
    expect(r.logs.map((l) => l.connections.length)).toEqual([50, 10]);
    expect(r.logs.every((l) => l.type === 'egress.log' && l.jobId === 'job-1')).toBe(true);
  });
});
