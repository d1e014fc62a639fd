/**
 * CPU per job on the default gVisor path (a reused sandbox, `sandbox.reuse`) with and without a
 * per-task `workspace` (the reuse pool keyed by workspace): `execute true` one call at a time
 * through the MCP SDK client, against a local gateway and a gVisor agent. The agent's figure is its
 * whole process tree (runsc sentries and gofers of live sandboxes included, read from /proc), since
 * a reused sandbox outlives the calls measured.
 *
 * `node bench/workspace-cpu.ts [n]` (default 40); needs runsc. Figures go in bench/RESULTS.md.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';
import { cpuMsOfGateway, cpuMsOfPid } from './hotpath.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';

/** CPU (ms) so far of `pid` and every live descendant, each with its reaped children. */
function treeCpuMs(pid: number): number {
  const out = execFileSync('ps', ['-e', '-o', 'pid=,ppid='], { encoding: 'utf8' });
  const kids = new Map<number, number[]>();
  for (const line of out.trim().split('\n')) {
    const [p, pp] = line.trim().split(/\s+/).map(Number);
    kids.set(pp, [...(kids.get(pp) ?? []), p]);
  }
  let total = 0;
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop()!;
    total += cpuMsOfPid(p, true) ?? 0;
    stack.push(...(kids.get(p) ?? []));
  }
  return total;
}

const n = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 40);
const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-ws-'));
const stateDir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-ws-state-'));
await gw.putPolicy('wsb', { ...DEFAULT_POLICY, sandbox: { minimum: 'gvisor', reuse: { jobs: 1000, seconds: 3600 } } });
const agent = startAgent(gw, {
  token: await gw.token({ team: 'wsb', scopes: ['agent'] }),
  root,
  sandbox: 'gvisor',
  capacity: 2,
  agentId: 'wsb',
  extraArgs: ['--state-dir', stateDir],
});
try {
  await agent.ready;
  const c = await gw.mcp('wsb', ['execute']);
  const port = Number(new URL(gw.url).port);
  const rows: [string, Record<string, unknown>][] = [
    ['execute true (shared workspace)', { command: 'true', args: [] }],
    ['execute true, workspace "bench"', { command: 'true', args: [], workspace: 'bench' }],
  ];
  for (const [name, args] of rows) {
    const call = async () => {
      const r = await c.callTool({ name: 'execute', arguments: args });
      if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`);
    };
    for (let i = 0; i < 5; i++) await call();
    const c0 = process.cpuUsage();
    const g0 = cpuMsOfGateway(port).worker ?? 0;
    const a0 = treeCpuMs(agent.proc.pid!);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await call();
    const wall = (performance.now() - t0) / n;
    const client = (process.cpuUsage(c0).user + process.cpuUsage(c0).system) / 1000 / n;
    const gateway = ((cpuMsOfGateway(port).worker ?? 0) - g0) / n;
    const agentCpu = (treeCpuMs(agent.proc.pid!) - a0) / n;
    console.log(
      `${name.padEnd(34)} CPU per job: agent tree ${agentCpu.toFixed(1)} ms, gateway ${gateway.toFixed(1)} ms, client ${client.toFixed(1)} ms; wall ${wall.toFixed(0)} ms`,
    );
  }
  console.log(`${n} jobs each; load average ${loadavg()[0].toFixed(1)}`);
  await c.close();
} finally {
  await agent.stop();
  await gw.stop();
  rmSync(root, { recursive: true, force: true });
  rmSync(stateDir, { recursive: true, force: true });
}
