/**
 * A job's egress messages at the team DO (src/dispatch/egress.ts), over node:sqlite for the DO's
 * storage and for D1 (every migration applied): asks become admin approvals and are answered when
 * decided or when their time ran out, also after a restart; connection logs reach D1, bounded per
 * job; and only the agent a job runs on is heard — another agent's asks and logs change nothing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import type { JobSpec } from '../../src/contracts/agent-protocol.ts';
import { AGENT_BUDGET_CLOSE } from '../../src/contracts/agent-protocol.ts';
import { EGRESS_ASK_WAIT_MS, EGRESS_CONNECTIONS_MAX, type EgressConnection, type NetworkGrant } from '../../src/contracts/network.ts';
import { decideApproval, listApprovals } from '../../src/approval/store.ts';
import { jobNetwork, teamConnections } from '../../src/store/egress.ts';
import { STRANGER_BURST } from '../../src/dispatch/agent-budget.ts';
import { dispatchHost } from './sql-host.ts';
import { connect, HB, request, say, setup } from './team-fixture.ts';

/** D1 over node:sqlite with the repository's migrations: prepare/bind/run/all/first and batch (one transaction). */
function sqliteD1() {
  const db = new DatabaseSync(':memory:');
  const dir = new URL('../../migrations/', import.meta.url);
  for (const f of readdirSync(dir).sort()) if (f.endsWith('.sql')) db.exec(readFileSync(new URL(f, dir), 'utf8'));
  const reads = (sql: string) => /^\s*(SELECT|WITH)/i.test(sql);
  const stmt = (sql: string, params: unknown[] = []) => ({
    sql,
    bind: (...p: unknown[]) => stmt(sql, p),
    run: async () => ({ meta: { changes: Number(db.prepare(sql).run(...(params as never[])).changes) } }),
    all: async () => ({ results: db.prepare(sql).all(...(params as never[])) }),
    first: async () => db.prepare(sql).get(...(params as never[])) ?? null,
    now: () =>
      reads(sql)
        ? { results: db.prepare(sql).all(...(params as never[])), meta: {} }
        : { results: [], meta: { changes: Number(db.prepare(sql).run(...(params as never[])).changes) } },
  });
  return {
    db,
    prepare: (sql: string) => stmt(sql),
    batch: async (stmts: ReturnType<typeof stmt>[]) => {
      db.exec('BEGIN');
      try {
        const out = stmts.map((s) => s.now());
        db.exec('COMMIT');
        return out;
      } catch (e) {
        db.exec('ROLLBACK');
        throw e;
      }
    },
  };
}

const grant = (o: Partial<NetworkGrant> = {}): NetworkGrant => ({
  mode: 'allowlist',
  allow: [{ host: 'registry.npmjs.org', methods: ['GET', 'HEAD'] }],
  unlisted: 'ask',
  maxBytesUp: 1 << 20,
  maxBytesDown: 1 << 20,
  source: 'rules[0].network',
  ...o,
});

function rig(o: { storage?: DatabaseSync; d1?: ReturnType<typeof sqliteD1> } = {}) {
  const d1 = o.d1 ?? sqliteD1();
  const host = dispatchHost({ heartbeatMs: HB, env: { DB: d1 as never, GATEHOUSE_WORKERS_PLAN: 'paid' }, db: o.storage });
  return { ...setup({ host }), d1, storage: host.db };
}

/** Job `id` running on agent `agentId`, with network `g`. */
async function running(t: ReturnType<typeof rig>, id: string, agentId: string, g: NetworkGrant = grant()) {
  const r = request(id, { agent: agentId, subject: 'alice' });
  const answer = await t.c.jobs.submit({ ...r, spec: { ...r.spec, command: 'npm', args: ['ci'], network: g } as JobSpec });
  expect(answer).toMatchObject({ ok: true, state: 'running', agentId });
}

const conn = (i: number, o: Partial<EgressConnection> = {}): EgressConnection => ({
  host: 'registry.npmjs.org',
  port: 443,
  address: '127.0.0.1',
  method: 'CONNECT',
  decision: 'allowed',
  reason: 'network.allow[0]',
  bytesUp: 100 + i,
  bytesDown: 1000 + i,
  startedAt: new Date(1_000_000 + i).toISOString(),
  ms: 5,
  ...o,
});

