/**
 * The egress proxy adds a team secret to HTTPS requests for exactly its bound hosts, against real TLS on
 * 127.0.0.1: an upstream with a certificate from a private CA, a test resolver answering a public-looking
 * address and a test dialer sending every connection to that upstream. The job's side is a real TLS client
 * through CONNECT, as curl or npm would be.
 */
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
    else res.writeHead(200, { 'content-type': 'text/plain' }).end(`ok ${req.url}`);
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

async function proxy(o: { trustUpstream?: boolean } = {}) {
  const logs: EgressLog[] = [];
  const p = new EgressProxy({
    jobId: 'job-1',
    grant,
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
});
