/**
 * A real build in a job, end to end: `npm ci` of a small project (test/e2e/fixtures/builds/app:
 * package.json and its committed package-lock.json) under the `builds` preset, through the real
 * gateway (`wrangler dev`) and a real agent in gVisor, installs two packages from an HTTPS
 * registry on 127.0.0.1 whose certificate a private CA made for this test signed. The agent is
 * given that CA with `--extra-ca`, as a company gives its agents an inspecting proxy's or an
 * internal registry's CA; npm trusts it because the job's env names the agent's bundle. Two
 * builds run at once, each in its own directory. The results say why: a refused connection names
 * the policy key that would allow it (in `notices` and in npm's own error), a clamped timeout says
 * so, and a build with the network off says which key turns it on.
 *
 * Nothing leaves 127.0.0.1: the agent runs in its documented test mode (docs/network.md, "Test
 * mode"), which sends the preset's npm host to the local registry. Needs runsc and openssl
 * (skipped outside CI when missing).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, requireParts, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { call } from './fleet.ts';
import { PRESETS } from '../../src/policy/presets.ts';
import { presetHosts } from '../../src/policy/network-presets.ts';
import { TRUST_ENV_NAMES } from '../../executor/sandbox/trusted-cas.ts';
import { makePrivateCa, openSslAvailable, type PrivateCa } from '../support/private-ca.ts';
import type { PrivateHttps } from '../support/private-https.ts';
import { NPM_CI, startTarballRegistry } from '../support/tarball-registry.ts';
import { prepareWorkspace } from '../support/e2e-jobs.ts';

type S = Record<string, any>;

const READY = requireParts({ runsc: hasCommand('runsc'), openssl: openSslAvailable() });
if (!READY) console.warn('builds.test.ts: skipped — runsc or openssl is not installed (allowed outside CI only)');
const maybe = READY ? describe : describe.skip;

const TEAM = 'builds';
const FIXTURE = join(import.meta.dirname, 'fixtures/builds');
/** The public host the lockfile names; the agent's test mode sends it to the local registry. */
const REGISTRY_HOST = 'registry.npmjs.org';
/** Generous: npm in a fresh gVisor sandbox on a loaded machine; never a timing assertion. */
const JOB_MS = 300_000;
/** This agent's own ceiling on timeouts (below the preset's maximum, so the agent's notice shows too). */
const AGENT_MAX_TIMEOUT_MS = 300_000;
/** The one shell string the test's policy adds to `builds`: what the job sees of its trust variables and bundle. */
const SHOW_TRUST = `printenv ${TRUST_ENV_NAMES.join(' ')}; tail -c 4000 "$SSL_CERT_FILE"`;

/**
 * Where each of the two concurrent builds runs: a per-task workspace each (docs/workspaces.md), made
 * on first use by a job and then given the fixture project on the agent host (the workspace's
 * directory under the agent's state dir), so the two `npm ci` runs cannot see each other's files.
 */
const PLACES = ['build-a', 'build-b'] as const;
type Place = (typeof PLACES)[number];
const placeArgs = (p: Place): S => ({ workspace: p });
const placeDir = (p: Place) => join(stateDir, 'workspaces', p);
const installed = (p: Place, pkg: string) => join(placeDir(p), 'node_modules', pkg, 'index.js');
const preparePlace = (p: Place) => prepareWorkspace(client, stateDir, p, join(FIXTURE, 'app'), JOB_MS);

/** The test team's policy: the `builds` preset as shipped, plus the one shell string SHOW_TRUST. */
const teamPolicy = (patch: S = {}) => ({
  ...PRESETS.builds.policy,
  shell: { enabled: true, allow: [SHOW_TRUST] },
  sandbox: { ...PRESETS.builds.policy.sandbox, minimum: 'gvisor' },
  ...patch,
});

let gw: Gateway;
let client: Client;
let agent: AgentProcess;
let ca: PrivateCa;
let registry: PrivateHttps;
let root: string;
let stateDir: string;

