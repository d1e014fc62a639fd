/**
 * The governed hot path taken apart, end to end through the MCP SDK client (sandbox none):
 * `tools/list` (auth + a fresh MCP server, no storage), `list_runtimes`-free `policy_check`
 * (auth + policy read + one audit row), and `execute true` (everything). The differences say
 * where the per-call overhead goes; `bench/run.ts` prints them next to the bare spawn. The CPU
 * each process spends per call (client, gateway, agent with its children) says where the work
 * goes on a loaded machine, where wall time cannot.
 *
 * `node bench/hotpath.ts [n]` runs it alone against a fresh gateway and agent; `--trace` instead
 * follows each call step by step in wall time (src/contracts/trace.ts): where a call waits.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';
import { TRACE_PREFIX, TRACE_STEPS, type TraceStep } from '../src/contracts/trace.ts';

export interface HotPathFigures {
  toolsList: number[];
  policyCheck: number[];
  execute: number[];
}

async function timed(n: number, f: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await f();
    out.push(performance.now() - t);
  }
  return out;
}

/** `client` must belong to a team with a connected sandbox-none agent. */
export async function benchHotPath(client: Client, n: number): Promise<HotPathFigures> {
  const exec = async () => {
    const r = await client.callTool({ name: 'execute', arguments: { command: 'true', args: [] } });
    if (r.isError) throw new Error(`execute failed: ${JSON.stringify(r.content)}`);
  };
  const check = () => client.callTool({ name: 'policy_check', arguments: { command: 'true', args: [] } });
  await timed(3, exec);
  await timed(3, check);
  // Interleaved so load from other processes lands on all three alike.
  const f: HotPathFigures = { toolsList: [], policyCheck: [], execute: [] };
  for (let i = 0; i < n; i++) {
    f.toolsList.push(...(await timed(1, () => client.listTools())));
    f.policyCheck.push(...(await timed(1, check)));
    f.execute.push(...(await timed(1, exec)));
  }
  return f;
}

/**
 * The processes of a local `wrangler dev` gateway listening on `port`: `proxy`, the workerd that
 * owns the port (wrangler's proxy worker, which only exists locally and forwards every request
 * and WebSocket), and `worker`, its sibling workerd that runs the Worker, the Durable Objects and
 * the D1/R2 emulation. null when they cannot be found (no `ss`, not Linux).
 */
export function gatewayPids(port: number): { proxy: number; worker: number | null } | null {
  try {
    const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
    const proxy = Number(/pid=(\d+)/.exec(out)?.[1]);
    if (!proxy) return null;
    const parent = readFileSync(`/proc/${proxy}/stat`, 'utf8').split(') ')[1].split(' ')[1];
    const siblings = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', parent], { encoding: 'utf8' }).split('\n');
    const worker = siblings.map((l) => l.trim().split(/\s+/)).find((f) => Number(f[0]) !== proxy && /workerd$/.test(f[1] ?? ''));
    return { proxy, worker: worker ? Number(worker[0]) : null };
  } catch {
    return null;
  }
}

/** CPU time (ms) so far of the gateway on `port`: its Worker process and wrangler's local proxy. */
export function cpuMsOfGateway(port: number): { worker: number | null; proxy: number | null } {
  const pids = gatewayPids(port);
  return { worker: pids?.worker ? cpuMsOfPid(pids.worker) : null, proxy: pids ? cpuMsOfPid(pids.proxy) : null };
}

/**
 * CPU time (ms) used so far by process `pid`; with `children`, also by its children that have
 * ended (the agent's job processes, sandbox wrappers and helpers). null when it cannot be read.
 */
export function cpuMsOfPid(pid: number, children = false): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14–17 of /proc/<pid>/stat (utime, stime, cutime, cstime), in clock ticks of 10 ms.
    return (Number(f[11]) + Number(f[12]) + (children ? Number(f[13]) + Number(f[14]) : 0)) * 10;
  } catch {
    return null;
  }
}

export interface CpuPerCall {
  /** This process: the MCP SDK client. */
  client: number;
  /** workerd: the Worker, the Durable Object and the local D1/R2 emulation. */
  gateway: number | null;
  /** wrangler's local proxy workerd in front of it (not part of a deployed gateway). */
  devProxy: number | null;
  /** The agent process and every process it started (sandbox, job, helpers). */
  agent: number | null;
}

/**
 * CPU (ms) each process spends per call, over `n` sequential calls: where the work of a call
 * goes, a figure that stays meaningful on a machine loaded by other processes (wall time does not).
 */
export async function cpuPerCall(n: number, call: () => Promise<unknown>, gatewayPort: number, agentPid?: number): Promise<CpuPerCall> {
  const c0 = process.cpuUsage();
  const g0 = cpuMsOfGateway(gatewayPort);
  const a0 = agentPid ? cpuMsOfPid(agentPid, true) : null;
  for (let i = 0; i < n; i++) await call();
  const c = process.cpuUsage(c0);
  const g1 = cpuMsOfGateway(gatewayPort);
  const a1 = agentPid ? cpuMsOfPid(agentPid, true) : null;
  const per = (a: number | null, b: number | null) => (a !== null && b !== null ? (b - a) / n : null);
  return {
    client: (c.user + c.system) / 1000 / n,
    gateway: per(g0.worker, g1.worker),
    devProxy: per(g0.proxy, g1.proxy),
    agent: per(a0, a1),
  };
}

/**
 * GET /healthz through the gateway: what one HTTP request costs locally before any Gatehouse work
 * (wrangler's proxy, then workerd in development mode). Every call of the hot path pays it once.
 */
export async function healthzFloor(url: string, n: number): Promise<number[]> {
  return timed(n, async () => {
    const r = await fetch(`${url}/healthz`);
    await r.text();
  });
}

