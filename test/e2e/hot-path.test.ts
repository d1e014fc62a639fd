/**
 * The governed hot path reads less storage per call (the team policy comes from a per-isolate
 * cache keyed by the policy version the auth query returns; the team's DO writes the job and audit
 * rows in the background; submit and follow are one hop). These tests attack what that must not
 * break: a policy change or a revocation takes effect on the very next call, with the cache warm;
 * every call's audit row reaches D1, even in bursts past one invocation's D1 query budget.
 * The gateway runs as on Workers Free (50 D1 queries per invocation) with a slow heartbeat, so a
 * copy that waited for the heartbeat's alarm would be seen waiting.
 * Real `wrangler dev`, a real agent (sandbox none: this file is about the edge), the MCP SDK client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectMcp, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

const TEAM = 'hot';
const HEARTBEAT_MS = 20_000;
let gw: Gateway;
let agent: AgentProcess;
let root: string;

async function admin(method: string, path: string) {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  const r = await fetch(`${gw.url}/admin/v1${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
  return { status: r.status, body: (await r.json()) as Record<string, any> };
}

beforeAll(async () => {
  gw = await startGateway({ vars: { GATEHOUSE_WORKERS_PLAN: 'free', HEARTBEAT_MS: String(HEARTBEAT_MS) } });
  root = mkdtempSync(join(tmpdir(), 'gatehouse-hot-'));
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: 'none', capacity: 4, agentId: 'hot-agent' });
  await agent.ready;
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  await gw?.stop();
  rmSync(root, { recursive: true, force: true });
});

describe('governed hot path with the policy cache', () => {
  it('a policy change applies to the next call of a client whose previous calls warmed the cache', async () => {
    const c = await gw.mcp(TEAM, ['execute']);
    const echo = () => c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['hi'] } });
    for (let i = 0; i < 3; i++) expect((await echo()).isError).toBeFalsy();
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, executables: { allow: DEFAULT_POLICY.executables.allow.filter((e) => e !== 'echo') } });
    const denied = await echo();
    expect(denied.isError).toBe(true);
    expect(JSON.stringify(denied.content)).toMatch(/echo/);
    // And back: the cache never serves the older document either.
    await gw.putPolicy(TEAM, DEFAULT_POLICY);
    const again = await echo();
    expect(again.isError).toBeFalsy();
    expect((again.structuredContent as { stdout: string }).stdout).toBe('hi\n');
    await c.close();
  });

  it('a revoked token is refused on its next request, right after successful calls', async () => {
    const jti = `hot-${crypto.randomUUID()}`;
    const token = await gw.token({ team: TEAM, scopes: ['execute'], jti });
    const c = await connectMcp(gw.mcpUrl, token);
    for (let i = 0; i < 2; i++) expect((await c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } })).isError).toBeFalsy();
    expect((await admin('DELETE', `/tokens/${jti}?unrecorded=true`)).status).toBe(200);
    await expect(c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } })).rejects.toThrow(/revoked|401/);
    await c.close().catch(() => {});
  });

  it('an allowed call leaves its job row and one completed audit row (written together)', async () => {
    const c = await gw.mcp(TEAM, ['execute']);
    const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['audited'] } });
    expect(r.isError).toBeFalsy();
    const jobId = (r.structuredContent as { job_id: string }).job_id;
    expect(jobId).toBeTruthy();
    await c.close();
    let rows: any[] = [];
    for (let i = 0; i < 50; i++) {
      rows = (await admin('GET', '/audit?limit=50')).body.entries as any[];
      const mine = rows.filter((e) => JSON.stringify(e).includes('audited'));
      if (mine.length === 1 && /exit 0/.test(JSON.stringify(mine[0]))) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    const mine = rows.filter((e) => JSON.stringify(e).includes('audited'));
    expect(mine).toHaveLength(1);
    expect(JSON.stringify(mine[0])).toMatch(/exit 0/);
    expect(JSON.stringify(mine[0])).toContain(jobId);
  });

  it('a job that keeps running shows as running in the audit log while it runs (its start is copied a moment later), then ends there', async () => {
    const c = await gw.mcp(TEAM, ['execute']);
    const r = await c.callTool({ name: 'execute', arguments: { command: 'sleep', args: ['3'], background: true } });
    expect(r.isError).toBeFalsy();
    const jobId = (r.structuredContent as { job_id: string }).job_id;
    await c.close();
    const rowOf = async () => ((await admin('GET', '/audit?limit=50')).body.entries as any[]).find((e) => JSON.stringify(e).includes(jobId));
    const seen: string[] = [];
    for (let i = 0; i < 100; i++) {
      const row = await rowOf();
      const status = String(row?.exit_status ?? row?.exitStatus ?? '');
      if (status && seen.at(-1) !== status) seen.push(status);
      if (status === 'exit 0') break;
      await new Promise((res) => setTimeout(res, 100));
    }
    // The row went from running to its end: the delayed copy of the start did not skip or overwrite anything.
    expect(seen).toContain('running');
    expect(seen.at(-1)).toBe('exit 0');
    expect(seen.indexOf('running')).toBeLessThan(seen.indexOf('exit 0'));
  });

  it("a burst of calls past one invocation's D1 query budget: every audit row reaches D1 within seconds, not one budget per heartbeat", async () => {
    const team = 'burst';
    // No agent: the jobs wait in the queue, so only their creation is copied (4 D1 statements each).
    await gw.putPolicy(team, { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, queueWaitMs: 60_000 } });
    const clients = await Promise.all(Array.from({ length: 4 }, () => gw.mcp(team, ['execute'])));
    const ids: string[] = [];
    const started = Date.now();
    await Promise.all(
      clients.map(async (c) => {
        for (let i = 0; i < 15; i++) {
          const r = await c.callTool({ name: 'execute', arguments: { command: 'true', args: [], background: true } });
          expect(r.isError).toBeFalsy();
          ids.push((r.structuredContent as { job_id: string }).job_id);
        }
      }),
    );
    expect(ids).toHaveLength(60); // 60 × 4 statements: ten passes of Workers Free's share
    const token = await gw.token({ team, scopes: ['admin'] });
    let seen = new Set<string>();
    for (let i = 0; i < 80 && seen.size < ids.length; i++) {
      const r = await fetch(`${gw.url}/admin/v1/audit?tool=execute&limit=200`, { headers: { Authorization: `Bearer ${token}` } });
      seen = new Set(
        ((await r.json()) as { entries: Array<{ jobId: string; exitStatus: string }> }).entries.filter((e) => e.exitStatus === 'queued').map((e) => e.jobId),
      );
      if (seen.size < ids.length) await new Promise((res) => setTimeout(res, 100));
    }
    expect(ids.filter((id) => !seen.has(id))).toEqual([]);
    expect(Date.now() - started).toBeLessThan(HEARTBEAT_MS);
    await Promise.all(clients.map((c) => c.close()));
  }, 60_000);
});
