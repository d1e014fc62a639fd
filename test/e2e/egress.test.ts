/**
 * The headline of governed egress, end to end: `npm ci` of a small project, run through the real
 * gateway (`wrangler dev`) on a real agent in gVisor, installs its dependency from a registry
 * stand-in on 127.0.0.1 — reached only through the agent's egress proxy, allowed by a rule's
 * `network` with the `package-registries` preset — and the job's connections are listed in
 * job_status. The same job with the rule's network `off` fails, and its result names the policy key.
 *
 * Nothing leaves 127.0.0.1: the agent runs in its documented test mode (docs/network.md, "Test
 * mode"), which sends connections for the preset's npm host to the stand-in. Needs runsc (skipped
 * outside CI when it is missing).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, requireParts, startEgressTestAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { call } from './fleet.ts';
import { until } from '../support/until.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { NETWORK_PRESETS } from '../../src/policy/network-presets.ts';

type S = Record<string, any>;

const RUNSC = requireParts({ runsc: hasCommand('runsc') });
if (!RUNSC) console.warn('egress.test.ts: skipped — runsc is not installed (allowed outside CI only)');
const maybe = RUNSC ? describe : describe.skip;

const TEAM = 'egress-npm';
/** Generous: npm in a fresh gVisor sandbox on a loaded machine; never a timing assertion. */
const JOB_MS = 240_000;
/** No audit or funding calls; a failed fetch fails soon instead of retrying for minutes. */
/**
 * The registry this machine's npm is configured with (`npm config get registry`), spoken to in plain HTTP so method rules
 * apply: the stand-in answers for its host. The `package-registries` preset must list that host (checked below).
 */
const REGISTRY = new URL(execFileSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' }).trim());
REGISTRY.protocol = 'http:';
const NPM_HOST = REGISTRY.host;
const NPM_CI = `npm ci --no-audit --no-fund --fetch-retries=0 --fetch-timeout=10000 --registry=${REGISTRY.href}`;

const policy = (network: unknown) => ({
  ...DEFAULT_POLICY,
  executables: { allow: [...DEFAULT_POLICY.executables.allow, 'npm'] },
  sandbox: { minimum: 'gvisor' },
  limits: { ...DEFAULT_POLICY.limits, defaultTimeoutMs: 120_000, maxTimeoutMs: 120_000 },
  rules: [{ pattern: ['npm', 'ci'], decision: 'allow', network }],
});

/** A registry that holds one package, `tiny-dep@1.0.0`, on 127.0.0.1; it records every request. */
async function registryStandIn(dir: string): Promise<{ port: number; integrity: string; requests: string[]; server: Server }> {
  const pkg = join(dir, 'package');
  mkdirSync(pkg, { recursive: true });
  writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'tiny-dep', version: '1.0.0', main: 'index.js' }));
  writeFileSync(join(pkg, 'index.js'), "module.exports = 'tiny-dep works';\n");
  execFileSync('tar', ['-czf', 'tiny-dep-1.0.0.tgz', 'package'], { cwd: dir });
  const tgz = readFileSync(join(dir, 'tiny-dep-1.0.0.tgz'));
  const integrity = `sha512-${createHash('sha512').update(tgz).digest('base64')}`;
  const tarball = `http://${NPM_HOST}/tiny-dep/-/tiny-dep-1.0.0.tgz`;
  const packument = {
    name: 'tiny-dep',
    'dist-tags': { latest: '1.0.0' },
    versions: { '1.0.0': { name: 'tiny-dep', version: '1.0.0', dist: { tarball, integrity, shasum: createHash('sha1').update(tgz).digest('hex') } } },
  };
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const path = (req.url ?? '').replace(/^https?:\/\/[^/]+/, '');
    if (path === '/tiny-dep') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(packument));
    else if (path === '/tiny-dep/-/tiny-dep-1.0.0.tgz') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(tgz);
    else res.writeHead(404).end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, integrity, requests, server };
}

