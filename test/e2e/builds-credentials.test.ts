/**
 * Real builds with private credentials, end to end (docs/credentials.md, docs/builds.md): the real
 * gateway (`wrangler dev`, with a secrets key), a real agent in gVisor, the MCP SDK client, the
 * recipe of docs/credentials.md run as written (`gatehouse secrets set`, `gatehouse policy set`), and
 * the tools a team uses with a token:
 *
 * - `npm ci` of test/e2e/fixtures/builds/private-app (committed lockfile; its `.npmrc`, written by the test, names the
 *   `@acme` registry and holds no token) installs `@acme/greeting` from a private HTTPS registry
 *   that answers 401 without `Authorization: Bearer <NPM_TOKEN>`, and tiny-a/tiny-b from the
 *   public registry's stand-in, which must never see the header;
 * - `git clone https://git.acme.example/repo.git` (and a workspace made from that URL with
 *   `workspace_source`) from `git http-backend` behind an HTTPS server that answers 401 without
 *   `Authorization: Basic <base64 of x-access-token:TOKEN>` (what Git hosts take for a token).
 *
 * The team policy is the `builds` preset with the private registry and its binding added to the
 * package managers' rule (`rules[0].network`), and the Git server and its binding in the team's
 * `network` (git's). Without the bindings the same jobs fail with npm's E401 and git's 401.
 *
 * Attacks in the same flows: the project's own install script (what any dependency's could do)
 * hunts for the token while `npm ci` runs with the credential in its grant — env, every
 * /proc/<pid>/environ and cmdline, every file, `npm config list`; a shell job with git's credential
 * in its grant does the same with `git config` and the clone's `.git/config`; after the build the
 * workspaces (node_modules, the npm cache and its logs, the clone's .git) are read on the agent
 * host. The servers see the header only on requests for the bound hosts, never for the public
 * registry nor for the same Git server under another name; the audit's egress listing names each
 * secret and never holds a value.
 *
 * Nothing leaves 127.0.0.1: the agent's test mode (docs/network.md) sends all four names to the two
 * local servers, whose certificate a private CA given with `--extra-ca` signed. Needs runsc,
 * openssl and git with git-http-backend (skipped outside CI when missing).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, lstatSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRESETS } from '../../src/policy/presets.ts';
import { readmeBlock } from '../cli/readme.ts';
import { runCli } from '../support/cli.ts';
import { prepareWorkspace, runJob } from '../support/e2e-jobs.ts';
import { gitHttpBackend, makeBareRepo, startGitHttpServer } from '../support/git-http-server.ts';
import { makePrivateCa, openSslAvailable, type PrivateCa } from '../support/private-ca.ts';
import type { PrivateHttps } from '../support/private-https.ts';
import { huntScript } from '../support/secret-hunt.ts';
import { NPM_CI, startTarballRegistry } from '../support/tarball-registry.ts';
import { hasCommand, requireParts, ROOT, startEgressTestAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';

type S = Record<string, any>;

const READY = requireParts({ runsc: hasCommand('runsc'), openssl: openSslAvailable(), 'git with git-http-backend': gitHttpBackend() !== null });
if (!READY) console.warn('builds-credentials.test.ts: skipped — runsc, openssl or git-http-backend is not installed (allowed outside CI only)');
const maybe = READY ? describe : describe.skip;

const TEAM = 'builds-creds';
const FIXTURE = join(import.meta.dirname, 'fixtures/builds');
/** The team's private registry (the `@acme` scope), the public one, the team's Git server and that server under a name nothing is bound to. */
const NPM_HOST = 'npm.acme.example';
const PUBLIC_NPM = 'registry.npmjs.org';
const GIT_HOST = 'git.acme.example';
const GIT_MIRROR = 'git-mirror.acme.example';
const REPO_URL = `https://${GIT_HOST}/repo.git`;
/** Every token starts with this marker, so a job can search for it without its command holding the value. */
const MARK = 'gh-cred-e2e-';
const NPM_TOKEN = `${MARK}${randomBytes(16).toString('hex')}`;
const GIT_TOKEN = `${MARK}${randomBytes(16).toString('hex')}`;
/** The GIT_AUTH secret: what follows `Basic ` (user `x-access-token`, the token as password). Every such value starts with BASIC_PREFIX. */
const BASIC_PREFIX = Buffer.from('x-access-token:').toString('base64');
const GIT_AUTH = Buffer.from(`x-access-token:${GIT_TOKEN}`).toString('base64');
/** Each form a credential could be found in. */
const FORMS = [NPM_TOKEN, GIT_TOKEN, GIT_AUTH];
/** Files the hunts must find (they searched something): one per pattern. */
const DECOYS = [`${MARK}feedface`, `${BASIC_PREFIX}ZGVjb3k=`];
const PATTERNS = [`${MARK}[0-9a-f]*`, `${BASIC_PREFIX}[A-Za-z0-9+/=]*`];
/** The project's postinstall runs this (hunt.sh) while `npm ci` holds the registry credential. */
const NPM_HUNT = huntScript(PATTERNS, ['npm config list']);
/** A shell job (the team's network: git's credential in its grant) after the clone. */
const GIT_HUNT = huntScript(PATTERNS, ['cat private-repo/.git/config', 'git -C private-repo config --list --show-origin']);
/** npm's cache (and its logs, in `_logs`) in the workspace, so the test reads them after the job. */
const NPM_BUILD = [...NPM_CI, '--cache=./.npm-cache'];
/** Incompressible, so the clone's pack is megabytes through the proxy, not one small read. */
const BLOB = randomBytes(3 << 20);
/** Generous: npm and git in a fresh gVisor sandbox on a loaded machine; never a timing assertion. */
const JOB_MS = 300_000;

