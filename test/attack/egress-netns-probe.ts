/**
 * Forbidden addresses in every spelling against the real egress proxy, run inside a network
 * namespace that has only a loopback (test/attack/egress-addresses.test.ts starts this file under
 * `unshare -n`): a wrongly allowed dial lands on the counting listener or fails, it never leaves
 * the machine. The namespace's loopback also carries the metadata, private and ULA addresses
 * below, so a dial to them is accepted and counted rather than unreachable.
 *
 * Run as a program (`node test/attack/egress-netns-probe.ts`), it starts the proxy as the agent
 * does (its own resolver and dialer, a Unix socket, no test hosts), sends each corpus entry as a
 * CONNECT and as a plain HTTP absolute-form request, then one allowed control connection, and
 * prints one JSON line: what each attempt got and how many connections the listener accepted.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EgressProxy } from '../../executor/egress/proxy.ts';
import type { EgressConnection, NetworkGrant } from '../../src/contracts/network.ts';

/** One spelling of a forbidden host, as a CONNECT authority / URL host writes it, and the range it must be judged in. */
export interface ForbiddenHost {
  host: string;
  range: string;
  /** A name, resolved by the proxy (its range is its resolved address's). */
  name?: true;
}

/** Addresses the probe's namespace puts on its loopback, so that a wrong dial to them connects. */
export const LOOPBACK_EXTRA = ['169.254.169.254/32', '10.0.0.1/32', '172.16.0.1/32', '192.168.0.1/32', '100.64.0.1/32', '192.0.2.1/32', '198.18.0.1/32'];
export const LOOPBACK_EXTRA6 = ['fd00::1/128', 'fd00:ec2::254/128'];

