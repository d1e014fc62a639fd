/**
 * A team's approvals, MCP tasks and egress log live in the team's Durable Object, not in the shared
 * D1: through the real gateway (`wrangler dev`), an `ask` rule's approval is asked, approved with the
 * admin API and used by the retry; a long call from a 2026-07-28 client becomes a task that completes;
 * a job's egress ask is approved and its connection logged and shown. Afterwards D1's `approvals`,
 * `tasks`, `egress_connections` and `egress_jobs` hold no row (read from the local emulator's D1
 * SQLite file), and the team object's SQLite holds them all.
 *
 * The agent is spoken by hand over the agent WebSocket (no sandbox needed): it ends each job when
 * the test says, so a call is long enough to become a task, and it sends the egress messages a real
 * agent's proxy sends (test/e2e/egress-edge.test.ts has the whole egress story).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { WebSocket } from 'undici';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startGateway, type Gateway } from './harness.ts';
import { rawAgent, type RawAgent } from '../support/raw-agent.ts';
import { request } from '../support/mcp2026-raw.ts';
import { until } from '../support/until.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';

type S = Record<string, any>;

const TEAM = 'team-records';
const WAIT_MS = 60_000;
const POLICY = {
  ...DEFAULT_POLICY,
  executables: { allow: [...DEFAULT_POLICY.executables.allow, 'npm'] },
  sandbox: { minimum: 'bwrap' },
  network: { mode: 'allowlist', allow: [{ host: 'intranet.example.org', methods: ['GET'] }], unlisted: 'ask' },
  rules: [{ pattern: ['echo', 'ship-it'], decision: 'ask', reason: 'shipping needs a person' }],
};
const MOVED = ['approvals', 'tasks', 'egress_connections', 'egress_jobs'] as const;

let gw: Gateway;
let agent: RawAgent;
let heartbeat: ReturnType<typeof setInterval> | undefined;
let client: Client;
/** Jobs the agent holds, and how long it waits before it ends each (by the job's first argument). */
const holds = new Set<string>();
const HOLD_MS: Record<string, number> = { slow: 3000 };