describe('egress.ask: a person decides a connection to an unlisted host', () => {
  it('opens an admin approval naming the job, host and command; an approval is answered allow and used by that job', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'files.example.org', port: 443 });
    const [ap] = await listApprovals(t.d1 as never, 'acme', { status: 'pending', limit: 10, now: t.host.now() });
    expect(ap).toMatchObject({
      tool: 'egress',
      subject: 'alice',
      channel: 'admin',
      summary: 'job j1 wants to connect to files.example.org:443; command: npm ci',
    });
    expect(ap.rule_reason).toContain('rules[0].network.unlisted is "ask"');
    expect(ap.expires_at - t.host.now()).toBe(EGRESS_ASK_WAIT_MS);
    // Undecided: the alarm looks and answers nothing yet.
    await t.c.egress.onAlarm(t.host.now());
    expect(ws.of('egress.answer')).toEqual([]);
    expect(t.c.egress.nextWake(t.host.now())).toBe(t.host.now() + 1000);
    const d = await decideApproval(t.d1 as never, 'acme', ap.id, { approve: true, by: 'admin-bob', ttlMs: 3_600_000, now: t.host.now() });
    expect(d.ok).toBe(true);
    await t.c.egress.onAlarm(t.host.now());
    expect(ws.of('egress.answer')).toEqual([
      { type: 'egress.answer', jobId: 'j1', askId: 'k1', decision: 'allow', by: `approval ${ap.id} (approved by admin-bob)` },
    ]);
    const [used] = await listApprovals(t.d1 as never, 'acme', { status: 'used', limit: 10, now: t.host.now() });
    expect(used).toMatchObject({ id: ap.id, job_id: 'j1' });
    // The same ask again (the agent lost the answer) is answered again; nothing new is opened.
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'files.example.org', port: 443 });
    expect(ws.of('egress.answer')).toHaveLength(2);
    expect(await listApprovals(t.d1 as never, 'acme', { limit: 10, now: t.host.now() })).toHaveLength(1);
    expect(t.c.egress.nextWake(t.host.now())).toBeNull();
  });

  it('a denial is answered deny with who denied it and why', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'paste.example.org', port: 443, method: 'POST' });
    const [ap] = await listApprovals(t.d1 as never, 'acme', { status: 'pending', limit: 10, now: t.host.now() });
    expect(ap.summary).toContain('paste.example.org:443 (POST)');
    await decideApproval(t.d1 as never, 'acme', ap.id, { approve: false, by: 'admin-bob', note: 'not ours', ttlMs: 1000, now: t.host.now() });
    await t.c.egress.onAlarm(t.host.now());
    expect(ws.of('egress.answer')).toEqual([
      { type: 'egress.answer', jobId: 'j1', askId: 'k1', decision: 'deny', by: `approval ${ap.id} (denied by admin-bob: not ours)` },
    ]);
  });

  it('an ask no one decides is denied as expired after EGRESS_ASK_WAIT_MS, and its approval can no longer be granted', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'files.example.org', port: 443 });
    const [ap] = await listApprovals(t.d1 as never, 'acme', { status: 'pending', limit: 10, now: t.host.now() });
    t.host.clock.now += EGRESS_ASK_WAIT_MS - 1;
    await t.c.egress.onAlarm(t.host.now());
    expect(ws.of('egress.answer')).toEqual([]);
    t.host.clock.now += 1;
    await t.c.egress.onAlarm(t.host.now());
    expect(ws.of('egress.answer')).toEqual([
      { type: 'egress.answer', jobId: 'j1', askId: 'k1', decision: 'deny', by: `expired: no decision within 120 s (approval ${ap.id})` },
    ]);
    expect((await decideApproval(t.d1 as never, 'acme', ap.id, { approve: true, by: 'late', ttlMs: 1000, now: t.host.now() })).ok).toBe(false);
  });

  it('a pending ask survives a restart of the object: the new instance answers it', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'files.example.org', port: 443 });
    const [ap] = await listApprovals(t.d1 as never, 'acme', { status: 'pending', limit: 10, now: t.host.now() });
    await decideApproval(t.d1 as never, 'acme', ap.id, { approve: true, by: 'admin-bob', ttlMs: 60_000, now: t.host.now() });
    // A new object over the same storage (memory gone); the agent's socket is handed back by the platform.
    const again = rig({ storage: t.storage, d1: t.d1 });
    again.host.socketList.push(ws);
    await again.c.egress.onAlarm(again.host.now());
    expect(ws.of('egress.answer')).toEqual([
      { type: 'egress.answer', jobId: 'j1', askId: 'k1', decision: 'allow', by: `approval ${ap.id} (approved by admin-bob)` },
    ]);
  });

  it('a grant that does not ask is answered deny at once, naming the policy key; no approval is opened', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1', grant({ unlisted: 'deny', source: 'network' }));
    await running(t, 'j2', 'a1', grant({ mode: 'off', allow: [], unlisted: 'deny', source: 'rules[1].network' }));
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'evil.example', port: 443 });
    await say(t, ws, { type: 'egress.ask', jobId: 'j2', askId: 'k1', host: 'evil.example', port: 443 });
    expect(ws.of('egress.answer')).toEqual([
      { type: 'egress.answer', jobId: 'j1', askId: 'k1', decision: 'deny', by: 'policy: network.unlisted is "deny"' },
      { type: 'egress.answer', jobId: 'j2', askId: 'k1', decision: 'deny', by: 'policy: rules[1].network.mode is "off"' },
    ]);
    expect(await listApprovals(t.d1 as never, 'acme', { limit: 10, now: t.host.now() })).toEqual([]);
  });

  it('a job asks about a bounded number of hosts at once; more are refused without an approval', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    for (let i = 0; i < 10; i++) await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: `k${i}`, host: `h${i}.example.org`, port: 443 });
    expect(await listApprovals(t.d1 as never, 'acme', { limit: 50, now: t.host.now() })).toHaveLength(8);
    expect(ws.of('egress.answer').map((a) => a.askId)).toEqual(['k8', 'k9']);
    expect(ws.of('egress.answer')[0].by).toMatch(/^too many asks/);
  });
});