/** Median time of each traced step: `at` from the client's send, `gap` from the step before it on the path. */
export interface StepTiming {
  step: TraceStep;
  at: number;
  gap: number;
  /** Calls in which the step was seen. */
  seen: number;
}

/**
 * Runs `call` `n` times, one at a time, against a traced gateway build and an agent started with
 * `HOTPATH_TRACE=1`, and lines up the steps each call printed (src/contracts/trace.ts): where the wall
 * time of one call goes, step by step. Timestamps are the machine's clock in every process.
 */
export async function traceSteps(n: number, call: () => Promise<unknown>, logs: (() => string)[]): Promise<StepTiming[]> {
  // The MCP SDK client fetches with the global fetch: note when each response body's last byte arrives.
  let lastBodyEnd = 0;
  const plain = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const res = await plain(input, init);
    if (!res.body) return res;
    const end = new TransformStream<Uint8Array, Uint8Array>({ flush: () => void (lastBodyEnd = Date.now()) });
    return new Response(res.body.pipeThrough(end), { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  try {
    return await traceEach(n, call, logs, () => lastBodyEnd);
  } finally {
    globalThis.fetch = plain;
  }
}

async function traceEach(n: number, call: () => Promise<unknown>, logs: (() => string)[], bodyEnd: () => number): Promise<StepTiming[]> {
  const perStep = new Map<TraceStep, { at: number[]; gap: number[] }>();
  for (let i = 0; i < n; i++) {
    const from = logs.map((l) => l().length);
    const t0 = Date.now();
    await call();
    const t1 = Date.now();
    // The gateway's lines come through wrangler's log pipe: give them a moment.
    await new Promise((r) => setTimeout(r, 150));
    const seen = new Map<TraceStep, number>([
      ['client.send', t0],
      ['client.done', t1],
    ]);
    if (bodyEnd() >= t0) seen.set('client.body_end', bodyEnd());
    const re = new RegExp(`${TRACE_PREFIX} ([a-z_.]+) (\\d+)`, 'g');
    for (const m of logs
      .map((l, k) => l().slice(from[k]))
      .join('\n')
      .matchAll(re)) {
      const step = m[1] as TraceStep;
      if (TRACE_STEPS.includes(step) && !seen.has(step)) seen.set(step, Number(m[2]));
    }
    let prev = t0;
    for (const step of TRACE_STEPS) {
      const at = seen.get(step);
      if (at === undefined) continue;
      const e = perStep.get(step) ?? { at: [], gap: [] };
      e.at.push(at - t0);
      e.gap.push(at - prev);
      perStep.set(step, e);
      prev = at;
    }
  }
  return TRACE_STEPS.filter((s) => perStep.has(s)).map((step) => {
    const e = perStep.get(step)!;
    return { step, at: p50(e.at), gap: p50(e.gap), seen: e.at.length };
  });
}

export function p50(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

if (import.meta.main) {
  const trace = process.argv.includes('--trace');
  const n = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 50);
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' }, trace });
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
  const agentEnv: Record<string, string> = trace ? { HOTPATH_TRACE: '1' } : {};
  const agent = startAgent(gw, {
    token: await gw.token({ team: 'hot', scopes: ['agent'] }),
    root,
    sandbox: 'none',
    capacity: 4,
    agentId: 'hot',
    env: agentEnv,
  });
  try {
    await agent.ready;
    const c = await gw.mcp('hot', ['execute']);
    const port = Number(new URL(gw.url).port);
    const calls = [
      ['tools/list', () => c.listTools()],
      ['policy_check', () => c.callTool({ name: 'policy_check', arguments: { command: 'true', args: [] } })],
      ['execute true', () => c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } })],
    ] as const;
    if (trace) {
      // Step by step, in wall time: median ms from the client's send, and from the step before.
      const logs = [gw.logs, agent.logs];
      for (const [name, call] of calls.slice(1)) {
        for (let i = 0; i < 5; i++) await call();
        console.log(`${name}: ${n} calls, one at a time (median ms; load average ${loadavg()[0].toFixed(1)})`);
        for (const s of await traceSteps(n, call, logs)) {
          console.log(`  ${s.step.padEnd(20)} at ${String(s.at).padStart(4)}  +${String(s.gap).padStart(3)}${s.seen < n ? `  (seen in ${s.seen} calls)` : ''}`);
        }
      }
    } else {
      const f = await benchHotPath(c, n);
      const floor = await healthzFloor(gw.url, n);
      console.log(`GET /healthz p50 ${p50(floor).toFixed(1)} ms (wrangler dev's per-request floor)`);
      console.log(`tools/list   p50 ${p50(f.toolsList).toFixed(1)} ms`);
      console.log(`policy_check p50 ${p50(f.policyCheck).toFixed(1)} ms`);
      console.log(`execute true p50 ${p50(f.execute).toFixed(1)} ms`);
      // CPU per call and process: what each part of the path costs, whatever else loads the machine.
      for (const [name, call] of calls) {
        const cpu = await cpuPerCall(n, call, port, agent.proc.pid);
        console.log(
          `${name.padEnd(12)} CPU per call: client ${cpu.client.toFixed(2)} ms, gateway ${cpu.gateway?.toFixed(2)} ms (+ wrangler's local proxy ${cpu.devProxy?.toFixed(2)} ms), agent (with its children) ${cpu.agent?.toFixed(2)} ms`,
        );
      }
      console.log(
        `load average ${loadavg()
          .map((x) => x.toFixed(1))
          .join(' ')}`,
      );
    }
    await c.close();
  } finally {
    await agent.stop();
    await gw.stop();
    rmSync(root, { recursive: true, force: true });
  }
}
