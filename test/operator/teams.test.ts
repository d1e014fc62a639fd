/**
 * A team's life cycle through a real gateway (`wrangler dev`, real agents with sandbox `none`, the
 * official MCP client), for the deployment's operators: created, used, suspended (its MCP calls, admin
 * calls and agent connections refused), resumed, suspended again and deleted — after which its tokens are
 * refused, its object holds only the deletion mark, R2 has no key under its prefix and no D1 row names it.
 * Who may: only an operator token minted offline; a team's admin can neither mint one nor use the routes.
 * Quotas: with jobsPerDay 2, the third execute is refused with quota_exceeded.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, startGateway, type AgentProcess, type Gateway } from '../e2e/harness.ts';
import { call } from '../e2e/fleet.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { TEAM_TABLES } from '../../src/store/teams.ts';
import { d1Rows, objectJobs, r2Keys } from '../support/emulator-state.ts';
import { rawAgent } from '../support/raw-agent.ts';
import { until } from '../support/until.ts';

const TEAM = 'life';
const METERED = 'metered';
const POLICY = {
  ...DEFAULT_POLICY,
  executables: { ...DEFAULT_POLICY.executables, allow: [...DEFAULT_POLICY.executables.allow, 'seq'] },
  limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: 60_000, queueWaitMs: 30_000 },
};
/** `seq 1 30000`: about 170 KB, over what the team's object keeps itself: its body goes to R2. */
const LARGE_N = 30_000;

let gw: Gateway;
let operator: string;
const agents: AgentProcess[] = [];
const roots: string[] = [];

const op = (method: string, path: string, body?: unknown, token = operator) =>
  fetch(`${gw.url}/operator/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const json = async (r: Response) => (await r.json()) as Record<string, any>;
const admin = (path: string, token: string, init: RequestInit = {}) =>
  fetch(`${gw.url}/admin/v1${path}`, { ...init, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', ...init.headers } });

async function agentFor(team: string): Promise<AgentProcess> {
  const root = mkdtempSync(join(tmpdir(), `gatehouse-${team}-`));
  roots.push(root);
  const a = startAgent(gw, { token: await gw.token({ team, scopes: ['agent'], subject: `agent-${team}` }), root, sandbox: 'none', agentId: `agent-${team}` });
  agents.push(a);
  await a.ready;
  return a;
}

async function agentConnected(team: string, token: string): Promise<void> {
  await until(
    async () => {
      const r = await admin('/agents', token);
      const list = ((await r.json()) as { agents?: { state: string }[] }).agents ?? [];
      return list.some((a) => a.state === 'connected');
    },
    60_000,
    `an agent of ${team} to connect`,
  );
}

/** The Durable Object database that holds job `jobId` (the team's object), found before the delete. */
function objectFileOf(jobId: string): string {
  const [row] = objectJobs(gw.stateDir, `id = '${jobId}'`);
  if (!row) throw new Error(`no object holds job ${jobId}`);
  return row.file;
}

function objectContents(file: string): { tables: string[]; keys: string[] } {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const tables = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`).all() as { name: string }[]).map(
      (r) => r.name,
    );
    const keys = tables.includes('_cf_KV') ? (db.prepare('SELECT key FROM _cf_KV').all() as { key: string }[]).map((r) => r.key) : [];
    const withRows = tables.filter((t) => t !== '_cf_KV' && (db.prepare(`SELECT COUNT(*) AS n FROM "${t}"`).get() as { n: number }).n > 0);
    return { tables: withRows, keys };
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  gw = await startGateway();
  operator = await gw.token({ team: 'ops', scopes: ['operator'], subject: 'op-alice' });
}, 120_000);

afterAll(async () => {
  for (const a of agents) await a.stop().catch(() => {});
  await gw?.stop();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

describe('who may', () => {
  it("a team's admin can neither mint an operator token nor use the operator routes", async () => {
    const adminToken = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'acme-admin' });
    const minted = await admin('/tokens', adminToken, { method: 'POST', body: JSON.stringify({ subject: 'sneaky', scopes: ['operator'] }) });
    expect(minted.status).toBe(403);
    const m = await json(minted);
    expect(m.error.code).toBe('forbidden');
    expect(m.error.message).toContain('"operator"');
    expect(m.error.message).toContain('gatehouse token bootstrap --scope operator');
    // Nor its agent or execute tokens, nor a signed-in owner's: the admin API mints operator for no one.
    const mixed = await admin('/tokens', adminToken, { method: 'POST', body: JSON.stringify({ subject: 'x', scopes: ['execute', 'operator'] }) });
    expect(mixed.status).toBe(403);

    const listed = await op('GET', '/teams', undefined, adminToken);
    expect(listed.status).toBe(403);
    expect((await json(listed)).error.code).toBe('insufficient_scope');
    // A team's token cannot suspend another team.
    const other = await op('POST', '/teams/someone/suspend', { reason: 'mine now' }, adminToken);
    expect(other.status).toBe(403);
  });

  it('the operator scope counts only on a token minted offline with the signing key', async () => {
    // A token of this gateway's key without the bootstrap minter (as the admin API would mint): refused.
    const unattributed = await gw.token({ team: 'ops', scopes: ['operator'], minter: null });
    const r = await op('GET', '/teams', undefined, unattributed);
    expect(r.status).toBe(403);
    expect((await json(r)).error.message).toContain('minted offline');
    const member = await gw.token({ team: 'ops', scopes: ['operator'], minter: { kind: 'member', memberId: 'm1', role: 'owner' } });
    expect((await op('GET', '/teams', undefined, member)).status).toBe(403);
    expect((await op('GET', '/teams')).status).toBe(200);
  });
});

