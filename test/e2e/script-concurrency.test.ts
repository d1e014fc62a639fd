/**
 * A script's subprocess caps hold for subprocesses started at once (`Promise.all`), through the
 * real gateway (`wrangler dev`, run_script) and a real agent. Each subprocess reserves its time
 * before it starts (src/script/subprocess-budget.ts): under `maxTotalMs: 2000`, four concurrent
 * `sleep 3` used to get 2000 ms each and report ~9 s in all.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

/**
 * What a subprocess's settled time may exceed its reservation by: the governed path around the
 * process, which its timeout does not bound (policy read, job row, dispatch to the agent, sandbox
 * start, the kill at the timeout, artifact upload, result relay). Measured here at ~270 ms per
 * subprocess (9090 ms = 4 × 2000 + 4 × 272 before the fix); 3000 ms leaves ten times that for a
 * loaded machine and stays well under what a second concurrent subprocess would add.
 */
const SETTLE_MARGIN_MS = 3000;

const TEAM = 'conc';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;

type Outcome = { ran: true; timedOut: boolean } | { ran: false; message: string };
interface ScriptResult {
  result: Outcome[];
  subprocesses: { count: number; totalMs: number };
}

const setCaps = (subprocess: { maxCount: number; maxTotalMs: number }) =>
  gw.putPolicy(TEAM, { ...DEFAULT_POLICY, script: { enabled: true, cpuMs: 2_000, subprocess } });

/** A script that starts `n` copies of `gatehouse.exec('sleep', [seconds], opts)` at once and reports each one's outcome. */
async function concurrently(n: number, seconds: number, opts: Record<string, unknown> = {}): Promise<ScriptResult> {
  const code = `
    const one = async () => {
      try { const r = await gatehouse.exec('sleep', ['${seconds}'], ${JSON.stringify(opts)}); return { ran: true, timedOut: r.timed_out }; }
      catch (e) { return { ran: false, message: e.message }; }
    };
    return await Promise.all(Array.from({ length: ${n} }, one));`;
  const r = await client.callTool({ name: 'run_script', arguments: { code } }, undefined, { timeout: 180_000 });
  expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
  return r.structuredContent as unknown as ScriptResult;
}

beforeAll(async () => {
  gw = await startGateway();
  root = mkdtempSync(join(tmpdir(), 'gatehouse-conc-'));
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: testSandbox(), capacity: 4, agentId: 'conc-agent' });
  await agent.ready;
  client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
}, 180_000);

afterAll(async () => {
  await client?.close();
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('script.subprocess.maxTotalMs with subprocesses started at once', () => {
  it.each([
    { maxTotalMs: 2000, seconds: 3 },
    { maxTotalMs: 1000, seconds: 5 },
  ])(
    'Promise.all of 4 × sleep $seconds under maxTotalMs $maxTotalMs: one gets the whole cap as its timeout, the others are refused',
    async ({ maxTotalMs, seconds }) => {
      await setCaps({ maxCount: 50, maxTotalMs });
      const s = await concurrently(4, seconds);
      const ran = s.result.filter((o) => o.ran);
      const refused = s.result.filter((o): o is Extract<Outcome, { ran: false }> => !o.ran);
      expect(ran).toEqual([{ ran: true, timedOut: true }]);
      expect(refused).toHaveLength(3);
      for (const o of refused) {
        expect(o.message).toMatch(
          new RegExp(
            `^subprocess: limit reached — this script's subprocesses already ran \\d+ ms and the 1 still running hold ${maxTotalMs} ms of the ${maxTotalMs} ms allowed \\(script\\.subprocess\\.maxTotalMs\\), so no time is left`,
          ),
        );
      }
      expect(s.subprocesses.count).toBe(1);
      expect(s.subprocesses.totalMs).toBeLessThanOrEqual(maxTotalMs + SETTLE_MARGIN_MS);
    },
    240_000,
  );

  it('subprocesses with a smaller timeoutMs run side by side until the cap is reserved; the last gets what is left', async () => {
    await setCaps({ maxCount: 50, maxTotalMs: 2000 });
    const s = await concurrently(4, 3, { timeoutMs: 800 });
    const ran = s.result.filter((o) => o.ran);
    // 800 + 800 + the 400 left: three run (and time out), the fourth finds nothing left.
    expect(ran).toEqual([
      { ran: true, timedOut: true },
      { ran: true, timedOut: true },
      { ran: true, timedOut: true },
    ]);
    expect(s.result.filter((o) => !o.ran)).toHaveLength(1);
    expect(s.subprocesses.count).toBe(3);
    expect(s.subprocesses.totalMs).toBeLessThanOrEqual(2000 + 3 * SETTLE_MARGIN_MS);
  }, 240_000);
});

describe('script.subprocess.maxCount with subprocesses started at once', () => {
  it('Promise.all of 4 under maxCount 2: two run, two are refused naming the cap', async () => {
    await setCaps({ maxCount: 2, maxTotalMs: 600_000 });
    const s = await concurrently(4, 1);
    expect(s.result.filter((o) => o.ran)).toEqual([
      { ran: true, timedOut: false },
      { ran: true, timedOut: false },
    ]);
    expect(s.result.filter((o) => !o.ran)).toEqual(
      Array(2).fill({ ran: false, message: 'subprocess: limit reached — a script may start at most 2 subprocesses (script.subprocess.maxCount)' }),
    );
    expect(s.subprocesses.count).toBe(2);
  }, 240_000);
});
