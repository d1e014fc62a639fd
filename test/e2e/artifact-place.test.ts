/**
 * Where a job's output is kept, end to end (real `wrangler dev`, a real agent with sandbox `none`,
 * the official MCP client), counted in the emulator's persisted state: a small `execute` output
 * makes no R2 object, no D1 row and no upload — the agent's exit holds it whole and the team's
 * Durable Object keeps it there, with no index row of its own (its handle leads to the job) — and
 * query_output, resources/read and the admin API read it as before; a large one goes to R2 with its
 * index row in the team's object, and is searchable. Expiry (moved into the past in the object's
 * storage, then the object restarted) removes the index row and the R2 body, and the small one's
 * handle stops answering.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { call } from './fleet.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { SMALL_BODY_MAX_BYTES } from '../../src/dispatch/body-place.ts';
import { d1Rows, objectRows, r2Keys, updateObjects } from '../support/emulator-state.ts';
import { until } from '../support/until.ts';

const TEAM = 'place';
const POLICY = {
  ...DEFAULT_POLICY,
  shell: { enabled: true, allow: ['/.*/'] },
  executables: { ...DEFAULT_POLICY.executables, allow: [...DEFAULT_POLICY.executables.allow, 'seq', 'printf'] },
  limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: 60_000 },
};
/** `seq 1 LARGE_N`: about 200 KB, over SMALL_BODY_MAX_BYTES. */
const LARGE_N = 30_000;

let gw: Gateway;
let agent: AgentProcess;
let root = '';
let c: Client;
let small = '';
let large = '';

const d1Artifacts = () => d1Rows(gw.stateDir, 'artifacts', 'SELECT handle FROM artifacts');
const indexRows = (handle: string) =>
  objectRows(gw.stateDir, 'artifacts', `SELECT handle, stream, place, r2_key, bytes FROM artifacts WHERE handle = '${handle}'`);

async function agentConnected(): Promise<void> {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  await until(
    async () => {
      const r = await fetch(`${gw.url}/admin/v1/agents`, { headers: { Authorization: `Bearer ${token}` } });
      const agents = ((await r.json()) as { agents?: { agent_id: string; state: string }[] }).agents ?? [];
      return agents.some((a) => a.agent_id === 'place-agent' && a.state === 'connected');
    },
    120_000,
    'the agent to connect',
  );
}

beforeAll(async () => {
  gw = await startGateway();
  await gw.putPolicy(TEAM, POLICY);
  root = mkdtempSync(join(tmpdir(), 'gatehouse-place-'));
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'], subject: 'agent-place' }), root, sandbox: 'none', agentId: 'place-agent' });
  await agentConnected();
  c = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
}, 300_000);

