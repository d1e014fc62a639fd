/**
 * The egress proxy adds a team secret to HTTPS requests for exactly its bound hosts, against real TLS on
 * 127.0.0.1: an upstream with a certificate from a private CA, a test resolver answering a public-looking
 * address and a test dialer sending every connection to that upstream. The job's side is a real TLS client
 * through CONNECT, as curl or npm would be.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { createServer as createHttpsServer, type Server } from 'node:https';
import { mkdtempSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecureContext, connect as tlsConnect } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentCa } from '../../../executor/egress/agent-ca.ts';
import { EgressProxy } from '../../../executor/egress/proxy.ts';
import type { CredentialBinding, EgressLog, NetworkGrant } from '../../../src/contracts/network.ts';

const PUBLIC = '93.184.216.34';
/** A response larger than any socket buffer (a git pack, a tarball). */
const BIG = randomBytes(6 << 20);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** A download bigger than every buffer between the upstream and a job that does not read (kernel, TLS, streams). */
const FLOOD_CHUNK = Buffer.alloc(1 << 20, 7);
const FLOOD = 96 * FLOOD_CHUNK.length;
const flood: { sent: number; ended?: Promise<'finished' | 'cut'> } = { sent: 0 };
const SECRET = 'ghp_TOPSECRET_value_1234';
const dir = mkdtempSync(join(tmpdir(), 'gh-cred-'));
/** The upstreams' private CA (the agent host trusts it) and the agent's own CA (the job trusts it). */
const upstreamCa = new AgentCa(join(dir, 'upstream-ca.pem'));
const agentCa = new AgentCa(join(dir, 'agent-ca.pem'));

let upstream: Server;
let upstreamPort = 0;
const seen: { host: string; url: string; authorization: string | undefined; remotePort: number }[] = [];

