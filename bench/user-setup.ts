/**
 * What a user runs: `npm start` (scripts/start.ts) on a state dir and port of its own — the gateway
 * under `wrangler dev`, the bundled agent, the default policy — driven through the official MCP SDK
 * client with the dev client token it prints. The one difference: the bench's wrangler configuration
 * (bench/gateway.ts), whose rate limits never say no, so the figures measure the path and not the
 * limiter (which still runs on every request).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ROOT, connectMcp, freePort } from '../test/e2e/harness.ts';
import { gatewayPids } from './hotpath.ts';
import { cmdline, procSnapshot } from './proc-cpu.ts';

export type StartSandbox = 'gvisor' | 'bwrap' | 'none';

export interface UserSetup {
  url: string;
  port: number;
  sandbox: StartSandbox;
  /** A new MCP SDK client with npm start's dev client token. */
  connect(): Promise<Client>;
  /** PUT /admin/v1/policy with npm start's admin token. */
  putPolicy(policy: unknown): Promise<void>;
  /** The processes of each part, found again on every call (the gateway's workerd may restart). */
  pids(): { agent: number; gateway: number | null; devProxy: number | null; wrangler: number[] };
  stop(): Promise<void>;
}

interface Tokens {
  client: string;
  admin: string;
}

/** Starts `npm start -- --sandbox <sandbox>` with its state under `stateDir`; resolves once its banner shows. */
export async function startUserSetup(stateDir: string, sandbox: StartSandbox, wranglerConfig: string): Promise<UserSetup> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
    GATEHOUSE_STATE_DIR: stateDir,
    PORT: String(port),
    GATEHOUSE_WRANGLER_CONFIG: wranglerConfig,
  };
  const p = spawn(process.execPath, [join(ROOT, 'scripts/start.ts'), '--sandbox', sandbox], {
    cwd: ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  p.stdout!.on('data', (d) => (out += d));
  p.stderr!.on('data', (d) => (out += d));
  for (const until = Date.now() + 180_000; !out.includes('Gatehouse is running'); ) {
    if (p.exitCode !== null) throw new Error(`npm start exited (${p.exitCode}):\n${out}`);
    if (Date.now() > until) {
      await stopStart(p);
      throw new Error(`npm start did not come up within 180 s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const tokens = JSON.parse(readFileSync(join(stateDir, 'tokens.json'), 'utf8')) as Tokens;
  const agentPid = () => {
    for (const s of procSnapshot().values()) if (s.ppid === p.pid && cmdline(s.pid).includes('agent.mjs')) return s.pid;
    throw new Error(`npm start's agent is not running:\n${out}`);
  };
  const agent = agentPid();
  return {
    url,
    port,
    sandbox,
    connect: () => connectMcp(`${url}/mcp`, tokens.client, 'gatehouse-bench'),
    async putPolicy(policy) {
      const r = await fetch(`${url}/admin/v1/policy`, {
        method: 'PUT',
        body: JSON.stringify(policy),
        headers: { Authorization: `Bearer ${tokens.admin}`, 'Content-Type': 'application/json' },
      });
      if (!r.ok) throw new Error(`PUT policy: ${r.status} ${await r.text()}`);
    },
    pids() {
      const gw = gatewayPids(port);
      // wrangler's own Node processes: the ancestors of its workerd up to npm start.
      const wrangler: number[] = [];
      const snap = procSnapshot();
      for (let q = gw ? snap.get(gw.proxy)?.ppid : undefined; q && q !== p.pid; q = snap.get(q)?.ppid) wrangler.push(q);
      return { agent, gateway: gw?.worker ?? null, devProxy: gw?.proxy ?? null, wrangler };
    },
    stop: () => stopStart(p),
  };
}

/** Ctrl-C, as a user stops it (npm start stops its gateway and agent); then whatever of its group is left. */
async function stopStart(p: ChildProcess): Promise<void> {
  if (p.exitCode === null && p.signalCode === null) {
    const gone = new Promise((r) => p.once('exit', r));
    p.kill('SIGINT');
    await Promise.race([gone, new Promise((r) => setTimeout(r, 15_000))]);
  }
  try {
    process.kill(-p.pid!, 'SIGKILL');
  } catch {
    /* the group is gone */
  }
}
