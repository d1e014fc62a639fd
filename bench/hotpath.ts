/**
 * The governed hot path taken apart, end to end through the MCP SDK client (sandbox none):
 * `tools/list` (auth + a fresh MCP server, no storage), `list_runtimes`-free `policy_check`
 * (auth + policy read + one audit row), and `execute true` (everything). The differences say
 * where the per-call overhead goes; `bench/run.ts` prints them next to the bare spawn.
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
    if (!pid) return null;
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of /proc/<pid>/stat (utime, stime), in clock ticks of 10 ms.
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return null;
  }
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
    // The gateway's CPU per call: what the edge path costs, whatever else loads the machine.
    const port = Number(new URL(gw.url).port);
    for (const [name, call] of [
      ['execute true', () => c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } })],
      ['policy_check', () => c.callTool({ name: 'policy_check', arguments: { command: 'true', args: [] } })],
    ] as const) {
      const before = cpuMsOfListener(port);
      await timed(n, call);
      const after = cpuMsOfListener(port);
      if (before !== null && after !== null) console.log(`${name}: gateway CPU ${((after - before) / n).toFixed(2)} ms per call`);
    }
    await c.close();
  } finally {
    await agent.stop();
    await gw.stop();
    rmSync(root, { recursive: true, force: true });
  }
}
