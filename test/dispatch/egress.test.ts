/**
 * A job's egress messages at the team DO (src/dispatch/egress.ts), over node:sqlite for the DO's
 * storage: asks become the team's admin approvals (approvals.ts) and are answered when an admin
 * decides or when their time ran out, also after a restart; connection logs are kept in the object,
 * bounded per job, and go after their retention; and only the agent a job runs on is heard —
 * another agent's asks and logs change nothing.
 */
import type { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import type { JobSpec } from '../../src/contracts/agent-protocol.ts';
import { AGENT_BUDGET_CLOSE } from '../../src/contracts/agent-protocol.ts';
import { EGRESS_ASK_WAIT_MS, EGRESS_CONNECTIONS_MAX, type EgressConnection, type NetworkGrant } from '../../src/contracts/network.ts';
import { STRANGER_BURST } from '../../src/dispatch/agent-budget.ts';
import { EGRESS_LOG_RETENTION_MS } from '../../src/dispatch/egress.ts';
import { migrate } from '../../src/dispatch/capability-host.ts';
import { dispatchHost, sqlHost } from './sql-host.ts';
import { connect, HB, request, say, setup } from './team-fixture.ts';

const grant = (o: Partial<NetworkGrant> = {}): NetworkGrant => ({
  mode: 'allowlist',
  allow: [{ host: 'registry.npmjs.org', methods: ['GET', 'HEAD'] }],
  unlisted: 'ask',
  maxBytesUp: 1 << 20,
  maxBytesDown: 1 << 20,
  source: 'rules[0].network',
  ...o,
});

function rig(o: { storage?: DatabaseSync } = {}) {
  const host = dispatchHost({ heartbeatMs: HB, env: { GATEHOUSE_WORKERS_PLAN: 'paid' }, db: o.storage });
  return { ...setup({ host }), storage: host.db };
}

const approvals = (t: ReturnType<typeof rig>, status?: 'pending' | 'used') => t.c.approvals.list({ status, limit: 50, now: t.host.now() });

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
  it('opens an admin approval naming the job, host and command; an approval is answered allow at once and used by that job', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'files.example.org', port: 443 });
    const [ap] = approvals(t, 'pending');
    expect(ap).toMatchObject({
      tool: 'egress',
      subject: 'alice',
      channel: 'admin',
      summary: 'job j1 wants to connect to files.example.org:443; command: npm ci',
    });
    expect(ap.rule_reason).toContain('rules[0].network.unlisted is "ask"');
    expect(ap.expires_at - t.host.now()).toBe(EGRESS_ASK_WAIT_MS);
    // Undecided: the alarm looks and answers nothing yet; it is next needed when the ask runs out (a decision needs no polling).
    t.c.egress.onAlarm(t.host.now());
    expect(ws.of('egress.answer')).toEqual([]);
    expect(t.c.egress.nextWake(t.host.now())).toBe(t.host.now() + EGRESS_ASK_WAIT_MS);
    const d = t.c.approvals.decide(ap.id, { approve: true, by: 'admin-bob', ttlMs: 3_600_000, now: t.host.now() });
    // The admin sees what they did; the job's use of it follows in the same step.
    expect(d).toMatchObject({ ok: true, row: { status: 'approved' } });
    expect(ws.of('egress.answer')).toEqual([
      { type: 'egress.answer', jobId: 'j1', askId: 'k1', decision: 'allow', by: `approval ${ap.id} (approved by admin-bob)` },
    ]);
    const [used] = approvals(t, 'used');
    expect(used).toMatchObject({ id: ap.id, job_id: 'j1' });
    // The same ask again (the agent lost the answer) is answered again; nothing new is opened.
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'files.example.org', port: 443 });
    expect(ws.of('egress.answer')).toHaveLength(2);
    expect(approvals(t)).toHaveLength(1);
    expect(t.c.egress.nextWake(t.host.now())).toBeNull();
  });

  it('a denial is answered deny with who denied it and why', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'paste.example.org', port: 443, method: 'POST' });
    const [ap] = approvals(t, 'pending');
    expect(ap.summary).toContain('paste.example.org:443 (POST)');
    t.c.approvals.decide(ap.id, { approve: false, by: 'admin-bob', note: 'not ours', ttlMs: 1000, now: t.host.now() });
    expect(ws.of('egress.answer')).toEqual([
      { type: 'egress.answer', jobId: 'j1', askId: 'k1', decision: 'deny', by: `approval ${ap.id} (denied by admin-bob: not ours)` },
    ]);
  });

  it('an ask no one decides is denied as expired after EGRESS_ASK_WAIT_MS, and its approval can no longer be granted', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'files.example.org', port: 443 });
    const [ap] = approvals(t, 'pending');
    t.host.clock.now += EGRESS_ASK_WAIT_MS - 1;
    t.c.egress.onAlarm(t.host.now());
    expect(ws.of('egress.answer')).toEqual([]);
    t.host.clock.now += 1;
    t.c.egress.onAlarm(t.host.now());
    expect(ws.of('egress.answer')).toEqual([
      { type: 'egress.answer', jobId: 'j1', askId: 'k1', decision: 'deny', by: `expired: no decision within 120 s (approval ${ap.id})` },
    ]);
    expect(t.c.approvals.decide(ap.id, { approve: true, by: 'late', ttlMs: 1000, now: t.host.now() }).ok).toBe(false);
  });

  it('a pending ask survives a restart of the object: the new instance answers it when an admin decides', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: 'k1', host: 'files.example.org', port: 443 });
    const [ap] = approvals(t, 'pending');
    // A new object over the same storage (memory gone); the agent's socket is handed back by the platform.
    const again = rig({ storage: t.storage });
    again.host.socketList.push(ws);
    expect(again.c.egress.nextWake(again.host.now())).toBe(ap.expires_at);
    again.c.approvals.decide(ap.id, { approve: true, by: 'admin-bob', ttlMs: 60_000, now: again.host.now() });
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
    expect(approvals(t)).toEqual([]);
  });

  it('a job asks about a bounded number of hosts at once; more are refused without an approval', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    for (let i = 0; i < 10; i++) await say(t, ws, { type: 'egress.ask', jobId: 'j1', askId: `k${i}`, host: `h${i}.example.org`, port: 443 });
    expect(approvals(t)).toHaveLength(8);
    expect(ws.of('egress.answer').map((a) => a.askId)).toEqual(['k8', 'k9']);
    expect(ws.of('egress.answer')[0].by).toMatch(/^too many asks/);
  });
});