afterAll(async () => {
  await c?.close().catch(() => {});
  await agent?.stop().catch(() => {});
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('where an output is kept', () => {
  it('keeps a small output with the team: no R2 object, no D1 row, and query_output still finds it', async () => {
    const r = await call(c, 'execute', { command: "printf 'alpha\\nthe needle is here\\nomega\\n'; printf 'warn: careful\\n' >&2" });
    expect(r.r.isError, r.t).toBeFalsy();
    small = r.s.artifact_handle as string;
    expect(small).toMatch(/^art_/);
    // Every byte was in the exit: nothing was uploaded and no index row written — the handle leads to the job.
    expect(indexRows(small)).toEqual([]);
    expect(gw.logs()).not.toContain(`/artifacts/${small}/`);
    expect(r2Keys(gw.stateDir).filter((k) => k.includes(small))).toEqual([]);
    expect(d1Artifacts()).toEqual([]);

    const q = await call(c, 'query_output', { artifactHandle: small, queryTerms: ['NEEDLE'], contextLines: 1 });
    expect(q.r.isError, q.t).toBeFalsy();
    expect(q.s).toMatchObject({
      matchCount: 1,
      totalLines: 4,
      searchedStreams: ['stdout', 'stderr'],
      excerpts: [{ lineStart: 1, lineEnd: 3, content: 'alpha\nthe needle is here\nomega', source: 'stdout' }],
    });
    const e = await call(c, 'query_output', { artifactHandle: small, queryTerms: ['careful'], stream: 'stderr' });
    expect(e.s).toMatchObject({ matchCount: 1, excerpts: [{ content: 'warn: careful', source: 'stderr' }] });
  });

  it('reads a small output through MCP resources and the admin API as it reads an R2 one', async () => {
    const res = await c.readResource({ uri: `gatehouse://artifacts/${small}/stdout` });
    expect(res.contents[0]).toMatchObject({ text: 'alpha\nthe needle is here\nomega\n' });
    const list = await c.listResources();
    expect(list.resources.map((x) => x.uri)).toContain(`gatehouse://artifacts/${small}/stdout`);
    const admin = await gw.token({ team: TEAM, scopes: ['admin'] });
    const h = { Authorization: `Bearer ${admin}` };
    const page = (await (await fetch(`${gw.url}/admin/v1/artifacts/${small}/stdout?offset=6&length=3`, { headers: h })).json()) as { text: string };
    expect(page.text).toBe('the');
    const dl = await fetch(`${gw.url}/admin/v1/artifacts/${small}/stdout/download`, { headers: h });
    expect(await dl.text()).toBe('alpha\nthe needle is here\nomega\n');
    // Another team's token: not found.
    const other = await gw.mcp('someone-else', ['artifacts:read']);
    try {
      const q = await call(other, 'query_output', { artifactHandle: small, queryTerms: ['needle'] });
      expect(q.r.isError).toBe(true);
      expect(q.t).toContain('not found');
    } finally {
      await other.close();
    }
  });

  it('puts a large output in R2, indexed by the team, and searches it', async () => {
    const r = await call(c, 'execute', { command: `seq 1 ${LARGE_N}`, timeout_ms: 50_000 });
    expect(r.r.isError, r.t).toBeFalsy();
    large = r.s.artifact_handle as string;
    const bytes = Array.from({ length: LARGE_N }, (_, i) => `${i + 1}\n`).join('').length;
    expect(bytes).toBeGreaterThan(SMALL_BODY_MAX_BYTES);
    expect(indexRows(large)).toEqual([{ handle: large, stream: 'stdout', place: 'r2', r2_key: `t/${TEAM}/a/${large}/stdout`, bytes }]);
    expect(r2Keys(gw.stateDir)).toContain(`t/${TEAM}/a/${large}/stdout`);
    expect(d1Artifacts()).toEqual([]);
    const q = await call(c, 'query_output', { artifactHandle: large, queryTerms: ['12345'], contextLines: 0 });
    expect(q.s).toMatchObject({ matchCount: 1, totalLines: LARGE_N, excerpts: [{ lineStart: 12345, lineEnd: 12345, content: '12345' }] });
  });

  it("expires index rows and R2 bodies from the team's object, with no cron", async () => {
    // Both artifacts' expiry moved into the past; the restarted object reads it back and its alarm sweeps.
    expect(updateObjects(gw.stateDir, 'artifacts', `UPDATE artifacts SET expires_at = 1`)).toBeGreaterThanOrEqual(1);
    // The small one is kept as long as its job's hours from the job's end: that end moved into the past too.
    const days = objectRows(gw.stateDir, 'jobs_segments', 'SELECT name FROM jobs_segments').map((r) => String(r.name));
    expect(days.length).toBeGreaterThan(0);
    for (const day of days) updateObjects(gw.stateDir, day, `UPDATE ${day} SET ended_at = 1 WHERE ended_at IS NOT NULL`);
    await gw.restart();
    await agentConnected();
    await until(async () => objectRows(gw.stateDir, 'artifacts', 'SELECT handle FROM artifacts').length === 0, 60_000, 'the expired index rows to go');
    expect(r2Keys(gw.stateDir).filter((k) => k.includes(large) || k.includes(small))).toEqual([]);
    expect(objectRows(gw.stateDir, 'artifact_chunks', 'SELECT handle FROM artifact_chunks')).toEqual([]);
    const c2 = await gw.mcp(TEAM, ['artifacts:read']);
    try {
      for (const handle of [small, large]) {
        const q = await call(c2, 'query_output', { artifactHandle: handle, queryTerms: ['1'] });
        expect(q.t).toContain('not found (it may have expired)');
      }
    } finally {
      await c2.close();
    }
  });
});
