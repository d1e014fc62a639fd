/**
 * Script mode against Cloudflare's per-request limits, with the real gateway (wrangler dev) and a
 * real agent. The gateway is configured for the Workers Free plan (GATEHOUSE_WORKERS_PLAN = "free":
 * 50 subrequests per request), so a script's subprocess cap comes from the plan, not the policy.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { PRESETS } from '../../src/policy/presets.ts';
import { effectiveSubprocessCap } from '../../src/script/request-budget.ts';
import { EXECUTE_COST } from '../../src/mcp/tools/execute.ts';
import { batchOfScripts, postBatch, toolCalls } from '../support/script-batch.ts';

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
  it("caps a script's subprocesses below the plan's limit and says which limit, which plan and how many ran", async () => {
    const cap = effectiveSubprocessCap('free', 1000, 0);
    expect(cap).toBe(11);
    const r = await client.callTool(
      {
        name: 'run_script',
        arguments: {
          code: 'const out = []; for (let i = 0; i < 20; i++) { try { await gatehouse.exec("true", []); out.push("ran"); } catch (e) { out.push(e.message); } } return out;',
        },
      },
      undefined,
      { timeout: 180_000 },
    );
    expect(r.isError).toBeFalsy();
    const s = r.structuredContent as { result: string[]; scriptId: string; subprocesses: { count: number; cap: number } };
    expect(s.result.filter((x) => x === 'ran')).toHaveLength(cap);
    expect(s.result.slice(0, cap).every((x) => x === 'ran')).toBe(true);
    const message =
      'subprocess: limit reached — Cloudflare allows 50 subrequests per request on the Workers Free plan (GATEHOUSE_WORKERS_PLAN = "free"); ' +
      `each subprocess costs up to 3 (D1, Durable Object) and this script's output and audit need their share, so it may start at most ${cap} subprocesses in one request (script.subprocess.maxCount allows more); it has started ${cap}`;
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

describe('one request, several scripts (a JSON-RPC batch)', () => {
  it('the scripts of one batch share its 50 subrequests: those that do not fit are refused before they start', async () => {
    const answers = await batchOfScripts(gw, TEAM, 5);
    const ran = answers.filter((a) => !a.result.isError);
    const refused = answers.filter((a) => a.result.isError);
    // Each script holds 12 of the 50 (start 2, end 9, a refusal's audit row 1) after the request's own 4: three fit.
    expect(ran).toHaveLength(3);
    for (const a of ran) expect(a.result.structuredContent.result).toBe(a.id);
    expect(refused).toHaveLength(2);
    for (const a of refused) {
      expect(a.result.structuredContent.error?.code).toBe('limit_reached');
      expect(a.result.structuredContent.error?.message).toMatch(
        /^Error: subrequest limit: Cloudflare allows 50 subrequests per request on the Workers Free plan \(GATEHOUSE_WORKERS_PLAN = "free"\); this request has \d+ left and a script needs 12 for its start, output and audit; send this call in its own request$/,
      );
    }
  }, 120_000);
});

describe('one request, several execute calls (a JSON-RPC batch)', () => {
  const perExecute = EXECUTE_COST.subrequests;
  // The request's own 4, then up to `perExecute` per execute call: this many fit in 50.
  const fit = Math.floor((50 - 4) / perExecute);

  it('refuses a batch whose calls cannot all fit in 50 subrequests, whole and before any call runs, saying how many would', async () => {
    const jobsBefore = await jobCount();
    const r = await postBatch(gw, TEAM, toolCalls('execute', { command: 'true', args: [] }, fit + 1));
    expect(r.status).toBe(400);
    const message = (JSON.parse(r.body) as { error: { code: number; message: string } }).error;
    expect(message.code).toBe(-32600);
    expect(message.message).toContain(
      `the batch's calls may need up to ${4 + (fit + 1) * perExecute} subrequests and Cloudflare allows 50 subrequests per request on the Workers Free plan (GATEHOUSE_WORKERS_PLAN = "free")`,
    );
    expect(message.message).toContain(`at most ${fit} execute calls`);
    expect(await jobCount()).toBe(jobsBefore);
  }, 60_000);

  it('runs a batch that fits: every call gets its result', async () => {
    const r = await postBatch(gw, TEAM, toolCalls('execute', { command: 'echo', args: ['ok'] }, fit));
    expect(r.status).toBe(200);
    expect(r.answers).toHaveLength(fit);
    for (const a of r.answers) expect(a.result?.structuredContent).toMatchObject({ exit_code: 0, stdout: 'ok\n' });
  }, 120_000);

  it('scripts in a batch get what its other calls leave', async () => {
    // 4 + 2 execute calls leave 50 - 4 - 2 × perExecute for scripts, 12 each.
    const scripts = Math.floor((50 - 4 - 2 * perExecute) / 12);
    const r = await postBatch(gw, TEAM, [
      ...toolCalls('execute', { command: 'true', args: [] }, 2),
      ...toolCalls('run_script', { code: 'return 7' }, scripts + 1, 3),
    ]);
    expect(r.status).toBe(200);
    const ran = r.answers.filter((a) => a.id >= 3 && !a.result?.isError);
    const refused = r.answers.filter((a) => a.id >= 3 && a.result?.isError);
    expect(ran).toHaveLength(scripts);
    expect(refused).toHaveLength(1);
    expect(refused[0].result?.structuredContent.error?.code).toBe('limit_reached');
    for (const a of r.answers.filter((x) => x.id < 3)) expect(a.result?.structuredContent).toMatchObject({ exit_code: 0 });
  }, 120_000);
});

describe("a script's stdio server: every message is a subrequest of the script's request", () => {
  const attempt = (expr: string) => `try { return { ok: true, value: await ${expr} }; } catch (e) { return { ok: false, code: e.code, message: e.message }; }`;

  it('a call whose answer takes more reads than the request has left fails limit_reached and stops the server; a small one runs', async () => {
    copyFileSync(join(process.cwd(), 'test/e2e/fixtures/long-line-server.mjs'), join(root, 'long-line-server.mjs'));
    writeFileSync(join(root, '.mcp.json'), JSON.stringify({ mcpServers: { big: { command: 'node', args: ['long-line-server.mjs'] } } }));
    const open = PRESETS.open.policy;
    await gw.putPolicy(TEAM, {
      ...open,
      interactive: { ...open.interactive, enabled: false },
      script: { enabled: true, cpuMs: 5_000, servers: { default: 'allow' } },
    });
    const call = async (code: string) => {
      const r = await client.callTool({ name: 'run_script', arguments: { code } }, undefined, { timeout: 120_000 });
      return r.structuredContent as Record<string, any>;
    };
    // A ping: its messages fit in what the request has.
    expect((await call(`return (await servers.big.call('ping', {})).content[0].text`)).result).toBe('pong');
    // 3 MiB on one line is 12 reads of 256 KiB (3 subrequests each) besides the waits: more than 50 allow. The call
    // fails with the limit, the server is stopped, and the script goes on to say so.
    const out = await call(attempt(`servers.big.call('flood', { bytes: 3 * 1024 * 1024 })`));
    expect(out.result).toMatchObject({ ok: false, code: 'limit_reached' });
    expect(out.result.message).toMatch(
      /^servers\.big\.call: stdio server big: limit reached — Cloudflare allows 50 subrequests per request on the Workers Free plan \(GATEHOUSE_WORKERS_PLAN = "free"\) and this request has \d+ left \(this server call needs \d\); it was stopped$/,
    );
    // Nothing of the team keeps running: the server's job was stopped with the script.
    const token = await gw.token({ team: TEAM, scopes: ['admin'] });
    let running: unknown[] = [];
    for (let i = 0; i < 60; i++) {
      const res = await fetch(`${gw.url}/admin/v1/jobs?limit=200`, { headers: { Authorization: `Bearer ${token}` } });
      running = ((await res.json()) as { jobs: Array<{ state: string }> }).jobs.filter((j) => j.state === 'running' || j.state === 'queued');
      if (running.length === 0) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(running).toEqual([]);
  }, 240_000);
});

async function jobCount(): Promise<number> {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  const res = await fetch(`${gw.url}/admin/v1/jobs?limit=200`, { headers: { Authorization: `Bearer ${token}` } });
  return ((await res.json()) as { jobs: unknown[] }).jobs.length;
}
