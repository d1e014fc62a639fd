/**
 * Whole-system test harness: starts the real gateway (`wrangler dev` → workerd with local D1/R2
 * emulation) on a free loopback port with its own state dir, and real agent processes.
 * Everything listens on 127.0.0.1 only.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { generateSigningKey, mintToken } from '../../src/auth/mint.ts';
import type { Minter } from '../../src/auth/minter.ts';

export const ROOT = resolve(import.meta.dirname, '../..');
const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
const NODE = process.execPath;

/** Whether a tool is installed (tests that need one skip outside CI only, and say so). */
export function hasCommand(cmd: string, args = ['--version']): boolean {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * The real parts a test file needs (`{ runsc: hasCommand('runsc'), … }`): true when every one is here. Where one is
 * missing the file's tests skip, outside CI only: under CI=true (`.ci/run` installs every part) the file fails,
 * naming what is missing.
 */
export function requireParts(parts: Record<string, boolean>, installedBy = '.ci/run installs it'): boolean {
  const missing = Object.entries(parts)
    .filter(([, here]) => !here)
    .map(([name]) => name);
  if (missing.length > 0 && process.env.CI === 'true') {
    throw new Error(`${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} required under CI=true (${installedBy})`);
  }
  return missing.length === 0;
}

/** The sandbox for whole-system tests: bubblewrap (`.ci/run` installs it, so under CI it must be there), else none. */
export function testSandbox(): 'bwrap' | 'none' {
  return requireParts({ bubblewrap: hasCommand('bwrap') }) ? 'bwrap' : 'none';
}

/** The official MCP SDK client, connected over Streamable HTTP with a bearer token. */
export async function connectMcp(mcpUrl: string, token: string, name = 'gatehouse-test'): Promise<Client> {
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number; out: string }> {
  return new Promise((res) => {
    const p = spawn(cmd, args, { cwd: opts.cwd ?? ROOT, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('close', (code) => res({ code: code ?? -1, out }));
  });
}

/** Stops a detached process group: TERM, a grace, then KILL (wrangler dev is slow to stop). */
export async function stopGroup(p: ChildProcess, graceMs = 3000): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null || !p.pid) return;
  const exited = new Promise<void>((r) => p.once('exit', () => r()));
  try {
    process.kill(-p.pid, 'SIGTERM');
  } catch {
    /* already gone */
  }
  const t = setTimeout(() => {
    try {
      process.kill(-p.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }, graceMs);
  await exited;
  clearTimeout(t);
}

export interface Gateway {
  url: string;
  mcpUrl: string;
  stateDir: string;
  /** wrangler dev's DevTools inspector port (bench/profile-gateway.ts takes CPU profiles through it). */
  inspectorPort: () => number;
  signingKey: string;
  issuer: string;
  audience: string;
  logs: () => string;
  /** Mints a token with the gateway's signing key (what the offline bootstrap does). */
  token(o: { team: string; scopes: string[]; subject?: string; ttlSeconds?: number; jti?: string; now?: number; minter?: Minter | null }): Promise<string>;
  /** An MCP client of `team` with these scopes. */
  mcp(team: string, scopes: string[]): Promise<Client>;
  /** Sets the team's policy through the admin API (throws with the gateway's answer on refusal). */
  putPolicy(team: string, policy: unknown): Promise<void>;
  /** Stops `wrangler dev` and starts it again on the same port with the same state (a restart or deploy). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface GatewayOptions {
  /** Extra [vars]/secrets, e.g. HEARTBEAT_MS or GATEHOUSE_HS_SECRET. */
  vars?: Record<string, string>;
  /** Skip applying migrations (to test a refused start-up, for example). */
  skipMigrations?: boolean;
  /** Extra `wrangler dev` arguments. */
  extraArgs?: string[];
  /** Runs after migrations, before `wrangler dev` starts: seed local D1/R2 state under `persistDir`. */
  beforeStart?: (persistDir: string) => Promise<void>;
  /** wrangler dev's log level (default `warn`); `info` also shows the Worker's console.info lines (the call log). */
  logLevel?: 'warn' | 'info';
}

async function waitHealthy(p: ChildProcess, url: string, logs: () => string): Promise<'up' | 'port-in-use' | 'exited' | 'timeout'> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (p.exitCode !== null || p.signalCode !== null) return /Address already in use/.test(logs()) ? 'port-in-use' : 'exited';
    try {
      const r = await fetch(`${url}/healthz`);
      if (r.ok) return 'up';
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) return 'timeout';
    await new Promise((r) => setTimeout(r, 150));
  }
}

/** The environment variable naming the migrated local D1 that test/support/global-setup.ts prepared for this run. */
export const D1_TEMPLATE_ENV = 'GATEHOUSE_TEST_D1_TEMPLATE';

/** `wrangler d1 migrations apply --local` into `persist` (what a fresh checkout's first start does). */
export async function applyMigrations(persist: string): Promise<void> {
  const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}`, WRANGLER_SEND_METRICS: 'false', CI: 'true', NO_COLOR: '1' };
  const m = await run(WRANGLER, ['d1', 'migrations', 'apply', 'DB', '--local', '--persist-to', persist], { env });
  if (m.code !== 0) throw new Error(`migrations failed:\n${m.out}`);
}

/** A migrated local D1 in `persist`: a copy of the run's template when there is one, else the migrations applied. */
export async function prepareD1(persist: string): Promise<void> {
  const template = process.env[D1_TEMPLATE_ENV];
  if (template && existsSync(template)) cpSync(template, persist, { recursive: true });
  else await applyMigrations(persist);
}

export async function startGateway(opts: GatewayOptions = {}): Promise<Gateway> {
  const stateDir = mkdtempSync(join(tmpdir(), 'gatehouse-gw-'));
  const signingKey = await generateSigningKey();
  const vars: Record<string, string> = { GATEHOUSE_SIGNING_KEY: signingKey, HEARTBEAT_MS: '1000', ...opts.vars };
  const envFile = join(stateDir, '.dev.vars');
  // JSON-encode values: dotenv keeps them verbatim inside double quotes only after unescaping.
  writeFileSync(
    envFile,
    Object.entries(vars)
      .map(([k, v]) => `${k}='${v}'`)
      .join('\n') + '\n',
  );
  const persist = join(stateDir, 'state');
  mkdirSync(persist, { recursive: true });
  // wrangler's shebang runs `node` from PATH: make that the pinned Node 22 even outside npm scripts.
  const env = {
    ...process.env,
    PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
    WRANGLER_SEND_METRICS: 'false',
    CI: 'true',
    NO_COLOR: '1',
    CLOUDFLARE_CF_FETCH_ENABLED: 'false',
  };
  if (!opts.skipMigrations) {
    await prepareD1(persist);
  }
  if (opts.beforeStart) await opts.beforeStart(persist);
  // freePort() can hand the same port to two test files running in parallel (or another process
  // takes it before wrangler binds): retry on "Address already in use" with fresh ports.
  let p!: ChildProcess;
  let url = '';
  let logs = '';
  let inspectorPort = 0;
  const launch = async (fixedPort?: number): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      const port = fixedPort ?? (await freePort());
      const inspector = await freePort();
      inspectorPort = inspector;
      url = `http://127.0.0.1:${port}`;
      p = spawn(
        WRANGLER,
        [
          'dev',
          '--ip',
          '127.0.0.1',
          '--port',
          String(port),
          '--inspector-port',
          String(inspector),
          '--persist-to',
          persist,
          '--env-file',
          envFile,
          '--show-interactive-dev-session=false',
          '--log-level',
          opts.logLevel ?? 'warn',
          // Lets tests trigger the cron handler with GET /__scheduled.
          '--test-scheduled',
          ...(opts.extraArgs ?? []),
        ],
        { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const child = p;
      child.stdout!.on('data', (d) => (logs += d));
      child.stderr!.on('data', (d) => (logs += d));
      const up = await waitHealthy(child, url, () => logs);
      if (up === 'up') return;
      if (up === 'port-in-use' && attempt < (fixedPort ? 20 : 4)) {
        if (fixedPort) await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      await stopGroup(child);
      throw new Error(up === 'timeout' ? `gateway did not start:\n${logs}` : `wrangler dev exited early:\n${logs}`);
    }
  };
  await launch();
  const issuer = vars.GATEHOUSE_ISSUER || url;
  const audience = vars.GATEHOUSE_AUDIENCE || `${url}/mcp`;
  const token: Gateway['token'] = async (o) =>
    (
      await mintToken({
        privateJwk: signingKey,
        issuer,
        audience,
        team: o.team,
        subject: o.subject ?? `test-${o.team}`,
        scopes: o.scopes,
        ttlSeconds: o.ttlSeconds ?? 3600,
        jti: o.jti,
        now: o.now,
        minter: o.minter === undefined ? { kind: 'bootstrap' } : o.minter,
      })
    ).token;
  return {
    url,
    mcpUrl: `${url}/mcp`,
    stateDir,
    signingKey,
    issuer,
    audience,
    inspectorPort: () => inspectorPort,
    logs: () => logs,
    token,
    async mcp(team, scopes) {
      return connectMcp(`${url}/mcp`, await token({ team, scopes }));
    },
    async putPolicy(team, policy) {
      const adminToken = await token({ team, scopes: ['admin'] });
      const r = await fetch(`${url}/admin/v1/policy`, {
        method: 'PUT',
        body: JSON.stringify(policy),
        headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
      });
      if (!r.ok) throw new Error(`PUT policy for ${team}: ${r.status} ${await r.text()}`);
    },
    async restart() {
      await stopGroup(p);
      await launch(Number(new URL(url).port));
    },
    async stop() {
      await stopGroup(p);
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

export interface AgentProcess {
  proc: ChildProcess;
  logs: () => string;
  /** Resolves once the agent printed that it is connected. */
  ready: Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface AgentOptions {
  token: string;
  root: string;
  sandbox?: 'gvisor' | 'bwrap' | 'none';
  capacity?: number;
  agentId?: string;
  extraArgs?: string[];
  env?: NodeJS.ProcessEnv;
  /** The agent's entry point: the TypeScript sources by default, or the bundle `npm run build` writes (`dist/agent.mjs`). */
  entry?: string;
}

/**
 * A gVisor agent of `team` with the egress proxy in test mode: each name of `testHosts` is sent to that loopback port
 * (GATEHOUSE_EGRESS_TEST_HOSTS), so jobs reach stand-in registries and Git servers under their public names.
 */
export async function startEgressTestAgent(
  gw: Gateway,
  team: string,
  o: { root: string; agentId: string; capacity: number; extraArgs?: string[]; testHosts?: Record<string, number> },
): Promise<AgentProcess> {
  const hosts = Object.entries(o.testHosts ?? {}).map(([name, port]) => `${name}=127.0.0.1:${port}`);
  return startAgent(gw, {
    token: await gw.token({ team, scopes: ['agent'] }),
    root: o.root,
    sandbox: 'gvisor',
    capacity: o.capacity,
    agentId: o.agentId,
    ...(o.extraArgs ? { extraArgs: o.extraArgs } : {}),
    ...(hosts.length ? { env: { GATEHOUSE_EGRESS_TEST_MODE: '1', GATEHOUSE_EGRESS_TEST_HOSTS: hosts.join(',') } } : {}),
  });
}

/** Starts a real agent process (`node executor/main.ts`) connected to `gw`. */
export function startAgent(gw: Pick<Gateway, 'url'>, o: AgentOptions): AgentProcess {
  // The token goes in the environment: the agent refuses it on the command line (ps shows argv).
  const args = [o.entry ?? join(ROOT, 'executor/main.ts'), '--url', gw.url, '--root', o.root];
  if (o.sandbox) args.push('--sandbox', o.sandbox);
  if (o.sandbox === 'none') args.push('--allow-no-isolation');
  if (o.capacity) args.push('--capacity', String(o.capacity));
  if (o.agentId) args.push('--id', o.agentId);
  if (o.extraArgs) args.push(...o.extraArgs);
  const proc = spawn(NODE, args, {
    cwd: ROOT,
    env: { ...process.env, GATEHOUSE_AGENT_TOKEN: o.token, ...o.env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let logs = '';
  const ready = new Promise<void>((res, rej) => {
    const onData = (d: Buffer) => {
      logs += d;
      if (/connected to /.test(logs)) res();
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (c) => rej(new Error(`agent exited (${c}) before connecting:\n${logs}`)));
    setTimeout(() => rej(new Error(`agent did not connect in 30s:\n${logs}`)), 30_000).unref();
  });
  ready.catch(() => {});
  return {
    proc,
    ready,
    logs: () => logs,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (signal === 'SIGKILL') {
        if (proc.exitCode === null && proc.signalCode === null && proc.pid) {
          const exited = new Promise<void>((r) => proc.once('exit', () => r()));
          process.kill(proc.pid, 'SIGKILL');
          await exited;
        }
        return;
      }
      await stopGroup(proc, 5000);
    },
  };
}