/** Rows of each table in every SQLite file under `dir` that has it. */
function rowsIn(dir: string, tables: readonly string[]): Record<string, number> {
  const n: Record<string, number> = Object.fromEntries(tables.map((t) => [t, 0]));
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.sqlite'));
  for (const f of files) {
    const db = new DatabaseSync(join(dir, f), { readOnly: true });
    try {
      for (const t of tables) {
        if (!db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(t)) continue;
        n[t] += (db.prepare(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n;
      }
    } finally {
      db.close();
    }
  }
  return n;
}
const d1Rows = () => rowsIn(join(gw.stateDir, 'state', 'v3', 'd1'), MOVED);
const teamObjectRows = () => rowsIn(join(gw.stateDir, 'state', 'v3', 'do'), ['approvals', 'tasks', 'egress_connections']);

async function admin(method: string, path: string): Promise<{ status: number; json: S }> {
  const token = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'records-admin' });
  const r = await fetch(`${gw.url}/admin/v1${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
  return { status: r.status, json: (await r.json()) as S };
}

const send = (m: unknown) => agent.ws.send(JSON.stringify(m));

function exit(jobId: string): void {
  const empty = { bytes: 0, lines: 0, artifactTruncated: false };
  send({
    type: 'job.exit',
    jobId,
    state: 'exited',
    exitCode: 0,
    signal: null,
    timedOut: false,
    durationMs: 5,
    stdout: '',
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: { stdout: empty, stderr: empty },
    artifactsUploaded: false,
  });
  holds.delete(jobId);
}

/** The job.start the agent got for the job running `arg`. */
function started(arg: string): Promise<S> {
  return until(
    async () => agent.messages.find((m) => m.type === 'job.start' && m.spec.args?.[0] === arg)?.spec as S | undefined,
    WAIT_MS,
    `job.start of ${arg}`,
  );
}

describe('team records stay with the team', () => {
  beforeAll(async () => {
    gw = await startGateway();
    await gw.putPolicy(TEAM, POLICY);
    agent = await rawAgent(gw.url, await gw.token({ team: TEAM, scopes: ['agent'], subject: 'agent-records' }));
    agent.ws.addEventListener('message', (e) => {
      const m = JSON.parse(String(e.data)) as S;
      if (m.type === 'welcome') heartbeat = setInterval(() => send({ type: 'heartbeat', running: [...holds] }), m.heartbeatMs);
      if (m.type !== 'job.start') return;
      const { jobId, args } = m.spec as { jobId: string; args: string[] };
      holds.add(jobId);
      // Ends its job by itself unless the test ends it (the egress job waits for its ask).
      if (args[0] !== 'ci') setTimeout(() => exit(jobId), HOLD_MS[args[0]] ?? 50);
    });
    send({
      type: 'hello',
      v: PROTOCOL_VERSION,
      agentId: 'records-agent',
      version: 'scripted',
      capacity: 4,
      sandbox: 'bwrap',
      runtimes: [],
      labels: [],
      running: [],
    });
    await until(async () => agent.messages.find((m) => m.type === 'welcome'), WAIT_MS, 'welcome');
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
  }, 300_000);

  afterAll(async () => {
    if (heartbeat) clearInterval(heartbeat);
    if (agent?.ws.readyState === WebSocket.OPEN) agent.ws.close(1000, 'done');
    await client?.close();
    await gw?.stop();
  });

  it('ask → approve → run, a task-augmented call and an egress ask and log write no row to D1; the team object holds them', async () => {
    expect(d1Rows()).toEqual({ approvals: 0, tasks: 0, egress_connections: 0, egress_jobs: 0 });

    // An `ask` rule: the call gets an approval id, an admin approves it, the retry runs once.
    const asked = (await client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['ship-it'] } })) as S;
    const approvalId = asked.structuredContent?.approval?.id as string;
    expect(approvalId, JSON.stringify(asked)).toMatch(/^ap_/);
    expect((await admin('POST', `/approvals/${approvalId}/approve`)).json.approval).toMatchObject({ id: approvalId, status: 'approved' });
    const ran = (await client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['ship-it'], approval_id: approvalId } })) as S;
    expect(ran.isError, JSON.stringify(ran)).toBeFalsy();
    expect((await admin('GET', `/approvals/${approvalId}`)).json.approval).toMatchObject({ status: 'used', job_id: ran.structuredContent.job_id });

    // A long call from a client that declares the Tasks extension becomes a task, which completes.
    const token = await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'], subject: 'alice' });
    const call = await request(gw.mcpUrl, token, 'tools/call', { name: 'execute', arguments: { command: 'echo', args: ['slow'] } }, true);
    expect(call.result, JSON.stringify(call)).toMatchObject({ resultType: 'task', status: 'working' });
    const taskId = call.result!.taskId as string;
    const done = await until(
      async () => {
        const r = await request(gw.mcpUrl, token, 'tasks/get', { taskId }, true);
        return r.result?.status === 'completed' ? r.result : undefined;
      },
      WAIT_MS,
      'the task to complete',
    );
    expect(done).toMatchObject({ taskId, status: 'completed' });

    // A job's egress ask becomes an approval; approved, the agent is told; its connection is logged and shown.
    const bg = (await client.callTool({ name: 'execute', arguments: { command: 'npm', args: ['ci'], background: true } })) as S;
    const jobId = bg.structuredContent.job_id as string;
    await started('ci');
    send({ type: 'egress.ask', jobId, askId: 'k1', host: 'files.example.org', port: 443 });
    const pending = await until(
      async () => ((await admin('GET', '/approvals?status=pending')).json.approvals as S[]).find((a) => a.tool === 'egress' && a.summary.includes(jobId)),
      WAIT_MS,
      'the egress approval',
    );
    await admin('POST', `/approvals/${pending.id}/approve`);
    const answer = await until(async () => agent.messages.find((m) => m.type === 'egress.answer' && m.jobId === jobId), WAIT_MS, 'egress.answer');
    expect(answer).toMatchObject({ askId: 'k1', decision: 'allow' });
    send({
      type: 'egress.log',
      jobId,
      connections: [
        {
          host: 'files.example.org',
          port: 443,
          address: '203.0.113.7',
          method: 'CONNECT',
          decision: 'allowed',
          reason: `approval ${pending.id}`,
          bytesUp: 10,
          bytesDown: 20,
          startedAt: new Date().toISOString(),
          ms: 4,
        },
      ],
    });
    const network = await until(
      async () => {
        const n = (await admin('GET', `/jobs/${jobId}`)).json.job?.network as S | null;
        return n?.connections?.length ? n : undefined;
      },
      WAIT_MS,
      'the logged connection',
    );
    expect(network).toMatchObject({ mode: 'allowlist', allowed: 1, connections: [{ host: 'files.example.org', bytes_down: 20 }] });
    expect((await admin('GET', '/audit/egress')).json.connections).toMatchObject([{ job_id: jobId, host: 'files.example.org' }]);
    exit(jobId);

    expect(d1Rows()).toEqual({ approvals: 0, tasks: 0, egress_connections: 0, egress_jobs: 0 });
    const kept = teamObjectRows();
    expect(kept.approvals).toBe(2);
    expect(kept.tasks).toBe(1);
    expect(kept.egress_connections).toBe(1);
  }, 240_000);
});