const NPM_BINDING = { secret: 'NPM_TOKEN', hosts: [NPM_HOST], scheme: 'Bearer' };
const GIT_BINDING = { secret: 'GIT_AUTH', hosts: [GIT_HOST], scheme: 'Basic' };

/**
 * The `builds` preset plus: the private registry in the package managers' rule, the Git server in
 * the team's network (git's), each with its credential when `bound`, and the two hunt strings.
 */
function teamPolicy(bound: boolean) {
  const builds = PRESETS.builds.policy;
  const rule = builds.rules[0];
  const ruleNetwork = rule.network!;
  return {
    ...builds,
    shell: { enabled: true, allow: [GIT_HUNT] },
    sandbox: { ...builds.sandbox, minimum: 'gvisor' },
    network: {
      mode: 'allowlist',
      allow: [{ host: GIT_HOST }, { host: GIT_MIRROR }],
      credentials: bound ? [GIT_BINDING] : [],
    },
    rules: [
      {
        ...rule,
        network: {
          ...ruleNetwork,
          allow: [...ruleNetwork.allow, { host: NPM_HOST, methods: ['GET', 'HEAD'] }],
          credentials: bound ? [NPM_BINDING] : [],
        },
      },
    ],
  };
}

/** Every file under `dir` on the agent host, with its bytes: what a later job, an artifact or a person could read. */
function filesUnder(dir: string): { path: string; bytes: Buffer }[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((p) => join(dir, p))
    .filter((p) => lstatSync(p).isFile())
    .map((p) => ({ path: relative(dir, p), bytes: readFileSync(p) }));
}

/** The files under `dir` that hold any form of a credential (none, or the test fails naming them). */
const leaksUnder = (dir: string) => filesUnder(dir).filter((f) => FORMS.some((v) => f.bytes.includes(v)));

