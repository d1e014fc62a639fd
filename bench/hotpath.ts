/**
 * The governed hot path taken apart, end to end through the MCP SDK client (sandbox none):
 * `tools/list` (auth + a fresh MCP server, no storage), `list_runtimes`-free `policy_check`
 * (auth + policy read + one audit row), and `execute true` (everything). The differences say
 * where the per-call overhead goes; `bench/run.ts` prints them next to the bare spawn. The CPU
 * each process spends per call (client, gateway, agent with its children) says where the work
 * goes on a loaded machine, where wall time cannot.
 *
 * `node bench/hotpath.ts [n]` runs it alone against a fresh gateway and agent.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';

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
 * CPU time (ms, user + system) used so far by the process listening on `port` on 127.0.0.1 —
 * workerd for a `wrangler dev` gateway. null when it cannot be found (no `ss`, not Linux).
 */
export function cpuMsOfListener(port: number): number | null {
  try {
    const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
    const pid = /pid=(\d+)/.exec(out)?.[1];
    return pid ? cpuMsOfPid(Number(pid)) : null;
  } catch {
    return null;
  }
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
  /** The agent process and every process it started (sandbox, job, helpers). */
  agent: number | null;
}

/**
 * CPU (ms) each process spends per call, over `n` sequential calls: where the work of a call
 * goes, a figure that stays meaningful on a machine loaded by other processes (wall time does not).
 */
export async function cpuPerCall(n: number, call: () => Promise<unknown>, gatewayPort: number, agentPid?: number): Promise<CpuPerCall> {
  const c0 = process.cpuUsage();
  const g0 = cpuMsOfListener(gatewayPort);
  const a0 = agentPid ? cpuMsOfPid(agentPid, true) : null;
  for (let i = 0; i < n; i++) await call();
  const c = process.cpuUsage(c0);
  const g1 = cpuMsOfListener(gatewayPort);
  const a1 = agentPid ? cpuMsOfPid(agentPid, true) : null;
  return {
    client: (c.user + c.system) / 1000 / n,
    gateway: g0 !== null && g1 !== null ? (g1 - g0) / n : null,
    agent: a0 !== null && a1 !== null ? (a1 - a0) / n : null,
  };
}

export function p50(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

if (import.meta.main) {
  const n = Number(process.argv[2] ?? 50);
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
  const agent = startAgent(gw, { token: await gw.token({ team: 'hot', scopes: ['agent'] }), root, sandbox: 'none', capacity: 4, agentId: 'hot' });
  try {
    await agent.ready;
    const c = await gw.mcp('hot', ['execute']);
    const f = await benchHotPath(c, n);
    console.log(`tools/list   p50 ${p50(f.toolsList).toFixed(1)} ms`);
    console.log(`policy_check p50 ${p50(f.policyCheck).toFixed(1)} ms`);
    console.log(`execute true p50 ${p50(f.execute).toFixed(1)} ms`);
    // CPU per call and process: what each part of the path costs, whatever else loads the machine.
    const port = Number(new URL(gw.url).port);
    for (const [name, call] of [
      ['tools/list', () => c.listTools()],
      ['policy_check', () => c.callTool({ name: 'policy_check', arguments: { command: 'true', args: [] } })],
      ['execute true', () => c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } })],
    ] as const) {
      const cpu = await cpuPerCall(n, call, port, agent.proc.pid);
      console.log(`${name.padEnd(12)} CPU per call: client ${cpu.client.toFixed(2)} ms, gateway ${cpu.gateway?.toFixed(2)} ms, agent (with its children) ${cpu.agent?.toFixed(2)} ms`);
    }
    await c.close();
  } finally {
    await agent.stop();
    await gw.stop();
    rmSync(root, { recursive: true, force: true });
  }
}
