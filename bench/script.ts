/**
 * Script mode against separate tool calls: the same 20 subprocesses (`true`) run as one
 * `run_script` call (20 × `gatehouse.exec('true', [])`) and as 20 `execute` calls from the
 * same MCP client. Each subprocess is the same governed job either way (policy, audit,
 * dispatch, sandbox); the script saves the client↔gateway round trips.
 *
 * `bench/run.ts` calls `benchScriptVsExecute`; `node bench/script.ts [samples]` runs it alone
 * against its own local gateway and agent (sandbox none, loopback only).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, type Gateway } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';

export const SUBPROCESSES = 20;
const SCRIPT = `for (let i = 0; i < ${SUBPROCESSES}; i++) { const r = await gatehouse.exec('true', []); if (r.exit_code !== 0) throw new Error('exit ' + r.exit_code); } return ${SUBPROCESSES};`;

export interface ScriptBench {
  /** Wall ms of one run_script call doing 20 subprocesses, per sample. */
  script: number[];
  /** Wall ms of 20 sequential execute calls, per sample. */
  calls: number[];
}

/** Turns script mode on for `team`, keeping the rest of its current policy. */
async function enableScripts(gw: Gateway, team: string): Promise<void> {
  const token = await gw.token({ team, scopes: ['admin'] });
  const res = await fetch(`${gw.url}/admin/v1/policy`, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`reading the policy of ${team} failed: ${res.status} ${await res.text()}`);
  const { policy } = (await res.json()) as { policy: Record<string, unknown> };
  await gw.putPolicy(team, { ...policy, script: { enabled: true, subprocess: { maxCount: SUBPROCESSES, maxTotalMs: 600_000 } } });
}

export async function benchScriptVsExecute(gw: Gateway, team: string, client: Client, samples: number): Promise<ScriptBench> {
  await enableScripts(gw, team);
  const once = async (): Promise<[number, number]> => {
    let t = performance.now();
    const r = await client.callTool({ name: 'run_script', arguments: { code: SCRIPT } }, undefined, { timeout: 300_000 });
    if (r.isError || (r.structuredContent as { result?: unknown }).result !== SUBPROCESSES) throw new Error(`run_script failed: ${JSON.stringify(r.content)}`);
    const script = performance.now() - t;
    t = performance.now();
    for (let i = 0; i < SUBPROCESSES; i++) {
      const e = await client.callTool({ name: 'execute', arguments: { command: 'true', args: [] } });
      if (e.isError) throw new Error(`execute failed: ${JSON.stringify(e.content)}`);
    }
    return [script, performance.now() - t];
  };
  await once(); // warm-up: the first isolate load and the first jobs pay one-time costs
  const out: ScriptBench = { script: [], calls: [] };
  for (let i = 0; i < samples; i++) {
    const [s, c] = await once();
    out.script.push(s);
    out.calls.push(c);
  }
  return out;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function standalone(): Promise<void> {
  const samples = Number(process.argv[2] ?? 5) || 5;
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-script-'));
  const team = 'b-script';
  await gw.putPolicy(team, { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 4 } });
  const agent = startAgent(gw, { token: await gw.token({ team, scopes: ['agent'] }), root, sandbox: 'none', capacity: 4, agentId: 'bench-script' });
  try {
    await agent.ready;
    const client = await gw.mcp(team, ['execute', 'artifacts:read']);
    const r = await benchScriptVsExecute(gw, team, client, samples);
    await client.close();
    const s = median(r.script);
    const c = median(r.calls);
    console.log(`${SUBPROCESSES} × true, sandbox none, ${samples} samples (median wall time):`);
    console.log(`  one run_script call:     ${s.toFixed(1)} ms`);
    console.log(`  ${SUBPROCESSES} execute calls:       ${c.toFixed(1)} ms`);
    console.log(`  ratio execute / script:  ${(c / s).toFixed(2)}×`);
  } finally {
    await agent.stop();
    await gw.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  standalone().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