let gw: Gateway;
let client: Client;
let agent: AgentProcess;
let ca: PrivateCa;
let registry: PrivateHttps;
let git: PrivateHttps;
let root: string;
let stateDir: string;
let repos: string;
let admin: string;
const cli = (args: string[], stdin?: string) => runCli(gw.url, admin, args, { stdin });
const run = (args: S) => runJob(client, args, JOB_MS);
/** Everything a user saw, for the last check that no value is in any of it. */
const outputs: string[] = [];

/** The npm project in its workspace, with the install script's hunt and the decoys it must find. */
async function prepareNpmBuild(): Promise<string> {
  const dir = await prepareWorkspace(client, stateDir, 'npm-build', join(FIXTURE, 'private-app'), JOB_MS);
  // The project's .npmrc names the private registry for its scope, with no token (written here, not committed:
  // the repository names no registry host of its own).
  writeFileSync(join(dir, '.npmrc'), `${['@acme:registry', `https://${NPM_HOST}/`].join('=')}\n`);
  writeFileSync(join(dir, 'hunt.sh'), `${NPM_HUNT}\n`);
  writeFileSync(join(dir, 'decoys.txt'), `${DECOYS.join('\n')}\n`);
  return dir;
}

async function setPolicy(bound: boolean): Promise<void> {
  const r = await cli(['policy', 'set', '-'], JSON.stringify(teamPolicy(bound)));
  expect(r.code, r.stderr).toBe(0);
}

maybe('builds with private credentials: npm ci from a private registry and git clone of a private repository', () => {
  beforeAll(async () => {
    ca = makePrivateCa([NPM_HOST, PUBLIC_NPM, GIT_HOST, GIT_MIRROR]);
    registry = await startTarballRegistry(ca, join(FIXTURE, 'registry'), {
      requireAuthorization: { [NPM_HOST]: `Bearer ${NPM_TOKEN}` },
      challenge: 'Bearer realm="acme npm"',
    });
    repos = mkdtempSync(join(tmpdir(), 'gatehouse-builds-creds-git-'));
    makeBareRepo(repos, 'repo.git', { 'README.md': 'the private repository works\n', 'assets/blob.bin': BLOB });
    // The same repository under both names: only one of them has the credential bound.
    git = await startGitHttpServer(ca, repos, { requireAuthorization: { [GIT_HOST]: `Basic ${GIT_AUTH}`, [GIT_MIRROR]: `Basic ${GIT_AUTH}` } });
    root = mkdtempSync(join(tmpdir(), 'gatehouse-builds-creds-ws-'));
    stateDir = mkdtempSync(join(tmpdir(), 'gatehouse-builds-creds-state-'));
    chmodSync(root, 0o777);
    gw = await startGateway({ vars: { GATEHOUSE_SECRETS_KEY: randomBytes(32).toString('base64') } });
    admin = await gw.token({ team: TEAM, scopes: ['admin'] });
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    agent = await startEgressTestAgent(gw, TEAM, {
      root,
      capacity: 2,
      agentId: 'builds-creds-gvisor',
      extraArgs: ['--state-dir', stateDir, '--extra-ca', ca.caFile, '--warm', '0'],
      testHosts: { [NPM_HOST]: registry.port, [PUBLIC_NPM]: registry.port, [GIT_HOST]: git.port, [GIT_MIRROR]: git.port },
    });
    await agent.ready;
  }, 300_000);

  afterAll(async () => {
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    await registry?.close();
    await git?.close();
    ca?.remove();
    for (const d of [root, stateDir, repos]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it("docs/credentials.md's recipe, run as written, sets the secrets and the policy; secrets are listed by name only", async () => {
    const lines = readmeBlock('creds-recipe');
    expect(lines).toHaveLength(3);
    // npx finds the repository's own package from a directory inside it; policy.json is the recipe's.
    const cwd = mkdtempSync(join(ROOT, 'node_modules/.cache-creds-recipe-'));
    writeFileSync(join(cwd, 'policy.json'), JSON.stringify(teamPolicy(true), null, 2));
    const env = {
      ...process.env,
      PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      GATEHOUSE_URL: gw.url,
      GATEHOUSE_ADMIN_TOKEN: admin,
      NPM_TOKEN,
      GIT_TOKEN,
    };
    try {
      for (const line of lines) {
        const r = await promisify(execFile)('/bin/sh', ['-ec', line], { cwd, env }).catch((e) => {
          throw new Error(`docs line failed: ${line}\n${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
        });
        outputs.push(r.stdout, r.stderr);
      }
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
    expect(outputs.join('\n')).toMatch(/set: secret NPM_TOKEN[\s\S]*set: secret GIT_AUTH/);
    const list = await cli(['secrets', 'list']);
    expect(list.stdout).toMatch(/^NPM_TOKEN\s/m);
    expect(list.stdout).toMatch(/^GIT_AUTH\s/m);
    outputs.push(list.stdout, list.stderr);
  });

  it(
    'without the bindings (secrets set, hosts allowed) npm ci fails with E401 and git clone with 401: no request carried a header',
    async () => {
      await setPolicy(false);
      const dir = await prepareNpmBuild();
      const npm = await run({ command: 'npm', args: NPM_BUILD, workspace: 'npm-build', timeout_ms: 240_000 });
      outputs.push(npm.seen);
      expect(npm.s.exit_code, npm.t).not.toBe(0);
      expect(npm.t).toMatch(/E401/);
      expect(existsSync(join(dir, 'node_modules/@acme/greeting'))).toBe(false);
      expect(registry.seen.filter((q) => q.host === NPM_HOST).length).toBeGreaterThan(0);

      await prepareWorkspace(client, stateDir, 'git-build', null, JOB_MS);
      const clone = await run({ command: 'git', args: ['clone', REPO_URL, 'private-repo'], workspace: 'git-build' });
      outputs.push(clone.seen);
      expect(clone.s.exit_code, clone.t).not.toBe(0);
      expect(clone.t).toMatch(/could not read Username|Authentication failed/);
      expect(git.seen.length).toBeGreaterThan(0);
      for (const q of [...registry.seen, ...git.seen]) expect(q.authorization, JSON.stringify(q)).toBeUndefined();
    },
    JOB_MS * 2,
  );

  it(
    "with the binding npm ci installs the private package; only the private registry's requests carry the header, and the install script cannot find it",
    async () => {
      await setPolicy(true);
      const dir = await prepareNpmBuild();
      const before = registry.seen.length;
      const r = await run({ command: 'npm', args: NPM_BUILD, workspace: 'npm-build', timeout_ms: 240_000 });
      outputs.push(r.seen);
      expect(r.s.exit_code, `${r.t}\n--- agent log:\n${agent.logs()}`).toBe(0);
      expect(r.s.sandbox).toBe('gvisor');
      expect(readFileSync(join(dir, 'node_modules/@acme/greeting/index.js'), 'utf8')).toContain('hello from the private registry');
      expect(readFileSync(join(dir, 'node_modules/tiny-a/index.js'), 'utf8')).toContain('tiny-a works');

      const seen = registry.seen.slice(before);
      const priv = seen.filter((q) => q.host === NPM_HOST);
      expect(priv.map((q) => [q.url, q.authorization])).toContainEqual(['/@acme/greeting/-/greeting-1.0.0.tgz', `Bearer ${NPM_TOKEN}`]);
      for (const q of priv) expect(q.authorization).toBe(`Bearer ${NPM_TOKEN}`);
      const pub = seen.filter((q) => q.host === PUBLIC_NPM);
      // (npm also asks the public registry for its own latest version: `GET /npm`, answered 404.)
      expect(pub.map((q) => q.url)).toEqual(expect.arrayContaining(['/tiny-a/-/tiny-a-1.0.0.tgz', '/tiny-b/-/tiny-b-1.0.0.tgz']));
      for (const q of pub) expect(q.authorization).toBeUndefined();
      expect(seen.every((q) => q.host === NPM_HOST || q.host === PUBLIC_NPM)).toBe(true);

      // The job's own view of its network: the private registry's connections name the secret, the public one's nothing.
      const conns = r.connections.filter((c) => c.decision === 'allowed');
      expect(conns.filter((c) => c.host === NPM_HOST).map((c) => c.credential)).toContain('NPM_TOKEN');
      for (const c of conns.filter((c) => c.host === PUBLIC_NPM)) expect(c.credential ?? null).toBeNull();

      // The postinstall ran with the credential in force: it searched (it found both decoys) and found no value.
      const hunt = readFileSync(join(dir, 'hunt.out'), 'utf8');
      outputs.push(hunt);
      expect(hunt).toContain('hunt-done');
      for (const d of DECOYS) expect(hunt).toContain(d);
      expect(hunt).toContain('npm_lifecycle_event=postinstall');
      expect(hunt).toContain('@acme:registry = "https://npm.acme.example/"');
      for (const v of FORMS) expect(hunt).not.toContain(v);
    },
    JOB_MS,
  );

  it(
    'after the build: npm config shows no token, and no file of the workspace holds one (node_modules, lockfile, npm cache and logs)',
    async () => {
      const r = await run({ command: 'npm', args: ['config', 'list'], workspace: 'npm-build' });
      outputs.push(r.seen);
      expect(r.s.exit_code, r.t).toBe(0);
      expect(r.s.stdout).toContain('@acme:registry = "https://npm.acme.example/"');
      expect(r.s.stdout).not.toMatch(/_authToken|_auth\s*=/);

      const dir = join(stateDir, 'workspaces', 'npm-build');
      const files = filesUnder(dir);
      // Not vacuous: the cache indexed the private tarball's URL and the debug log recorded its fetch.
      expect(files.some((f) => f.path.startsWith('.npm-cache/_cacache/index-v5/') && f.bytes.includes(`https://${NPM_HOST}/@acme/greeting`))).toBe(true);
      expect(files.some((f) => f.path.startsWith('.npm-cache/_logs/') && f.bytes.includes(NPM_HOST))).toBe(true);
      expect(leaksUnder(dir).map((f) => f.path)).toEqual([]);
    },
    JOB_MS,
  );

  it(
    'with the binding git clone of the private repository works in a workspace; every request to the Git server carried the header',
    async () => {
      const version = await run({ command: 'git', args: ['--version'] });
      expect(version.s.exit_code, `git inside the sandbox: ${version.t}`).toBe(0);

      const dir = await prepareWorkspace(client, stateDir, 'git-build', null, JOB_MS);
      writeFileSync(join(dir, 'decoys.txt'), `${DECOYS.join('\n')}\n`);
      const before = git.seen.length;
      const r = await run({ command: 'git', args: ['clone', REPO_URL, 'private-repo'], workspace: 'git-build' });
      outputs.push(r.seen);
      expect(r.s.exit_code, `${r.t}\n--- agent log:\n${agent.logs()}`).toBe(0);
      expect(readFileSync(join(dir, 'private-repo/README.md'), 'utf8')).toBe('the private repository works\n');
      expect(readFileSync(join(dir, 'private-repo/assets/blob.bin')).equals(BLOB)).toBe(true);

      const seen = git.seen.slice(before);
      // Smart HTTP: the refs (GET), then the pack (POST), each with the header the proxy added.
      expect(seen.map((q) => `${q.method} ${q.url}`)).toEqual(
        expect.arrayContaining(['GET /repo.git/info/refs?service=git-upload-pack', 'POST /repo.git/git-upload-pack']),
      );
      for (const q of seen) expect([q.host, q.authorization]).toEqual([GIT_HOST, `Basic ${GIT_AUTH}`]);
      expect(r.connections.filter((c) => c.host === GIT_HOST).map((c) => c.credential)).toContain('GIT_AUTH');

      // A workspace made from the same URL (workspace_source) is cloned through the same proxy, with the credential.
      const made = await run({
        command: 'git',
        args: ['log', '-1', '--format=%s'],
        workspace: 'from-private-repo',
        workspace_source: { git: REPO_URL },
      });
      outputs.push(made.seen);
      expect(made.s.exit_code, made.t).toBe(0);
      expect(made.s.stdout).toContain('the private repository');
    },
    JOB_MS,
  );

  it(
    'the same repository under a name the secret is not bound to gets no header: that clone fails with 401',
    async () => {
      const before = git.seen.length;
      const r = await run({ command: 'git', args: ['clone', `https://${GIT_MIRROR}/repo.git`, 'mirror'], workspace: 'git-build' });
      outputs.push(r.seen);
      expect(r.s.exit_code, r.t).not.toBe(0);
      expect(r.t).toMatch(/could not read Username|Authentication failed/);
      const seen = git.seen.slice(before);
      expect(seen.length).toBeGreaterThan(0);
      for (const q of seen) expect([q.host, q.authorization]).toEqual([GIT_MIRROR, undefined]);
      for (const c of r.connections.filter((c) => c.host === GIT_MIRROR)) expect(c.credential ?? null).toBeNull();
    },
    JOB_MS,
  );

  it(
    "a job with git's credential in its grant cannot find it: env, /proc, files, git config, the clone's .git/config",
    async () => {
      const r = await run({ command: GIT_HUNT, workspace: 'git-build' });
      outputs.push(r.seen);
      const out = r.s.stdout as string;
      expect(out, r.t).toContain('hunt-done');
      for (const d of DECOYS) expect(out).toContain(d);
      expect(out).toContain('PATH=');
      expect(out).toContain(`url = ${REPO_URL}`);
      expect(out).toMatch(/file:\.git\/config\s+remote\.origin\.url=https:\/\/git\.acme\.example\/repo\.git/);
      for (const v of FORMS) expect(r.seen).not.toContain(v);
      expect(leaksUnder(join(stateDir, 'workspaces', 'git-build')).map((f) => f.path)).toEqual([]);
      expect(leaksUnder(join(stateDir, 'workspaces', 'from-private-repo')).map((f) => f.path)).toEqual([]);
    },
    JOB_MS,
  );

  it('the egress listing names each secret on its hosts only; no value is in the audit, the listings or the logs', async () => {
    const get = async (path: string) => {
      const r = await fetch(`${gw.url}/admin/v1${path}`, { headers: { Authorization: `Bearer ${admin}` } });
      expect(r.status, path).toBe(200);
      return r.text();
    };
    const audit = await get('/audit?limit=200');
    const egress = await get('/audit/egress?limit=200');
    const rows = JSON.parse(egress).connections as S[];
    const credentialsOn = (host: string) => [...new Set(rows.filter((c) => c.host === host && c.decision === 'allowed').map((c) => c.credential ?? null))];
    expect(credentialsOn(NPM_HOST)).toContain('NPM_TOKEN');
    expect(credentialsOn(GIT_HOST)).toContain('GIT_AUTH');
    expect(credentialsOn(PUBLIC_NPM)).toEqual([null]);
    expect(credentialsOn(GIT_MIRROR)).toEqual([null]);
    const listing = await cli(['audit', 'egress', '--limit', '200']);
    expect(listing.code, listing.stderr).toBe(0);
    expect(listing.stdout).toMatch(/npm\.acme\.example:443\s+CONNECT\s+allowed\s+\S+ B\s+NPM_TOKEN\s/);
    expect(listing.stdout).toMatch(/git\.acme\.example:443\s+CONNECT\s+allowed\s+\S+ B\s+GIT_AUTH\s/);
    for (const t of [audit, egress, listing.stdout, listing.stderr, gw.logs(), agent.logs(), ...outputs]) {
      for (const v of FORMS) expect(t).not.toContain(v);
    }
  });
});
