/**
 * `execute true` back to back and after an idle second, for one driver: what an AI agent's
 * pauses between calls cost (bench/RESULTS.md, "After an idle moment"). `node bench/pause.ts [none|bwrap]`
 * starts a local gateway and one agent, then runs two rounds of 40 calls back to back and 12
 * calls each after a 1 s pause, and prints each round's p50s.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';

const kind = (process.argv[2] ?? 'none') as 'none' | 'bwrap';
if (kind !== 'none' && kind !== 'bwrap') throw new Error(`driver must be none or bwrap, not ${kind}`);
const BACK_TO_BACK = 40;
const PAUSED = 12;
const PAUSE_MS = 1000;

const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
const agent = startAgent(gw, { token: await gw.token({ team: 'b-pause', scopes: ['agent'] }), root, sandbox: kind, capacity: 4, agentId: 'b-pause' });
try {
  await agent.ready;
  const c = await gw.mcp('b-pause', ['execute']);
  const call = async () => {
    const t = performance.now();
    const r = await c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } });
    if (r.isError) throw new Error(`execute failed: ${JSON.stringify(r.content).slice(0, 300)}`);
    return performance.now() - t;
  };
  const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (let i = 0; i < 5; i++) await call(); // warm-up
  for (let round = 1; round <= 2; round++) {
    const b2b: number[] = [];
    for (let i = 0; i < BACK_TO_BACK; i++) b2b.push(await call());
    const paused: number[] = [];
    for (let i = 0; i < PAUSED; i++) {
      await new Promise((r) => setTimeout(r, PAUSE_MS));
      paused.push(await call());
    }
    console.log(
      `${kind}, round ${round}: back to back p50 ${p50(b2b).toFixed(1)} ms (${BACK_TO_BACK} calls), after a ${PAUSE_MS / 1000} s pause p50 ${p50(paused).toFixed(1)} ms (${PAUSED} calls)`,
    );
  }
  await c.close();
} finally {
  await agent.stop();
  await gw.stop();
  rmSync(root, { recursive: true, force: true });
}
