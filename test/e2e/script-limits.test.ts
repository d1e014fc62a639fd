/**
 * Script mode against Cloudflare's per-request limits, with the real gateway (wrangler dev) and a
 * real agent. The gateway is configured for the Workers Free plan (GATEHOUSE_WORKERS_PLAN = "free":
 * 50 subrequests per request), so a script's subprocess cap comes from the plan, not the policy.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { effectiveSubprocessCap } from '../../src/script/request-budget.ts';

const TEAM = 'lim';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;

beforeAll(async () => {
  gw = await startGateway({ vars: { GATEHOUSE_WORKERS_PLAN: 'free' } });
  root = mkdtempSync(join(tmpdir(), 'gatehouse-scriptlim-'));
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: testSandbox(), capacity: 4, agentId: 'lim-agent' });
  await agent.ready;
  // The policy allows 1000 subprocesses per script: more than 50 subrequests can carry.
  await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, script: { enabled: true, cpuMs: 2_000, subprocess: { maxCount: 1000, maxTotalMs: 600_000 } } });
  client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
}, 180_000);

afterAll(async () => {
  await client?.close();
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('subrequests per request (Workers Free: 50)', () => {
  it('caps a script\'s subprocesses below the plan\'s limit and says which limit, which plan and how many ran', async () => {
    const cap = effectiveSubprocessCap('free', 1000, 0);
    expect(cap).toBe(8);
    const r = await client.callTool({
      name: 'run_script',
      arguments: { code: 'const out = []; for (let i = 0; i < 20; i++) { try { await gatehouse.exec("true", []); out.push("ran"); } catch (e) { out.push(e.message); } } return out;' },
    }, undefined, { timeout: 180_000 });
    expect(r.isError).toBeFalsy();
    const s = r.structuredContent as { result: string[]; scriptId: string; subprocesses: { count: number; cap: number } };
    expect(s.result.filter((x) => x === 'ran')).toHaveLength(cap);
    expect(s.result.slice(0, cap).every((x) => x === 'ran')).toBe(true);
    const message =
      'subprocess: limit reached — Cloudflare allows 50 subrequests per request on the Workers Free plan (GATEHOUSE_WORKERS_PLAN = "free"); ' +
      `each subprocess costs up to 4 (D1, Durable Object) and this script's output and audit need their share, so it may start at most ${cap} subprocesses in one request (script.subprocess.maxCount allows more); it has started ${cap}`;
    // Every later attempt is refused with the same message: never a platform exception mid-script.
    expect(s.result.slice(cap)).toEqual(Array(20 - cap).fill(message));
    expect(s.subprocesses).toMatchObject({ count: cap, cap });

    // The audit shows the subprocesses that ran and the refusal, linked to the script.
    const token = await gw.token({ team: TEAM, scopes: ['admin'] });
    const res = await fetch(`${gw.url}/admin/v1/audit?limit=200&tool=run_script`, { headers: { Authorization: `Bearer ${token}` } });
    const rows = ((await res.json()) as { entries: Array<Record<string, any>> }).entries;
    const children = rows.filter((e) => (e.parentJobId ?? e.parent_job_id) === s.scriptId);
    expect(children.filter((e) => e.decision === 'allowed')).toHaveLength(cap);
    const refused = children.filter((e) => e.decision === 'denied');
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(refused[0].reason).toContain('Workers Free plan');
  }, 240_000);

  it('a policy cap the plan can honour is the cap', async () => {
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, script: { enabled: true, cpuMs: 2_000, subprocess: { maxCount: 3, maxTotalMs: 600_000 } } });
    const r = await client.callTool({ name: 'run_script', arguments: { code: 'return 1' } });
    expect((r.structuredContent as { subprocesses: { cap: number } }).subprocesses.cap).toBe(3);
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, script: { enabled: true, cpuMs: 2_000, subprocess: { maxCount: 1000, maxTotalMs: 600_000 } } });
  }, 60_000);
});

describe('Dynamic Workers in flight per request (4 in a Worker request)', () => {
  it('a JSON-RPC batch of five run_script calls runs at most four at once and refuses the rest clearly', async () => {
    const token = await gw.token({ team: TEAM, scopes: ['execute'] });
    const batch = Array.from({ length: 5 }, (_, i) => ({
      jsonrpc: '2.0', id: i + 1, method: 'tools/call',
      params: { name: 'run_script', arguments: { code: `await sleep(1500); return ${i + 1};` } },
    }));
    const res = await fetch(`${gw.url}/mcp`, {
      method: 'POST', body: JSON.stringify(batch),
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-03-26' },
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    const answers = text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)) as {
      id: number; result: { isError?: boolean; structuredContent: { result?: number; error?: { code: string; message: string } } };
    });
    expect(answers.map((a) => a.id).sort()).toEqual([1, 2, 3, 4, 5]);
    const ran = answers.filter((a) => !a.result.isError);
    const refused = answers.filter((a) => a.result.isError);
    // The batch's calls run concurrently (each sleeps 1.5 s): four isolates in flight, the fifth refused.
    expect(ran).toHaveLength(4);
    for (const a of ran) expect(a.result.structuredContent.result).toBe(a.id);
    expect(refused).toHaveLength(1);
    expect(refused[0].result.structuredContent.error).toEqual({
      code: 'limit_reached',
      message: 'Error: too many scripts in one request: Cloudflare allows 4 Dynamic Workers in flight per Worker request and this request already runs 4 run_script calls; send this call in its own request (or at most 4 run_script calls per JSON-RPC batch)',
    });
    // Separate requests each have their own four: the refused call succeeds on its own.
    const again = await client.callTool({ name: 'run_script', arguments: { code: `return ${refused[0].id}` } });
    expect((again.structuredContent as { result: number }).result).toBe(refused[0].id);
  }, 120_000);
});