maybe('builds: npm ci under the builds preset, from a registry a private CA certified', () => {
  beforeAll(async () => {
    expect(presetHosts('package-registries'), 'the preset lists the npm registry').toContain(REGISTRY_HOST);
    ca = makePrivateCa([REGISTRY_HOST]);
    registry = await startTarballRegistry(ca, join(FIXTURE, 'registry'));
    root = mkdtempSync(join(tmpdir(), 'gatehouse-builds-ws-'));
    stateDir = mkdtempSync(join(tmpdir(), 'gatehouse-builds-state-'));
    chmodSync(root, 0o777);
    gw = await startGateway();
    await gw.putPolicy(TEAM, teamPolicy());
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    agent = startAgent(gw, {
      token: await gw.token({ team: TEAM, scopes: ['agent'] }),
      root,
      sandbox: 'gvisor',
      capacity: 2,
      agentId: 'builds-gvisor',
      extraArgs: ['--state-dir', stateDir, '--extra-ca', ca.caFile, '--max-timeout-ms', String(AGENT_MAX_TIMEOUT_MS), '--warm', '0'],
      env: { GATEHOUSE_EGRESS_TEST_MODE: '1', GATEHOUSE_EGRESS_TEST_HOSTS: `${REGISTRY_HOST}=127.0.0.1:${registry.port}` },
    });
    await agent.ready;
  }, 300_000);

  afterAll(async () => {
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    await registry?.close();
    ca?.remove();
    if (root) rmSync(root, { recursive: true, force: true });
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  });

  it(
    'two builds at once, each in its own workspace, install both packages over TLS the private CA signed',
    async () => {
      for (const p of PLACES) await preparePlace(p);
      const results = await Promise.all(
        PLACES.map((p) => call(client, 'execute', { command: 'npm', args: NPM_CI, ...placeArgs(p), timeout_ms: 240_000 }, JOB_MS)),
      );
      for (const [i, r] of results.entries()) {
        const s = r.s as S;
        expect(s.exit_code, `${PLACES[i]}: ${r.t}\n--- agent log:\n${agent.logs()}`).toBe(0);
        expect(s.sandbox).toBe('gvisor');
        expect(readFileSync(installed(PLACES[i], 'tiny-b'), 'utf8')).toContain('tiny-b works');
        expect(readFileSync(installed(PLACES[i], 'tiny-a'), 'utf8')).toContain('tiny-a works');
        expect(s.notices).toContain('allowed by rules[0]');
      }
      // Each sandbox has its own npm cache: each build fetched both tarballs, over TLS for the registry's name.
      for (const t of ['tiny-a', 'tiny-b']) {
        const fetched = registry.seen.filter((q) => q.method === 'GET' && q.url === `/${t}/-/${t}-1.0.0.tgz` && q.sni === REGISTRY_HOST);
        expect(fetched.length).toBeGreaterThanOrEqual(2);
      }
    },
    JOB_MS,
  );

  it(
    'without the private CA (npm told to trust only the host bundle) the same build fails on the certificate',
    async () => {
      await preparePlace(PLACES[0]);
      const r = await call(
        client,
        'execute',
        { command: 'npm', args: [...NPM_CI, '--cafile=/etc/ssl/certs/ca-certificates.crt'], ...placeArgs(PLACES[0]), timeout_ms: 240_000 },
        JOB_MS,
      );
      expect((r.s as S).exit_code, r.t).not.toBe(0);
      expect(r.t).toMatch(
        /UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT|SELF_SIGNED_CERT|unable to get local issuer certificate|self[- ]signed certificate/i,
      );
      expect(existsSync(installed(PLACES[0], 'tiny-b'))).toBe(false);
    },
    JOB_MS,
  );

  it("a job's trust variables all name one readable bundle, the private CA at its end", async () => {
    const r = await call(client, 'execute', { command: SHOW_TRUST, timeout_ms: 60_000 }, JOB_MS);
    const s = r.s as S;
    expect(s.exit_code, r.t).toBe(0);
    const lines = (s.stdout as string).split('\n');
    const paths = new Set(lines.slice(0, TRUST_ENV_NAMES.length));
    expect([...paths]).toEqual(['/etc/gatehouse/ca-certificates.crt']);
    expect(s.stdout).toContain(ca.caPem.trim().split('\n')[1]);
  });

  it(
    "a refused connection names the policy key that would allow it, in the result's notices and in npm's own error",
    async () => {
      await preparePlace(PLACES[1]);
      // npm sends the lockfile's registry.npmjs.org URLs to the configured registry: a host the preset does not list.
      const r = await call(
        client,
        'execute',
        { command: 'npm', args: [...NPM_CI, '--registry', 'https://registry.example.test/'], ...placeArgs(PLACES[1]), timeout_ms: 240_000 },
        JOB_MS,
      );
      const s = r.s as S;
      expect(s.exit_code, r.t).not.toBe(0);
      const refused = (s.notices as string[]).find((n) => n.includes('refused registry.example.test:443'));
      expect(refused, JSON.stringify(s.notices)).toContain('To allow it, change rules[0].network.allow in the team policy');
      expect(r.t).toContain('change rules[0].network.allow');
      expect(s.stderr).toContain('rules[0].network.allow');
    },
    JOB_MS,
  );

  it('a timeout above the maximum is clamped, and the result says so (the policy, then the agent)', async () => {
    const r = await call(client, 'execute', { command: 'npm', args: ['--version'], timeout_ms: 900_000 }, JOB_MS);
    const s = r.s as S;
    expect(s.exit_code, r.t).toBe(0);
    expect(s.notices).toContain('timeout 900000ms clamped to the maximum 600000ms');
    expect(s.notices).toContain(`timeout 600000ms lowered to ${AGENT_MAX_TIMEOUT_MS}ms: this agent's ceiling (its --max-timeout-ms)`);
    expect(r.t).toContain('timeout 900000ms clamped to the maximum 600000ms');
  });

  it(
    'a build with the network off fails, and its structured result says which key turns it on',
    async () => {
      const rules = PRESETS.builds.policy.rules.map((rule) => ({ ...rule, network: { mode: 'off' } }));
      await gw.putPolicy(TEAM, teamPolicy({ rules }));
      await preparePlace(PLACES[0]);
      const before = registry.seen.length;
      const r = await call(client, 'execute', { command: 'npm', args: NPM_CI, ...placeArgs(PLACES[0]), timeout_ms: 120_000 }, JOB_MS);
      const s = r.s as S;
      expect(s.exit_code, r.t).not.toBe(0);
      expect(s.notices).toContain(
        'the job had no network: rules[0].network.mode is "off" in the team policy; to let it reach hosts, set rules[0].network (docs/network.md)',
      );
      expect(registry.seen.length).toBe(before);
    },
    JOB_MS,
  );
});