export const FORBIDDEN: readonly ForbiddenHost[] = [
  // IPv4 loopback in inet_aton's spellings
  { host: '127.0.0.1', range: '127.0.0.0/8' },
  { host: '127.0.0.2', range: '127.0.0.0/8' },
  { host: '127.255.255.254', range: '127.0.0.0/8' },
  { host: '127.1', range: '127.0.0.0/8' },
  { host: '127.0.1', range: '127.0.0.0/8' },
  { host: '2130706433', range: '127.0.0.0/8' },
  { host: '0x7f000001', range: '127.0.0.0/8' },
  { host: '0X7F000001', range: '127.0.0.0/8' },
  { host: '0177.0.0.1', range: '127.0.0.0/8' },
  { host: '0177.0000.0000.0001', range: '127.0.0.0/8' },
  { host: '0x7f.0.0.1', range: '127.0.0.0/8' },
  { host: '0x7f.1', range: '127.0.0.0/8' },
  { host: '017700000001', range: '127.0.0.0/8' },
  { host: '127.0.0.1.', range: '127.0.0.0/8' },
  // unspecified (connecting to it reaches the host itself)
  { host: '0', range: '0.0.0.0/32' },
  { host: '0.0.0.0', range: '0.0.0.0/32' },
  { host: '0x0', range: '0.0.0.0/32' },
  { host: '0.0', range: '0.0.0.0/32' },
  { host: '[::]', range: '::/128' },
  { host: '[0:0:0:0:0:0:0:0]', range: '::/128' },
  // IPv6 loopback
  { host: '[::1]', range: '::1/128' },
  { host: '[0:0:0:0:0:0:0:1]', range: '::1/128' },
  { host: '[0000:0000:0000:0000:0000:0000:0000:0001]', range: '::1/128' },
  // IPv4-mapped IPv6, short, long, mixed case, zero-padded, dotted
  { host: '[::ffff:127.0.0.1]', range: '127.0.0.0/8' },
  { host: '[::ffff:7f00:1]', range: '127.0.0.0/8' },
  { host: '[0:0:0:0:0:ffff:7f00:1]', range: '127.0.0.0/8' },
  { host: '[0:0:0:0:0:FFFF:7F00:0001]', range: '127.0.0.0/8' },
  { host: '[0000:0000:0000:0000:0000:ffff:7f00:0001]', range: '127.0.0.0/8' },
  { host: '[::FFFF:127.0.0.1]', range: '127.0.0.0/8' },
  { host: '[0:0::ffff:127.0.0.2]', range: '127.0.0.0/8' },
  { host: '[::ffff:a9fe:a9fe]', range: '169.254.0.0/16' },
  { host: '[0:0:0:0:0:ffff:a9fe:a9fe]', range: '169.254.0.0/16' },
  { host: '[::ffff:169.254.169.254]', range: '169.254.0.0/16' },
  { host: '[::ffff:a00:1]', range: '10.0.0.0/8' },
  { host: '[::ffff:0.0.0.0]', range: '0.0.0.0/32' },
  // IPv4-compatible (deprecated), SIIT
  { host: '[::127.0.0.1]', range: '127.0.0.0/8' },
  { host: '[::7f00:1]', range: '127.0.0.0/8' },
  { host: '[0:0:0:0:0:0:7f00:1]', range: '127.0.0.0/8' },
  { host: '[::a9fe:a9fe]', range: '169.254.0.0/16' },
  { host: '[::ffff:0:7f00:1]', range: '::ffff:0:0:0/96' },
  // NAT64, 6to4, Teredo carrying a forbidden IPv4
  { host: '[64:ff9b::7f00:1]', range: '127.0.0.0/8' },
  { host: '[64:ff9b::127.0.0.1]', range: '127.0.0.0/8' },
  { host: '[64:ff9b::a9fe:a9fe]', range: '169.254.0.0/16' },
  { host: '[64:FF9B:0:0:0:0:a00:1]', range: '10.0.0.0/8' },
  { host: '[64:ff9b:1::7f00:1]', range: '64:ff9b:1::/48' },
  { host: '[2002:7f00:1::]', range: '127.0.0.0/8' },
  { host: '[2002:a9fe:a9fe::1]', range: '169.254.0.0/16' },
  { host: '[2002:c0a8:1::1]', range: '192.168.0.0/16' },
  { host: '[2001:0:7f00:1::1]', range: '127.0.0.0/8' },
  { host: '[2001:0:5db8:d822:0:0:80ff:fffe]', range: '127.0.0.0/8' },
  // cloud metadata
  { host: '169.254.169.254', range: '169.254.0.0/16' },
  { host: '0xa9fea9fe', range: '169.254.0.0/16' },
  { host: '2852039166', range: '169.254.0.0/16' },
  { host: '0251.0376.0251.0376', range: '169.254.0.0/16' },
  { host: '169.254.43518', range: '169.254.0.0/16' },
  { host: '[fd00:ec2::254]', range: 'fc00::/7' },
  // private, CGNAT, ULA, link-local, site-local
  { host: '10.0.0.1', range: '10.0.0.0/8' },
  { host: '10.1', range: '10.0.0.0/8' },
  { host: '167772161', range: '10.0.0.0/8' },
  { host: '172.16.0.1', range: '172.16.0.0/12' },
  { host: '172.31.255.255', range: '172.16.0.0/12' },
  { host: '192.168.0.1', range: '192.168.0.0/16' },
  { host: '0xc0a80001', range: '192.168.0.0/16' },
  { host: '100.64.0.1', range: '100.64.0.0/10' },
  { host: '[fd00::1]', range: 'fc00::/7' },
  { host: '[FC00::1]', range: 'fc00::/7' },
  { host: '[fe80::1]', range: 'fe80::/10' },
  { host: '[fe80::1%lo]', range: 'fe80::/10' },
  { host: '[fec0::1]', range: 'fec0::/10' },
  // multicast, broadcast, reserved, documentation, benchmarking, IETF, discard
  { host: '224.0.0.1', range: '224.0.0.0/4' },
  { host: '255.255.255.255', range: '255.255.255.255/32' },
  { host: '240.0.0.1', range: '240.0.0.0/4' },
  { host: '[ff02::1]', range: 'ff00::/8' },
  { host: '192.0.2.1', range: '192.0.2.0/24' },
  { host: '198.18.0.1', range: '198.18.0.0/15' },
  { host: '192.0.0.8', range: '192.0.0.0/24' },
  { host: '[2001:db8::1]', range: '2001:db8::/32' },
  { host: '[100::1]', range: '100::/64' },
  // names the resolver answers with loopback
  { host: 'localhost', range: '127.0.0.0/8', name: true },
  { host: 'LocalHost.', range: '127.0.0.0/8', name: true },
];

/** The address the control connection may reach (an allowlist entry with privateAddresses). */
export const CONTROL = '127.0.0.99';