describe('egress.log: the record of a job’s connections', () => {
  it("keeps the job's connections, shown with the job's grant", async () => {
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
    const n = t.c.egress.jobNetwork('j1');
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
      credential: null,
      started_at: new Date(1_000_001).toISOString(),
      ms: 5,
    });
    expect(t.c.egress.connections({ limit: 10, refusedOnly: true }).map((c) => c.host)).toEqual(['evil.example']);
  });

  it('lists at most EGRESS_CONNECTIONS_MAX connections per job and counts the rest', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    for (let b = 0; b < 5; b++) await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: Array.from({ length: 50 }, (_, i) => conn(b * 50 + i)) });
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [], dropped: 3 });
    const n = t.c.egress.jobNetwork('j1');
    expect(n?.connections).toHaveLength(EGRESS_CONNECTIONS_MAX);
    expect(n?.dropped).toBe(50);
    const rows = t.storage.prepare(`SELECT COUNT(*) AS n FROM egress_connections WHERE job_id = 'j1'`).get() as { n: number };
    expect(rows.n).toBe(EGRESS_CONNECTIONS_MAX);
  });

  it('drops connection rows EGRESS_LOG_RETENTION_MS after they arrived (the alarm), and with their job', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await running(t, 'j2', 'a1');
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [conn(0)] });
    const first = t.host.now();
    t.host.clock.now += 60_000;
    await say(t, ws, { type: 'egress.log', jobId: 'j2', connections: [conn(1)] });
    // An agent's startedAt far in the past does not shorten the row's life: its arrival counts.
    expect(t.c.egress.nextWake(t.host.now())).toBe(first + EGRESS_LOG_RETENTION_MS);
    t.host.clock.now = first + EGRESS_LOG_RETENTION_MS;
    t.c.egress.onAlarm(t.host.now());
    expect(t.c.egress.connections({ limit: 10 }).map((c) => c.job_id)).toEqual(['j2']);
    t.c.egress.forget(['j2']);
    expect(t.c.egress.connections({ limit: 10 })).toEqual([]);
    expect(t.c.egress.jobNetwork('j2')?.connections).toEqual([]);
    expect(t.c.egress.nextWake(t.host.now())).toBeNull();
  });

  it('an object that still held rows for D1 keeps them: the outbox moves into the log when it migrates', () => {
    const host = sqlHost();
    migrate(host, 'egress', [
      {
        id: '1-egress',
        sql: [
          `CREATE TABLE egress_counts (job_id TEXT PRIMARY KEY, listed INTEGER NOT NULL, dropped INTEGER NOT NULL, asks INTEGER NOT NULL, synced INTEGER NOT NULL DEFAULT 1)`,
          `CREATE TABLE egress_asks (job_id TEXT NOT NULL, ask_id TEXT NOT NULL, agent TEXT NOT NULL, approval_id TEXT, host TEXT NOT NULL, port INTEGER NOT NULL,
            method TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, decision TEXT, decided_by TEXT, PRIMARY KEY (job_id, ask_id))`,
          `CREATE TABLE egress_outbox (job_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (job_id, seq))`,
        ],
      },
    ]);
    const row = { jobId: 'j9', seq: 1, host: 'h.example', port: 443, address: null, method: 'CONNECT', decision: 'allowed', reason: 'r' };
    host.sql.exec(
      `INSERT INTO egress_outbox (job_id, seq, data) VALUES ('j9', 1, ?)`,
      JSON.stringify({ ...row, bytesUp: 1, bytesDown: 2, startedAt: 5000, ms: 3 }),
    );
    host.sql.exec(`INSERT INTO egress_counts (job_id, listed, dropped, asks, synced) VALUES ('j9', 1, 0, 0, 0)`);
    const t = rig({ storage: host.db });
    expect(t.c.egress.connections({ limit: 10 })).toEqual([
      {
        job_id: 'j9',
        host: 'h.example',
        port: 443,
        address: null,
        method: 'CONNECT',
        decision: 'allowed',
        reason: 'r',
        bytes_up: 1,
        bytes_down: 2,
        credential: null,
        started_at: new Date(5000).toISOString(),
        ms: 3,
      },
    ]);
    expect(host.db.prepare(`SELECT name FROM sqlite_master WHERE name = 'egress_outbox'`).get()).toBeUndefined();
  });
});

