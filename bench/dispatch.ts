/**
 * `node bench/dispatch.ts`: the scheduler under contention. 64 MCP clients call `execute sleep`
 * at once against ONE capacity-4 agent (sandbox none, so the figure is the edge's, not gVisor's),
 * with the team's queueWaitMs at 30 s. Reports errors (want 0), total time, throughput, and
 * whether jobs started in the order they were submitted (FIFO). Loopback only.
 *
 * Usage: node bench/dispatch.ts [clients=64] [sleepSeconds=0.2]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';

const CLIENTS = Number(process.argv[2] ?? 64);
const SLEEP = process.argv[3] ?? '0.2';
const TEAM = 'bench-dispatch';

async function main() {
  const gw = await startBenchGateway();
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-dispatch-'));
  const agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: 'none', capacity: 4, agentId: 'bench-agent' });
  try {
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 4, queueWaitMs: 30_000 } });
    await agent.ready;
    const clients = await Promise.all(Array.from({ length: CLIENTS }, () => gw.mcp(TEAM, ['execute', 'artifacts:read'])));
    const errors: string[] = [];
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (c, i) => {
        // Staggered by a millisecond each so the submission order is known.
        await new Promise((r) => setTimeout(r, i));
        const r = await c.callTool({ name: 'execute', arguments: { command: 'sleep', args: [SLEEP] } }, undefined, {
          timeout: 120_000,
        });
        if (r.isError) errors.push((r.content as { text: string }[])[0]?.text ?? 'error');
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    // Start order, from the team's job list (oldest first by start time).
    const adminToken = await gw.token({ team: TEAM, scopes: ['admin'] });
    const res = await fetch(`${gw.url}/admin/v1/jobs?limit=200`, { headers: { Authorization: `Bearer ${adminToken}` } });
    const jobs = ((await res.json()) as { jobs: { job_id: string; created_at: number; started_at: number | null }[] }).jobs;
    // A FIFO violation: a job that started before a job submitted earlier than it (ms clock, so ties are not counted).
    const overtakes = jobs.filter((j) => jobs.some((o) => o.created_at < j.created_at && (o.started_at ?? Infinity) > (j.started_at ?? Infinity))).length;
    console.log(`clients: ${CLIENTS}, one agent of capacity 4, execute sleep ${SLEEP}, queueWaitMs 30000`);
    console.log(`errors: ${errors.length}${errors.length ? ` (first: ${errors[0]})` : ''}`);
    console.log(
      `wall time: ${seconds.toFixed(2)} s (ideal ${(Math.ceil(CLIENTS / 4) * Number(SLEEP)).toFixed(2)} s of sleeping), ${(CLIENTS / seconds).toFixed(1)} jobs/s`,
    );
    console.log(`FIFO: ${overtakes} of ${jobs.length} jobs started before a job submitted earlier`);
    await Promise.all(clients.map((c) => c.close()));
  } finally {
    await agent.stop();
    await gw.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