export interface ProbeResult {
  attempts: { host: string; via: 'CONNECT' | 'HTTP'; grant: string; status: number; body: string }[];
  /** Connections the listener accepted while the corpus ran. */
  accepted: number;
  control: { status: number; accepted: number };
  records: EgressConnection[];
}

async function probe(): Promise<ProbeResult> {
  let accepted = 0;
  const listeners: Server[] = [];
  // Port 80 besides a free one (the metadata service's); `::` without ipv6Only takes IPv4 too, on every loopback address.
  for (const p of [0, 80]) {
    const s = createServer((c) => {
      accepted++;
      c.destroy();
    });
    s.listen(p, '::');
    await once(s, 'listening');
    listeners.push(s);
  }
  const port = (listeners[0].address() as { port: number }).port;

  const dir = mkdtempSync(join(tmpdir(), 'gh-egress-netns-'));
  const records: EgressConnection[] = [];
  const edge = { ask: () => false, log: (m: { connections: EgressConnection[] }) => records.push(...m.connections) };
  const base = { unlisted: 'deny' as const, maxBytesUp: 1 << 20, maxBytesDown: 1 << 20 };
  const grants: [string, NetworkGrant][] = [
    ['open', { ...base, mode: 'open', allow: [{ host: CONTROL, ports: [port], privateAddresses: true }], source: 'network' }],
    ['listed', { ...base, mode: 'allowlist', allow: FORBIDDEN.map((f) => ({ host: bare(f.host), ports: [port, 80] })), source: 'network' }],
  ];
  const attempts: ProbeResult['attempts'] = [];
  const proxies: EgressProxy[] = [];
  for (const [label, grant] of grants) {
    // As the agent's job runner starts it: no test hosts, the system resolver, a real dial.
    const proxy = new EgressProxy({ jobId: `netns-${label}`, grant, edge, testHosts: null, helloWaitMs: 2000 });
    proxies.push(proxy);
    const path = join(dir, `${label}.sock`);
    await proxy.listen(path);
    const targets = [...FORBIDDEN.map((f) => `${f.host}:${port}`), '[0:0:0:0:0:ffff:a9fe:a9fe]:80', '[::ffff:7f00:1]:80'];
    for (const authority of targets) {
      const c = await exchange(path, `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
      attempts.push({ host: authority, via: 'CONNECT', grant: label, ...c });
      const h = await exchange(path, `GET http://${authority}/meta-data HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`);
      attempts.push({ host: authority, via: 'HTTP', grant: label, ...h });
    }
  }
  const before = accepted;
  const control = await exchange(join(dir, 'open.sock'), `GET http://${CONTROL}:${port}/ HTTP/1.1\r\nHost: ${CONTROL}:${port}\r\nConnection: close\r\n\r\n`);
  const result: ProbeResult = { attempts, accepted: before, control: { status: control.status, accepted: accepted - before }, records };
  for (const p of proxies) await p.close();
  for (const s of listeners) s.close();
  rmSync(dir, { recursive: true, force: true });
  return result;
}

/** A host as an allowlist entry writes it (brackets and zone off: the schema's pattern has none). */
function bare(host: string): string {
  return host.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
}

/** Sends one request on a new connection to the proxy; the status code and body of its answer (a 200 tunnel is closed at once). */
function exchange(path: string, request: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const s = connect({ path });
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      const text = buf.toString('latin1');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
      const at = text.indexOf('\r\n\r\n');
      resolve({ status, body: at < 0 ? '' : text.slice(at + 4, at + 4 + 2000) });
    };
    const timer = setTimeout(finish, 15_000);
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      // A tunnel that opened is a failure already: no need to wait for the proxy's ClientHello timeout.
      if (/^HTTP\/1\.[01] 200/.test(buf.toString('latin1')) && buf.includes('\r\n\r\n') && request.startsWith('CONNECT')) finish();
    });
    s.on('error', finish);
    s.on('close', finish);
    s.write(request);
  });
}

if (import.meta.main) {
  probe().then(
    (r) => {
      // Exit only once the pipe took it all: stdout to a pipe is asynchronous.
      process.stdout.write(`${JSON.stringify(r)}\n`, () => process.exit(0));
    },
    (e: Error) => {
      process.stderr.write(`probe failed: ${e.stack ?? e.message}\n`);
      process.exit(1);
    },
  );
}