beforeAll(async () => {
  await upstreamCa.ready();
  await agentCa.ready();
  // One upstream serves both names (SNI picks the certificate), like a CDN.
  const git = upstreamCa.leaf('git.example.com');
  const other = upstreamCa.leaf('other.example.com');
  upstream = createHttpsServer({
    key: git.key,
    cert: git.cert,
    SNICallback: (name, cb) => {
      const l = name === 'other.example.com' ? other : git;
      cb(null, createSecureContext({ key: l.key, cert: l.cert }));
    },
  });
  upstream.on('request', (req, res) => {
    seen.push({ host: req.headers.host ?? '', url: req.url ?? '', authorization: req.headers.authorization, remotePort: req.socket.remotePort ?? 0 });
    if (req.url === '/redirect') res.writeHead(302, { location: 'https://other.example.com/landed' }).end();
    else if (req.url === '/echo') {
      // What arrived of the body, and how it was framed.
      const hash = createHash('sha256');
      let n = 0;
      req.on('data', (d: Buffer) => {
        hash.update(d);
        n += d.length;
      });
      req.on('end', () => res.writeHead(200).end(`${n} ${hash.digest('hex')} te=${req.headers['transfer-encoding']} cl=${req.headers['content-length']}`));
    } else if (req.url === '/big') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(BIG);
    else if (req.url === '/flood') {
      // FLOOD bytes, written as fast as the reader takes them (waiting for 'drain' like any well-behaved server).
      flood.sent = 0;
      flood.ended = new Promise((r) => res.once('close', () => r(res.writableFinished ? 'finished' : 'cut')));
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(FLOOD) });
      const more = () => {
        while (flood.sent < FLOOD) {
          flood.sent += FLOOD_CHUNK.length;
          if (!res.write(FLOOD_CHUNK)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    } else res.writeHead(200, { 'content-type': 'text/plain' }).end(`ok ${req.url}`);
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  upstreamPort = (upstream.address() as { port: number }).port;
});
afterAll(async () => {
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});

const proxies: EgressProxy[] = [];
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
  seen.length = 0;
});

const binding: CredentialBinding = { secret: 'GIT_TOKEN', hosts: ['git.example.com'], header: 'Authorization', scheme: 'Bearer' };
const grant: NetworkGrant = {
  mode: 'allowlist',
  allow: [{ host: 'git.example.com' }, { host: 'other.example.com' }],
  unlisted: 'deny',
  maxBytesUp: 1 << 20,
  maxBytesDown: 1 << 20,
  source: 'network',
  credentials: [binding],
};

async function proxy(o: { trustUpstream?: boolean; grant?: Partial<NetworkGrant> } = {}) {
  const logs: EgressLog[] = [];
  const p = new EgressProxy({
    jobId: 'job-1',
    grant: { ...grant, ...o.grant },
    edge: { ask: () => false, log: (m) => logs.push(m) },
    resolve: async () => [PUBLIC],
    dial: (_address, _port) => connect({ host: '127.0.0.1', port: upstreamPort }),
    credentials: { held: [{ binding, value: SECRET }], ca: agentCa, upstreamCas: o.trustUpstream === false ? [] : [upstreamCa.certPem()] },
  });
  proxies.push(p);
  return { port: await p.listen({ port: 0 }), logs, p };
}

/** CONNECT through the proxy, then TLS to `host` trusting only `ca` (what the job's bundle holds). */
async function tunnel(proxyPort: number, host: string, ca: string): Promise<Socket> {
  const req = httpRequest({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: `${host}:443` });
  req.end();
  const [res, socket] = (await once(req, 'connect')) as [{ statusCode: number }, Socket];
  expect(res.statusCode).toBe(200);
  const tls = tlsConnect({ socket, servername: host, ca });
  await once(tls, 'secureConnect');
  return tls;
}

async function get(
  tls: Socket,
  host: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const req = httpRequest({ host, path, headers: { host, ...headers }, createConnection: () => tls });
  req.end();
  const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
  let body = '';
  for await (const c of res) body += c;
  return { status: res.statusCode ?? 0, body, headers: res.headers };
}

describe('credentials added by the egress proxy', () => {
  it('adds the bound header to requests for the bound host, over TLS the job verifies with the agent CA', async () => {
    const { port, p, logs } = await proxy();
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const r = await get(tls, 'git.example.com', '/repo.git/info/refs');
    expect(r).toMatchObject({ status: 200, body: 'ok /repo.git/info/refs' });
    expect(seen).toEqual([expect.objectContaining({ host: 'git.example.com', authorization: `Bearer ${SECRET}` })]);
    tls.destroy();
    await p.close();
    const rec = logs.flatMap((l) => l.connections);
    expect(rec).toEqual([expect.objectContaining({ host: 'git.example.com', decision: 'allowed', credential: 'GIT_TOKEN' })]);
    expect(JSON.stringify(logs)).not.toContain(SECRET);
  });

  it("replaces the job's own value of the bound header: it can neither override nor read it back", async () => {
    const { port } = await proxy();
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const r = await get(tls, 'git.example.com', '/x', { Authorization: 'Bearer mine', authorization: 'Basic also-mine' } as Record<string, string>);
    expect(r.status).toBe(200);
    expect(seen.map((s) => s.authorization)).toEqual([`Bearer ${SECRET}`]);
    expect(JSON.stringify(r)).not.toContain(SECRET);
    tls.destroy();
  });

  it('keeps another host a plain tunnel: the job talks TLS to the upstream itself and no credential is added', async () => {
    const { port } = await proxy();
    // The job reaches other.example.com's own certificate (trusting the upstream CA), not one of the agent CA.
    const tls = await tunnel(port, 'other.example.com', upstreamCa.certPem());
    const r = await get(tls, 'other.example.com', '/x', { Authorization: 'Bearer own' });
    expect(r.status).toBe(200);
    expect(seen).toEqual([expect.objectContaining({ host: 'other.example.com', authorization: 'Bearer own' })]);
    tls.destroy();
    await expect(tunnel(port, 'other.example.com', agentCa.certPem())).rejects.toThrow();
  });

  it('does not carry the credential along a redirect to another host', async () => {
    const { port } = await proxy();
    const a = await tunnel(port, 'git.example.com', agentCa.certPem());
    const r = await get(a, 'git.example.com', '/redirect');
    expect(r.status).toBe(302);
    const b = await tunnel(port, 'other.example.com', upstreamCa.certPem());
    await get(b, 'other.example.com', '/landed');
    expect(seen.map((s) => [s.host, s.authorization])).toEqual([
      ['git.example.com', `Bearer ${SECRET}`],
      ['other.example.com', undefined],
    ]);
    a.destroy();
    b.destroy();
  });

  it("holds the entry's methods inside the tunnel: a GET-only registry token cannot be used to POST or PUT (publish)", async () => {
    const { port, p, logs } = await proxy({ grant: { allow: [{ host: 'git.example.com', methods: ['GET', 'HEAD'] }, { host: 'other.example.com' }] } });
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    expect(await get(tls, 'git.example.com', '/pkg', { connection: 'keep-alive' })).toMatchObject({ status: 200, body: 'ok /pkg' });
    const req = httpRequest({
      host: 'git.example.com',
      path: '/pkg',
      method: 'PUT',
      headers: { host: 'git.example.com', 'content-type': 'application/json', connection: 'keep-alive' },
      createConnection: () => tls,
    });
    req.end('{"name":"pkg","versions":{}}');
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    let body = '';
    for await (const c of res) body += c;
    expect(res.statusCode).toBe(403);
    expect(res.statusMessage).toContain('network.allow[0].methods');
    expect(body).toContain('method PUT is not in network.allow[0].methods (GET, HEAD)');
    // Only the GET reached the upstream (with the credential); the PUT never left the proxy.
    expect(seen.map((x) => [x.url, x.authorization])).toEqual([['/pkg', `Bearer ${SECRET}`]]);
    tls.destroy();
    await p.close();
    const rec = logs.flatMap((l) => l.connections);
    expect(rec).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          host: 'git.example.com',
          method: 'PUT',
          decision: 'refused',
          reason: 'method PUT is not in network.allow[0].methods (GET, HEAD)',
        }),
        expect.objectContaining({ host: 'git.example.com', decision: 'allowed', credential: 'GIT_TOKEN' }),
      ]),
    );
  });

  it('leaves every method to a credential host whose entry lists none (and to one allowed twice, once without methods)', async () => {
    const { port } = await proxy({ grant: { allow: [{ host: 'git.example.com', methods: ['GET'] }, { host: 'git.example.com' }] } });
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const req = httpRequest({ host: 'git.example.com', path: '/echo', method: 'POST', headers: { host: 'git.example.com' }, createConnection: () => tls });
    req.end('abc');
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    expect(res.statusCode).toBe(200);
    expect(seen.map((x) => x.authorization)).toEqual([`Bearer ${SECRET}`]);
    tls.destroy();
  });

  it('refuses a request inside the tunnel that names another host, sending nothing upstream', async () => {
    const { port } = await proxy();
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const r = await get(tls, 'other.example.com', '/steal');
    expect(r.status).toBe(421);
    expect(r.body).toContain('for git.example.com only');
    expect(seen).toEqual([]);
    tls.destroy();
  });

  it('verifies the upstream: one whose certificate the agent does not trust gets no request and no credential', async () => {
    const { port } = await proxy({ trustUpstream: false });
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const r = await get(tls, 'git.example.com', '/x');
    expect(r.status).toBe(502);
    expect(r.body).not.toContain(SECRET);
    expect(seen).toEqual([]);
    tls.destroy();
  });

  it('keeps the upstream connection alive across requests of one tunnel', async () => {
    const { port } = await proxy();
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const agentReq = async (path: string) => get(tls, 'git.example.com', path, { connection: 'keep-alive' });
    await agentReq('/1');
    await agentReq('/2');
    expect(seen.map((s) => s.authorization)).toEqual([`Bearer ${SECRET}`, `Bearer ${SECRET}`]);
    expect(new Set(seen.map((s) => s.remotePort)).size).toBe(1);
    tls.destroy();
  });

  it('streams a chunked request body (a large git POST) upstream byte for byte, with the credential', async () => {
    const { port } = await proxy();
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const parts = [randomBytes(100_000), randomBytes(1), randomBytes(300_000)];
    const req = httpRequest({
      host: 'git.example.com',
      path: '/echo',
      method: 'POST',
      headers: { host: 'git.example.com', 'content-type': 'application/x-git-upload-pack-request', 'transfer-encoding': 'chunked' },
      createConnection: () => tls,
    });
    for (const b of parts) {
      req.write(b);
      await new Promise((r) => setTimeout(r, 20));
    }
    req.end();
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    let body = '';
    for await (const c of res) body += c;
    const all = Buffer.concat(parts);
    expect(body).toBe(`${all.length} ${sha256(all)} te=chunked cl=undefined`);
    expect(seen.map((x) => x.authorization)).toEqual([`Bearer ${SECRET}`]);
    tls.destroy();
  });

  it('answers Expect: 100-continue, then forwards the body it was waiting for', async () => {
    const { port } = await proxy();
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const body = randomBytes(70_000);
    const req = httpRequest({
      host: 'git.example.com',
      path: '/echo',
      method: 'POST',
      headers: { host: 'git.example.com', expect: '100-continue', 'content-length': String(body.length) },
      createConnection: () => tls,
    });
    // As curl does: the body only after the 100 (a proxy that never sends one stalls the client).
    const continued = once(req, 'continue');
    req.flushHeaders();
    await continued;
    req.end(body);
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    let text = '';
    for await (const c of res) text += c;
    expect([res.statusCode, text]).toEqual([200, `${body.length} ${sha256(body)} te=undefined cl=${body.length}`]);
    expect(seen.map((x) => x.authorization)).toEqual([`Bearer ${SECRET}`]);
    tls.destroy();
  });

  it('streams a large response back to the job intact', async () => {
    const { port } = await proxy({ grant: { maxBytesDown: 64 << 20 } });
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const req = httpRequest({ host: 'git.example.com', path: '/big', headers: { host: 'git.example.com' }, createConnection: () => tls });
    req.end();
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    const chunks: Buffer[] = [];
    // A slow reader: the proxy must hold back, not drop or reorder.
    for await (const c of res) {
      chunks.push(c as Buffer);
      if (chunks.length % 50 === 0) await new Promise((r) => setTimeout(r, 5));
    }
    const got = Buffer.concat(chunks);
    expect([got.length, sha256(got)]).toEqual([BIG.length, sha256(BIG)]);
    tls.destroy();
  });

  it("holds the upstream back while the job does not read: a download is never buffered whole in the agent's memory", async () => {
    const { port } = await proxy({ grant: { maxBytesDown: 2 * FLOOD } });
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const req = httpRequest({ host: 'git.example.com', path: '/flood', headers: { host: 'git.example.com' }, createConnection: () => tls });
    req.end();
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    res.pause();
    // The job reads nothing: the upstream stops once the buffers on the way are full (or, held by nothing, sends it all).
    let last = -1;
    for (let i = 0; i < 200 && flood.sent !== last && flood.sent < FLOOD; i++) {
      last = flood.sent;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(flood.sent).toBeLessThan(FLOOD / 2);
    // And the job, reading now, gets every byte.
    let n = 0;
    res.on('data', (d: Buffer) => (n += d.length));
    res.resume();
    await once(res, 'end');
    expect(n).toBe(FLOOD);
    tls.destroy();
  });

  it('stops the download from the upstream when the job goes away in the middle of it (held back or not, the tunnel closes it)', async () => {
    const { port } = await proxy({ grant: { maxBytesDown: 2 * FLOOD } });
    const tls = await tunnel(port, 'git.example.com', agentCa.certPem());
    const req = httpRequest({ host: 'git.example.com', path: '/flood', headers: { host: 'git.example.com' }, createConnection: () => tls });
    req.on('error', () => {});
    req.end();
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    await once(res, 'data');
    tls.destroy();
    expect(await flood.ended).toBe('cut');
    expect(flood.sent).toBeLessThan(FLOOD);
  });
});