/** The small project in the agent's workspace: one dependency, locked to the registry's tarball. */
function writeProject(root: string, integrity: string): void {
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', dependencies: { 'tiny-dep': '1.0.0' } }, null, 2));
  writeFileSync(
    join(root, 'package-lock.json'),
    JSON.stringify(
      {
        name: 'app',
        version: '1.0.0',
        lockfileVersion: 3,
        requires: true,
        packages: {
          '': { name: 'app', version: '1.0.0', dependencies: { 'tiny-dep': '1.0.0' } },
          'node_modules/tiny-dep': { version: '1.0.0', resolved: `http://${NPM_HOST}/tiny-dep/-/tiny-dep-1.0.0.tgz`, integrity },
        },
      },
      null,
      2,
    ),
  );
  // The job runs as an unprivileged user in the sandbox: it writes node_modules here.
  chmodSync(root, 0o777);
}

let gw: Gateway;
let client: Client;
let agent: AgentProcess;
let registry: Awaited<ReturnType<typeof registryStandIn>>;
let root: string;
let work: string;

maybe('governed egress: npm ci through gVisor and the egress proxy', () => {
  beforeAll(async () => {
    const presetHosts = NETWORK_PRESETS['package-registries'].groups.flatMap((g) => g.hosts);
    expect(presetHosts, "the preset lists this machine's npm registry").toContain(REGISTRY.hostname);
    work = mkdtempSync(join(tmpdir(), 'gatehouse-egress-reg-'));
    registry = await registryStandIn(work);
    root = mkdtempSync(join(tmpdir(), 'gatehouse-egress-ws-'));
    writeProject(root, registry.integrity);
    gw = await startGateway();
    await gw.putPolicy(TEAM, policy({ mode: 'allowlist', presets: ['package-registries'] }));
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    agent = await startEgressTestAgent(gw, TEAM, { root, capacity: 1, agentId: 'egress-gvisor', testHosts: { [NPM_HOST]: registry.port } });
    await agent.ready;
  }, 300_000);

  afterAll(async () => {
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    await new Promise((r) => registry?.server.close(r));
    for (const d of [root, work]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it(
    "installs from the registry stand-in with network.mode allowlist and the preset; job_status lists the job's connections",
    async () => {
      const r = await call(client, 'execute', { command: NPM_CI, timeout_ms: 120_000 }, JOB_MS);
      const s = r.s as S;
      expect(s.exit_code, `${r.t}\n--- agent log:\n${agent.logs()}`).toBe(0);
      expect(s.sandbox).toBe('gvisor');
      expect(registry.requests).toContain('GET /tiny-dep/-/tiny-dep-1.0.0.tgz');
      const installed = await call(client, 'execute', { command: 'cat', args: ['node_modules/tiny-dep/index.js'] });
      expect((installed.s as S).stdout).toContain('tiny-dep works');
      const status = await until(
        async () => {
          const v = (await call(client, 'job_status', { job_id: s.job_id })).s as S;
          return v.network?.connections?.length ? v : null;
        },
        60_000,
        "the job's connections in job_status",
      );
      expect(status.network).toMatchObject({ mode: 'allowlist', source: 'rules[0].network', refused: 0 });
      const tarball = (status.network.connections as S[]).find((c) => c.host === NPM_HOST && c.method === 'GET');
      expect(tarball, JSON.stringify(status.network.connections)).toMatchObject({ port: 80, decision: 'allowed' });
      expect(tarball?.bytes_down).toBeGreaterThan(0);
    },
    JOB_MS,
  );

  it(
    'the same job with network off fails, and its result names the policy key',
    async () => {
      rmSync(join(root, 'node_modules'), { recursive: true, force: true });
      await gw.putPolicy(TEAM, policy({ mode: 'off' }));
      const before = registry.requests.length;
      // Bounded by the job's own timeout should npm wait on a connection that never comes: a timeout fails the job too.
      const r = await call(client, 'execute', { command: NPM_CI, timeout_ms: 60_000 }, JOB_MS);
      expect((r.s as S).exit_code, `${r.t}\n--- agent log:\n${agent.logs()}`).not.toBe(0);
      expect(r.t).toContain('the job had no network: rules[0].network.mode is "off" in the team policy');
      expect(registry.requests.length).toBe(before);
    },
    JOB_MS,
  );
});
