/**
 * Team data lives with the team, through the real gateway (wrangler dev: D1, R2 and the team's
 * Durable Object emulated, a real agent with sandbox none):
 *   - an older deployment's audit rows in the shared D1 move into the team's object on its first
 *     request — in call order, nothing lost, another team's rows untouched until its own turn;
 *   - an `execute` call writes no row to the shared D1;
 *   - a revoke is in effect on the very next request;
 *   - retention exports rows past `retention.auditDays` to R2 and then drops them, and the export
 *     API returns the whole trail — exported batches, then the rows kept — across a restart.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectMcp, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { auditInsertSql, execSql, type SeedAudit } from '../admin/seed.ts';
import { d1Rows, r2Keys } from '../support/emulator-state.ts';
import { until } from '../support/until.ts';

const TEAM = 'teamdata';
const OTHER = 'teamdata-other';
const DAY = 24 * 3600_000;
const NOW = Date.now();
/** 6 rows of TEAM: 3 from three days ago (past a 1-day retention), 3 from the last hour; 2 of OTHER between them. */
const seed: SeedAudit[] = [];
for (let i = 0; i < 6; i++) {
  seed.push({ at: (i < 3 ? NOW - 3 * DAY : NOW - 3600_000) + i, team: TEAM, subject: 'alice', tool: 'execute', decision: 'allowed', reason: `legacy ${i}` });
  if (i % 3 === 0) seed.push({ at: NOW - 2 * DAY + i, team: OTHER, subject: 'eve', tool: 'execute', decision: 'denied', reason: `other ${i}` });
}

let gw: Gateway;
let agent: AgentProcess;
let root: string;

type Row = { id: number; at: number; reason: string | null; tool: string; jobId: string | null };

async function admin(method: string, path: string, o: { team?: string; body?: unknown } = {}) {
  const token = await gw.token({ team: o.team ?? TEAM, scopes: ['admin'], subject: 'ops' });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: o.body === undefined ? undefined : JSON.stringify(o.body),
  });
  return r;
}

const json = async (r: Promise<Response>): Promise<any> => (await r).json();

/** Every page of the export from `query` on, and the cursor after the last. */
async function exportAll(query: string, limit: number, between?: () => Promise<void>): Promise<Row[]> {
  const rows: Row[] = [];
  let q = `${query}&limit=${limit}`;
  for (let page = 0; page < 50; page++) {
    const r = await admin('GET', `/audit/export?${q}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/x-ndjson');
    const text = await r.text();
    rows.push(
      ...text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Row),
    );
    if (r.headers.get('Gatehouse-Export-Complete') === 'true') return rows;
    q = `after=${r.headers.get('Gatehouse-Next-After')}&limit=${limit}`;
    if (page === 0 && between) await between();
  }
  throw new Error('the export never completed');
}

const d1Audit = (team: string) => d1Rows(gw.stateDir, 'audit', `SELECT id FROM audit WHERE team = '${team}'`).length;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'gatehouse-teamdata-'));
  gw = await startGateway({ beforeStart: async (persist) => execSql(persist, auditInsertSql(seed)) });
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: testSandbox(), agentId: 'teamdata-a' });
  await agent.ready;
}, 180_000);

afterAll(async () => {
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe("an older deployment's D1 rows", () => {
  it("move into the team's object on its first request, in call order, and leave D1; another team's wait for its own", async () => {
    // The agent's connection was the team's first request: its rows are moving already.
    const page = await await json(admin('GET', `/audit?until=${NOW}&limit=50`));
    expect((page.entries as Row[]).map((r) => r.reason)).toEqual(['legacy 5', 'legacy 4', 'legacy 3', 'legacy 2', 'legacy 1', 'legacy 0']);
    await until(async () => d1Audit(TEAM) === 0, 10_000, "the team's D1 rows removed after the move");
    expect(d1Audit(OTHER)).toBe(2);
    const other = await await json(admin('GET', `/audit?until=${NOW}`, { team: OTHER }));
    expect((other.entries as Row[]).map((r) => r.reason)).toEqual(['other 3', 'other 0']);
    await until(async () => d1Audit(OTHER) === 0, 10_000, "the other team's D1 rows removed");
  });
});

describe('the execute path', () => {
  it('writes no row to the shared D1, and its audit row is the team’s own', async () => {
    const c = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'] }));
    await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['warm'] } });
    const count = () =>
      d1Rows(gw.stateDir, 'audit', `SELECT (SELECT COUNT(*) FROM audit) + (SELECT COUNT(*) FROM jobs) + (SELECT COUNT(*) FROM artifacts) AS n`)[0].n;
    const before = count();
    const usage = async () => (await await json(admin('GET', '/usage'))).object as { startedAt: number; sqlRowsWrittenBy: Record<string, number> };
    const u0 = await usage();
    const logFrom = gw.logs().length;
    for (let i = 0; i < 5; i++) {
      const r = (await c.callTool({ name: 'execute', arguments: { command: 'echo', args: [`call-${i}`] } })) as { structuredContent?: { exit_code?: number } };
      expect(r.structuredContent?.exit_code).toBe(0);
    }
    expect(count()).toBe(before);
    // In the team's object a call writes its job (running at once, then its end) and its audit row (written, then
    // completed): 4 rows, no index entry, no artifact row, no upload — its output is in its exit, whole.
    const u1 = await usage();
    // The counters are the object instance's own: back-to-back calls keep it in memory.
    expect(u1.startedAt).toBe(u0.startedAt);
    const written = Object.fromEntries(Object.entries(u1.sqlRowsWrittenBy).map(([k, n]) => [k, (n - (u0.sqlRowsWrittenBy[k] ?? 0)) / 5]));
    expect(Object.fromEntries(Object.entries(written).filter(([, n]) => n > 0))).toEqual({
      'insert jobs': 1,
      'update jobs': 1,
      'insert audit': 1,
      'update audit': 1,
    });
    expect(gw.logs().slice(logFrom)).not.toContain('/agent/v1/artifacts/');
    const rows = (await await json(admin('GET', '/audit?tool=execute&limit=5'))).entries as (Row & { exitStatus: string; command: unknown })[];
    expect(rows).toHaveLength(5);
    expect(rows.every((r) => r.exitStatus === 'exit 0' && r.jobId)).toBe(true);
    expect(JSON.stringify(rows[0].command)).toContain('call-4');
    await c.close();
  });

  it('refuses a revoked token on its very next request', async () => {
    const created = await await json(admin('POST', '/tokens', { body: { subject: 'short-lived', scopes: ['execute'] } }));
    const c = await connectMcp(gw.mcpUrl, created.token);
    await c.callTool({ name: 'policy_check', arguments: { command: 'echo' } });
    const revoke = await admin('DELETE', `/tokens/${created.jti}`);
    expect(revoke.status).toBe(200);
    const r = await fetch(gw.mcpUrl, {
      method: 'POST',
      headers: { Authorization: `Bearer ${created.token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(r.status).toBe(401);
    expect(await r.text()).toContain('revoked');
    await c.close().catch(() => {});
  });
});

