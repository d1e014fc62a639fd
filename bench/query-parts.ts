/**
 * query_output over the same ~88 MB artifact (`seq 1 11000000`) stored two ways: in one PUT, and as an
 * R2 multipart upload (the agent's default 64 MiB parts). Locally the R2 emulation reads a multipart
 * object part by part, which is what this separates from the search itself.
 * Run alone: `node bench/query-parts.ts`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';
const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
const pol = {
  ...DEFAULT_POLICY,
  limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: 600_000, maxArtifactBytes: 1024 * 1024 * 1024 },
  executables: { allow: [...DEFAULT_POLICY.executables.allow, 'seq'] },
};
type Q = { artifact_handle?: string; totalBytes?: number; matchCount?: number };
const roots: string[] = [];
for (const [team, part] of [
  ['single', 99_000_000],
  ['multi', 64 * 1024 * 1024],
] as const) {
  await gw.putPolicy(team, pol);
  const agent = startAgent(gw, {
    token: await gw.token({ team, scopes: ['agent'] }),
    root: roots[roots.push(mkdtempSync(join(tmpdir(), 'gatehouse-bench-'))) - 1],
    sandbox: 'none',
    capacity: 2,
    agentId: team,
    extraArgs: ['--max-artifact-bytes', String(1024 ** 3), '--artifact-part-bytes', String(part)],
  });
  await agent.ready;
  const c = await gw.mcp(team, ['execute', 'artifacts:read']);
  const big = await c.callTool({ name: 'execute', arguments: { command: 'seq', args: ['1', '11000000'], timeout_ms: 300_000 } }, undefined, {
    timeout: 600_000,
  });
  const handle = (big.structuredContent as Q).artifact_handle;
  // A term that occurs once and one that never does: the whole artifact is read either way.
  for (const term of ['1234567', '12345678']) {
    const ms: number[] = [];
    let r: Q = {};
    for (let i = 0; i < 3; i++) {
      const t = performance.now();
      const q = await c.callTool({ name: 'query_output', arguments: { artifactHandle: handle, queryTerms: [term], contextLines: 2 } }, undefined, {
        timeout: 300_000,
      });
      ms.push(performance.now() - t);
      r = q.structuredContent as Q;
    }
    console.log(
      `${team === 'single' ? 'one PUT  ' : 'multipart'} ${term.padEnd(8)} ${ms.map((x) => x.toFixed(0)).join(' / ')} ms (${r.totalBytes} bytes, ${r.matchCount} matching lines)`,
    );
  }
  await c.close();
  await agent.stop();
}
await gw.stop();
for (const d of roots) rmSync(d, { recursive: true, force: true });
process.exit(0);
