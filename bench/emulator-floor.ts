/**
 * The emulator floor: what each binding operation of an `execute` call costs in local workerd
 * (`wrangler dev`) with no Gatehouse code around it — a D1 query, a D1 batch, a rate-limit call,
 * a Durable Object RPC, DO SQLite writes, a WebSocket round trip to a hibernating agent socket —
 * and all of them in an execute call's order (`/op/path`, bench/floor/index.ts). The gateway's
 * own CPU per call minus this path's is what Gatehouse's code (MCP layer, auth, policy,
 * dispatch) adds; the rest is the local emulation's, which a deployed Worker does not run.
 *
 *   node bench/emulator-floor.ts [n=200]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ROOT, freePort, stopGroup } from '../test/e2e/harness.ts';
import { cpuMsOfGateway, p50 } from './hotpath.ts';
import { WebSocket } from 'undici';
import { agentSocketDispatcher } from '../executor/connection.ts';

export const FLOOR_OPS = ['healthz', 'd1-query', 'd1-batch', 'ratelimit', 'do-rpc', 'do-sql', 'do-sql-50', 'ws-roundtrip', 'path'] as const;
export type FloorOp = (typeof FLOOR_OPS)[number];
export interface FloorFigure {
  op: FloorOp;
  wallP50: number;
  cpu: number | null;
}

export interface Floor {
  ops: FloorFigure[];
  /** The whole path (`/op/path`) with FLOOR_CLIENTS requests in flight at once: the emulator's throughput floor. */
  pathPerS: number;
}

/** Requests in flight at once for the floor's throughput: the bench's 16 clients. */
export const FLOOR_CLIENTS = 16;

/** A running floor worker: `measure` times `n` sequential requests of one operation and reads its workerd's CPU. */
export interface RunningFloor {
  measure(op: FloorOp, n: number): Promise<{ walls: number[]; cpu: number | null }>;
  /** Sends one request of `op` (for concurrent loads). */
  get(op: FloorOp): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the floor worker (bench/floor) on a free loopback port with its simulated agent connected. */
export async function startEmulatorFloor(): Promise<RunningFloor> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-floor-'));
  const port = await freePort();
  const inspector = await freePort();
  const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}`, WRANGLER_SEND_METRICS: 'false', CI: 'true', NO_COLOR: '1' };
  let logs = '';
  const p = spawn(
    join(ROOT, 'node_modules/.bin/wrangler'),
    [
      'dev',
      '--config',
      join(ROOT, 'bench/floor/wrangler.toml'),
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--inspector-port',
      String(inspector),
      '--persist-to',
      dir,
      '--show-interactive-dev-session=false',
      '--log-level',
      'warn',
    ],
    { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  p.stdout!.on('data', (d) => (logs += d));
  p.stderr!.on('data', (d) => (logs += d));
  const url = `http://127.0.0.1:${port}`;
  let agent: WebSocket | null = null;
  const stop = async () => {
    agent?.close();
    await stopGroup(p);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const deadline = Date.now() + 60_000; ; ) {
      if (p.exitCode !== null) throw new Error(`floor worker exited:\n${logs}`);
      if (
        await fetch(`${url}/healthz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      if (Date.now() > deadline) throw new Error(`floor worker did not start:\n${logs}`);
      await new Promise((r) => setTimeout(r, 150));
    }
    // The simulated agent answers every job.start with a job.exit, as a real one does for `true`.
    // Connected as the agent connects (executor/connection.ts): undici, no permessage-deflate.
    agent = new WebSocket(`ws://127.0.0.1:${port}/connect?agent=floor`, { dispatcher: agentSocketDispatcher() });
    await new Promise<void>((ok, bad) => {
      agent!.addEventListener('open', () => ok());
      agent!.addEventListener('error', () => bad(new Error(`agent socket failed:\n${logs}`)));
    });
    agent.addEventListener('message', (e: { data: unknown }) => {
      const m = JSON.parse(String(e.data)) as { type: string; spec?: { jobId: string } };
      if (m.type === 'job.start') agent!.send(JSON.stringify({ type: 'job.exit', jobId: m.spec!.jobId, state: 'exited', exitCode: 0 }));
    });
  } catch (e) {
    await stop();
    throw e;
  }
  const get = async (op: FloorOp) => {
    const r = await fetch(`${url}/${op === 'healthz' ? 'healthz' : `op/${op}`}`);
    const body = await r.text();
    if (!r.ok) throw new Error(`${op}: ${r.status} ${body}`);
  };
  return {
    get,
    stop,
    async measure(op, n) {
      const c0 = cpuMsOfGateway(port).worker;
      const walls: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        await get(op);
        walls.push(performance.now() - t);
      }
      const c1 = cpuMsOfGateway(port).worker;
      return { walls, cpu: c0 !== null && c1 !== null ? (c1 - c0) / n : null };
    },
  };
}

export async function benchEmulatorFloor(n: number): Promise<Floor> {
  const floor = await startEmulatorFloor();
  try {
    const out: FloorFigure[] = [];
    for (const op of FLOOR_OPS) {
      for (let i = 0; i < 20; i++) await floor.get(op);
      const { walls, cpu } = await floor.measure(op, n);
      out.push({ op, wallP50: p50(walls), cpu });
    }
    // The path's throughput with as many requests in flight as the bench has clients (the same calls per client as n allows).
    const perClient = Math.max(5, Math.round(n / 10));
    const t = performance.now();
    await Promise.all(
      Array.from({ length: FLOOR_CLIENTS }, async () => {
        for (let i = 0; i < perClient; i++) await floor.get('path');
      }),
    );
    return { ops: out, pathPerS: (FLOOR_CLIENTS * perClient * 1000) / (performance.now() - t) };
  } finally {
    await floor.stop();
  }
}

if (import.meta.main) {
  const n = Number(process.argv[2]) || 200;
  const { ops: figs, pathPerS } = await benchEmulatorFloor(n);
  const base = figs.find((f) => f.op === 'healthz')!;
  console.log(`emulator floor, ${n} requests per operation (load ${loadavg()[0].toFixed(1)})\n`);
  console.log('| operation | wall p50 | workerd CPU per request | over GET /healthz |\n|---|---|---|---|');
  for (const f of figs) {
    const over = f.cpu !== null && base.cpu !== null && f !== base ? `+${(f.cpu - base.cpu).toFixed(2)} ms` : '';
    console.log(`| ${f.op} | ${f.wallP50.toFixed(1)} ms | ${f.cpu === null ? 'n/a' : `${f.cpu.toFixed(2)} ms`} | ${over} |`);
  }
  console.log(`\npath with ${FLOOR_CLIENTS} requests in flight: ${pathPerS.toFixed(1)} calls/s`);
  process.exit(0);
}