describe('retention and the export', () => {
  it('exports rows past retention.auditDays to R2, drops them, and the export still returns the whole trail across a restart', async () => {
    const before = await exportAll('since=0', 1000);
    expect(before.slice(0, 6).map((r) => r.reason)).toEqual(['legacy 0', 'legacy 1', 'legacy 2', 'legacy 3', 'legacy 4', 'legacy 5']);
    const ids = before.map((r) => r.id);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, retention: { auditDays: 1 } });
    // The three rows from three days ago are due: exported to R2, then dropped from the object.
    await until(async () => r2Keys(gw.stateDir).some((k) => k.startsWith(`t/${TEAM}/audit/`)), 15_000, 'an exported batch in R2');
    await until(
      async () => {
        const kept = (await await json(admin('GET', `/audit?until=${NOW}`))).entries as Row[];
        return kept.length === 3 && kept.every((r) => Number(r.reason?.split(' ')[1]) >= 3);
      },
      15_000,
      'the exported rows dropped from the object',
    );
    const storage = await await json(admin('GET', '/audit/storage'));
    expect(storage).toMatchObject({ auditDays: 1, exported: { batches: 1, rows: 3 }, lastError: null });
    expect(storage.bytes).toBeGreaterThan(0);
    // The whole trail, in pages of 2, with a restart of the gateway between two pages.
    const after = await exportAll('since=0', 2, () => gw.restart());
    expect(after.slice(0, before.length).map((r) => r.id)).toEqual(ids);
    expect(new Set(after.map((r) => r.id)).size).toBe(after.length);
    // since= starts at the first row at or after that time, exported or not.
    const recent = await exportAll(`since=${NOW - 2 * DAY}`, 1000);
    expect(recent[0].reason).toBe('legacy 3');
  });

  it('refuses bad export requests, naming what is allowed', async () => {
    for (const [q, msg] of [
      ['after=x', 'after must be'],
      ['since=yesterday', 'since must be'],
      ['limit=0', 'limit must be'],
      ['after=1&since=0', 'either after'],
      ['cursor=1', 'unknown query parameter'],
    ]) {
      const r = await admin('GET', `/audit/export?${q}`);
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: { message: string } }).error.message).toContain(msg);
    }
  });
});