describe('import: old D1 rows', () => {
  it("takes in D1's egress_connections and egress_jobs rows once; a job's counts only grow; malformed rows are counted", async () => {
    const t = rig();
    await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    const d1Conn = {
      id: 7,
      team: 'acme',
      job_id: 'j1',
      seq: 1,
      host: 'registry.npmjs.org',
      port: 443,
      address: '1.2.3.4',
      method: 'CONNECT',
      decision: 'allowed',
      reason: 'network.allow[0]',
      bytes_up: 10,
      bytes_down: 20,
      started_at: t.host.now() - 5,
      ms: 3,
    };
    const job = { team: 'acme', job_id: 'j1', connections: 1, dropped: 4 };
    expect(t.c.egress.import({ connections: [d1Conn, { ...d1Conn, seq: 'x' }], jobs: [job] })).toEqual({ inserted: 2, refused: 1 });
    expect(t.c.egress.import({ connections: [d1Conn], jobs: [{ ...job, dropped: 2 }] })).toEqual({ inserted: 1, refused: 0 });
    expect(t.c.egress.jobNetwork('j1')).toMatchObject({ mode: 'allowlist', allowed: 1, dropped: 4, bytes_up: 10, bytes_down: 20 });
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
    expect(t.c.egress.jobNetwork('j1')?.connections ?? []).toEqual([]);
    expect(approvals(t)).toEqual([]);
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
    expect(t.c.egress.connections({ limit: 10 }).length).toBe(0);
  });

  it('refuses a log over the message limits (more than 50 connections, or an oversized field) without storing any of it', async () => {
    const t = rig();
    const ws = await connect(t, 'a1');
    await running(t, 'j1', 'a1');
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: Array.from({ length: 51 }, (_, i) => conn(i)) });
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [conn(0, { reason: 'x'.repeat(100_000) })] });
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [conn(0, { host: 'h'.repeat(254) })] });
    await say(t, ws, { type: 'egress.log', jobId: 'j1', connections: [conn(0, { bytesUp: -1 })] });
    expect(t.c.egress.jobNetwork('j1')?.connections).toEqual([]);
    expect(ws.closed).toBeNull();
  });
});