describe("a team's life", () => {
  let teamAdmin: string;
  let c: Client;
  let jobId = '';
  let largeHandle = '';
  let lifeAgent: AgentProcess;

  it('is created by an operator (id rules, 409 when it exists), listed and shown with its status', async () => {
    const bad = await op('POST', '/teams', { id: 'Not_A_Team' });
    expect(bad.status).toBe(400);
    expect((await json(bad)).error.message).toContain('a team id is a lowercase letter or digit');
    const created = await op('POST', '/teams', { id: TEAM, note: 'the life-cycle test' });
    expect(created.status).toBe(201);
    expect((await json(created)).team).toMatchObject({ id: TEAM, status: 'active', createdBy: 'operator:op-alice', note: 'the life-cycle test' });
    const again = await op('POST', '/teams', { id: TEAM });
    expect(again.status).toBe(409);
    expect((await json(again)).error.message).toContain('exists');
    const list = await json(await op('GET', '/teams'));
    expect(list.teams.map((t: { id: string }) => t.id)).toContain(TEAM);
    const shown = await json(await op('GET', `/teams/${TEAM}`));
    expect(shown.team.status).toBe('active');
    expect(shown.usage.today).toEqual({ calls: 0, jobs: 0, jobSeconds: 0, egressBytes: 0 });
  });

  it('is used: jobs run, their usage is counted for the operator and for the team’s admins', async () => {
    teamAdmin = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'life-admin' });
    await gw.putPolicy(TEAM, POLICY);
    lifeAgent = await agentFor(TEAM);
    c = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    const small = await call(c, 'execute', { command: 'echo', args: ['hello'] });
    expect(small.r.isError, small.t).toBeFalsy();
    const large = await call(c, 'execute', { command: 'seq', args: ['1', String(LARGE_N)], timeout_ms: 50_000 });
    expect(large.r.isError, large.t).toBeFalsy();
    largeHandle = large.s.artifact_handle as string;
    jobId = (objectJobs(gw.stateDir, `artifact_handle = '${largeHandle}'`)[0]?.id as string) ?? '';
    expect(jobId).not.toBe('');
    expect(r2Keys(gw.stateDir).filter((k) => k.startsWith(`t/${TEAM}/`))).toContain(`t/${TEAM}/a/${largeHandle}/stdout`);

    const usage = (await json(await op('GET', `/teams/${TEAM}/usage`))).usage;
    expect(usage.today.jobs).toBe(2);
    expect(usage.today.calls).toBeGreaterThanOrEqual(2);
    expect(usage.thisMonth.jobs).toBeGreaterThanOrEqual(2);
    expect(usage.storageBytes).toBeGreaterThan(0);
    const own = await admin('/usage', teamAdmin);
    expect(own.status).toBe(200);
    expect((await json(own)).usage.today.jobs).toBe(2);
  }, 180_000);

  it('is suspended: MCP calls, admin calls and agents are refused with team_suspended; its data is kept', async () => {
    const r = await op('POST', `/teams/${TEAM}/suspend`, { reason: 'unpaid invoice' });
    expect(r.status).toBe(200);
    expect((await json(r)).team.status).toBe('suspended');
    // In effect when the call answered: the agent's socket is closed (4003, with the reason) and every call is refused.
    await until(async () => /4003[^\n]*unpaid invoice/.test(lifeAgent.logs()), 10_000, "the agent's socket to be closed");
    const adm = await admin('/tokens', teamAdmin);
    expect(adm.status).toBe(403);
    const body = await json(adm);
    expect(body.error.code).toBe('team_suspended');
    expect(body.error.message).toContain('unpaid invoice');
    const mcp = await fetch(gw.mcpUrl, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${await gw.token({ team: TEAM, scopes: ['execute'] })}`,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(mcp.status).toBe(403);
    expect(((await mcp.json()) as { error: { code: string } }).error.code).toBe('team_suspended');
    const agent = await fetch(`${gw.url}/agent/v1/connect`, { headers: { Authorization: `Bearer ${await gw.token({ team: TEAM, scopes: ['agent'] })}` } });
    expect(agent.status).toBe(403);
    await expect(rawAgent(gw.url, await gw.token({ team: TEAM, scopes: ['agent'] }))).rejects.toThrow();
    // Its data is kept: the job is still in the team's object.
    expect(objectJobs(gw.stateDir, `id = '${jobId}'`)).toHaveLength(1);
    expect((await op('POST', `/teams/${TEAM}/suspend`, { reason: 'again' })).status).toBe(409);
    // Not deleted while active … and not without the confirmation.
    expect((await op('DELETE', `/teams/${TEAM}`)).status).toBe(400);
  }, 60_000);

  it('is resumed: calls and jobs work again', async () => {
    const r = await op('POST', `/teams/${TEAM}/resume`);
    expect(r.status).toBe(200);
    expect((await admin('/tokens', teamAdmin)).status).toBe(200);
    await agentConnected(TEAM, teamAdmin);
    await c.close().catch(() => {});
    c = await gw.mcp(TEAM, ['execute']);
    const again = await call(c, 'execute', { command: 'echo', args: ['back'] });
    expect(again.r.isError, again.t).toBeFalsy();
    await c.close();
  }, 90_000);

  it('is deleted only when suspended, exported first; then nothing of it is left and its tokens are refused', async () => {
    const objectFile = objectFileOf(jobId);
    const active = await op('DELETE', `/teams/${TEAM}?confirm=${TEAM}`);
    expect(active.status).toBe(409);
    expect((await json(active)).error.message).toContain('suspend it first');
    expect((await op('POST', `/teams/${TEAM}/suspend`, { reason: 'closing the account' })).status).toBe(200);
    const d = await op('DELETE', `/teams/${TEAM}?confirm=${TEAM}`);
    const del = await json(d);
    expect(d.status, JSON.stringify(del)).toBe(200);
    expect(del.complete).toBe(true);
    expect(del.r2Deleted).toBeGreaterThanOrEqual(1);
    expect(del.export.object.rows).toBeGreaterThan(0);

    // The export is kept outside the team's prefix; nothing under it is left.
    const keys = r2Keys(gw.stateDir);
    expect(keys.filter((k) => k.startsWith(`t/${TEAM}/`))).toEqual([]);
    expect(keys).toContain(del.export.directory.key);
    expect(keys).toContain(del.export.object.key);

    // No D1 row names the team.
    for (const table of TEAM_TABLES) expect(d1Rows(gw.stateDir, table, `SELECT * FROM ${table} WHERE team = '${TEAM}'`), table).toEqual([]);
    expect(d1Rows(gw.stateDir, 'teams', `SELECT * FROM teams WHERE id = '${TEAM}'`)).toEqual([]);

    // Its tokens are refused — old and newly minted alike — and the object they reach stays empty but for the deletion mark.
    for (const token of [teamAdmin, await gw.token({ team: TEAM, scopes: ['admin'] })]) {
      const r = await admin('/tokens', token);
      expect(r.status).toBe(403);
      expect((await json(r)).error.message).toMatch(/^team "[^"]+" was deleted \(.+\): its tokens no longer work$/);
    }
    expect(objectContents(objectFile)).toEqual({ tables: [], keys: ['team-deleted'] });
    expect((await op('GET', `/teams/${TEAM}`)).status).toBe(404);
    // Its id is not given out again.
    const reuse = await op('POST', '/teams', { id: TEAM });
    expect(reuse.status).toBe(409);
    expect((await json(reuse)).error.message).toContain('was deleted');
  }, 90_000);
});

describe('quotas', () => {
  it('with jobsPerDay 2, the third execute is refused with quota_exceeded, naming the quota and how to raise it', async () => {
    expect((await op('POST', '/teams', { id: METERED, quotas: { jobsPerDay: 2 } })).status).toBe(201);
    await gw.putPolicy(METERED, POLICY);
    await agentFor(METERED);
    const c = await gw.mcp(METERED, ['execute']);
    try {
      for (const n of [1, 2]) {
        const r = await call(c, 'execute', { command: 'echo', args: [`job ${n}`] });
        expect(r.r.isError, r.t).toBeFalsy();
      }
      const third = await call(c, 'execute', { command: 'echo', args: ['job 3'] });
      expect(third.r.isError).toBe(true);
      expect((third.s.error as { code: string }).code).toBe('quota_exceeded');
      expect(third.t).toContain('jobsPerDay = 2');
      expect(third.t).toContain('gatehouse team quotas');
      // Raised: the next one runs.
      expect((await op('PUT', `/teams/${METERED}/quotas`, { jobsPerDay: 3 })).status).toBe(200);
      const fourth = await call(c, 'execute', { command: 'echo', args: ['job 4'] });
      expect(fourth.r.isError, fourth.t).toBeFalsy();
      expect((await json(await op('GET', `/teams/${METERED}/usage`))).usage.today.jobs).toBe(3);
    } finally {
      await c.close();
    }
  }, 120_000);
});