describe('egress.log: the record of a job’s connections', () => {
  it("stores the job's connections in D1, shown with the job's grant", async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, {
      type: 'egress.log',
      jobId: 'j1',
      connections: [
        conn(0),
        conn(1, {
          host: 'evil.example',
          port: 80,
          address: undefined,
          method: 'POST',
          decision: 'refused',
          reason: 'not in rules[0].network.allow',
          bytesUp: 0,
          bytesDown: 0,
        }),
      ],
    });
    await t.c.mirror.sync();
    const n = await jobNetwork(t.d1 as never, 'acme', 'j1');
    expect(n).toMatchObject({ mode: 'allowlist', source: 'rules[0].network', allowed: 1, refused: 1, dropped: 0, bytes_up: 100, bytes_down: 1000 });
    expect(n?.connections[1]).toEqual({
      job_id: 'j1',
      host: 'evil.example',
      port: 80,
      address: null,
      method: 'POST',
      decision: 'refused',
      reason: 'not in rules[0].network.allow',
      bytes_up: 0,
      bytes_down: 0,
      started_at: new Date(1_000_001).toISOString(),
      ms: 5,
    });
    expect((await teamConnections(t.d1 as never, 'acme', { limit: 10, refusedOnly: true })).map((c) => c.host)).toEqual(['evil.example']);
  });

  it('lists at most EGRESS_CONNECTIONS_MAX connections per job and counts the rest', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    for (let b = 0; b < 5; b++) await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: Array.from({ length: 50 }, (_, i) => conn(b * 50 + i)) });
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [], dropped: 3 });
    const n = await jobNetwork(t.d1 as never, 'acme', 'j1');
    expect(n?.connections).toHaveLength(EGRESS_CONNECTIONS_MAX);
    expect(n?.dropped).toBe(50);
    const rows = t.d1.db.prepare(`SELECT COUNT(*) AS n FROM egress_connections WHERE job_id = 'j1'`).get() as { n: number };
    expect(rows.n).toBe(EGRESS_CONNECTIONS_MAX);
  });

  it('keeps the rows when D1 refuses them and copies them at the next alarm', async () => {
    const d1 = sqliteD1();
    const t = rig({ d1 });
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    const batch = d1.batch;
    d1.batch = async () => {
      throw new Error('D1 is down');
    };
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [conn(0)] });
    d1.batch = batch;
    expect(t.c.egress.nextWake(t.host.now())).toBe(t.host.now() + HB);
    await t.c.egress.onAlarm(t.host.now());
    expect((await jobNetwork(d1 as never, 'acme', 'j1'))?.connections).toHaveLength(1);
    expect(t.c.egress.nextWake(t.host.now())).toBeNull();
  });
});

describe('attacks: only the agent a job runs on speaks for its network', () => {
  it("another agent's egress.log and egress.ask about a job change nothing", async () => {
    const t = rig();
    const a1 = await connect(t, 'a1');
    const a2 = await connect(t, 'a2', 'agent-other');
    await running(t, 'j1', 'a1');
    await say(t, a2, { type: 'egress.log', jobId: 'j1', connections: [conn(0, { host: 'forged.example', reason: 'forged' })] });
    await say(t, a2, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'forged.example', port: 443 });
    expect(await jobNetwork(t.d1 as never, 'acme', 'j1').then((n) => n?.connections ?? [])).toEqual([]);
    expect(await listApprovals(t.d1 as never, 'acme', { limit: 10, now: t.host.now() })).toEqual([]);
    expect(a1.of('egress.answer')).toEqual([]);
    expect(a2.of('egress.answer')).toEqual([]);
  });

  it('a job this team does not have (another team’s, or made up) takes nothing, and a flood closes the socket', async () => {
    const t = rig();
    const a2 = await connect(t, 'a2');
    for (let i = 0; i < STRANGER_BURST + 1 && !a2.closed; i++) {
      await say(t, a2, { type: 'egress.log', jobId: `other-team-job-${i}`, connections: [conn(i)] });
    }
    expect(a2.closed?.code).toBe(AGENT_BUDGET_CLOSE);
    expect((await teamConnections(t.d1 as never, 'acme', { limit: 10 })).length).toBe(0);
  });

  it('refuses a log over the message limits (more than 50 connections, or an oversized field) without storing any of it', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: Array.from({ length: 51 }, (_, i) => conn(i)) });
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [conn(0, { reason: 'x'.repeat(100_000) })] });
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [conn(0, { host: 'h'.repeat(254) })] });
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [conn(0, { bytesUp: -1 })] });
    await t.c.mirror.sync();
    expect(await jobNetwork(t.d1 as never, 'acme', 'j1').then((n) => n?.connections)).toEqual([]);
    expect(ws.closed).toBeNull();
  });
});
