/**
 * Durable dispatch end to end: real `wrangler dev` (DO SQLite, D1, R2), real agent processes in
 * gVisor / bubblewrap, the official MCP client. Background jobs read and killed across clients,
 * a gateway restart in the middle of a job, revoked agents, the sandbox floor, agent identity
 * attacks, and Cloudflare's size limits.
 * Outside CI the file skips when runsc or bwrap is missing (and says so); under CI=true that is a failure.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rawAgent as rawAgentOf } from '../support/raw-agent.ts';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, requireParts, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { RUNTIME_NAMES } from '../../src/contracts/runtimes.ts';
import { PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';
import { until } from '../support/until.ts';

const PARTS = requireParts({ runsc: hasCommand('runsc'), bwrap: hasCommand('bwrap') });
if (!PARTS) console.warn('durable.test.ts: skipped — runsc or bwrap is not installed (allowed outside CI only)');
const maybe = PARTS ? describe : describe.skip;

const TEN_MIB = 10 * 1024 * 1024;
const POLICY = {
  ...DEFAULT_POLICY,
  shell: { enabled: true, allow: ['/.*/'] },
  executables: { allow: [...DEFAULT_POLICY.executables.allow, 'sh', 'tr'] },
  limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 8, queueWaitMs: 20_000, inlineOutputBytes: TEN_MIB, maxTimeoutMs: 60_000 },
};

type S = Record<string, unknown>;
const text = (r: object) => ((r as { content?: unknown }).content as { text: string }[] | undefined)?.[0]?.text ?? '';

let gw: Gateway;
const REV_JTI = `rev-agent-${Date.now()}`;
/** [dur-gv, rev-a, rev-b, floor-bw, floor2-bw, floor2-gv, k9-agent] */
let revAgents: AgentProcess[] = [];
const roots: string[] = [];
const agents: AgentProcess[] = [];
const clients: Client[] = [];

function workspace(): string {
  const d = mkdtempSync(join(tmpdir(), 'gatehouse-durable-'));
  roots.push(d);
  return d;
}

type AgentSpec = { id: string; sandbox: 'gvisor' | 'bwrap'; capacity?: number; jti?: string; subject?: string; labels?: string[] };

/** Starts an agent and waits until the team's registry shows it connected (agents start slowly on a loaded machine). */
async function agentFor(team: string, o: AgentSpec) {
  const token = await gw.token({ team, scopes: ['agent'], jti: o.jti, subject: o.subject ?? `agent-${o.id}` });
  const a = startAgent(gw, {
    token,
    root: workspace(),
    sandbox: o.sandbox,
    capacity: o.capacity ?? 2,
    agentId: o.id,
    extraArgs: (o.labels ?? []).flatMap((l) => ['--label', l]),
  });
  agents.push(a);
  await until(
    async () => {
      if (a.proc.exitCode !== null) throw new Error(`agent ${o.id} exited:\n${a.logs()}`);
      const r = await admin(team, 'GET', '/agents');
      return (r.body.agents as S[] | undefined)?.some((x) => x.agent_id === o.id && x.state === 'connected');
    },
    150_000,
    `agent ${o.id} to connect`,
  );
  return a;
}

async function mcp(team: string, scopes = ['execute', 'artifacts:read']): Promise<Client> {
  const c = await gw.mcp(team, scopes);
  clients.push(c);
  return c;
}

async function call(c: Client, name: string, args: S, timeout = 90_000) {
  const r = await c.callTool({ name, arguments: args }, undefined, { timeout });
  return { r, s: (r.structuredContent ?? {}) as S, t: text(r) };
}

async function admin(team: string, method: string, path: string, body?: unknown) {
  const token = await gw.token({ team, scopes: ['admin'] });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as S };
}

const rawAgent = (token: string) => rawAgentOf(gw.url, token);

function hello(agentId: string, extra: S = {}): string {
  return JSON.stringify({
    type: 'hello',
    v: PROTOCOL_VERSION,
    agentId,
    version: 'test',
    capacity: 1,
    sandbox: 'gvisor',
    runtimes: [],
    labels: [],
    running: [],
    ...extra,
  });
}

maybe('durable dispatch', () => {
  beforeAll(async () => {
    gw = await startGateway();
    for (const team of ['dur', 'other', 'rev']) await gw.putPolicy(team, POLICY);
    // Its job waits for an agent across a gateway restart: the longest queue wait allowed.
    await gw.putPolicy('nosync', { ...POLICY, limits: { ...POLICY.limits, queueWaitMs: 60_000 } });
    for (const team of ['floor', 'floor2']) await gw.putPolicy(team, { ...POLICY, sandbox: { minimum: 'gvisor' } });
    await gw.putPolicy('k9', { ...POLICY, limits: { ...POLICY.limits, maxConcurrentJobs: 1 }, queue: { maxLength: 1 } });
    // Every agent the file needs, started together: one at a time takes minutes on a loaded machine.
    revAgents = await Promise.all([
      agentFor('dur', { id: 'dur-gv', sandbox: 'gvisor', capacity: 3 }),
      agentFor('rev', { id: 'rev-a', sandbox: 'bwrap', jti: REV_JTI }),
      agentFor('rev', { id: 'rev-b', sandbox: 'bwrap' }),
      agentFor('floor', { id: 'floor-bw', sandbox: 'bwrap' }),
      agentFor('floor2', { id: 'floor2-bw', sandbox: 'bwrap' }),
      agentFor('floor2', { id: 'floor2-gv', sandbox: 'gvisor', labels: ['gpu'] }),
      agentFor('k9', { id: 'k9-agent', sandbox: 'bwrap', capacity: 1 }),
    ]);
  }, 300_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    for (const a of agents) await a.stop().catch(() => {});
    await gw?.stop();
    for (const d of roots) rmSync(d, { recursive: true, force: true });
  });

  it('a background job started by one client is read (from 0 and from the middle) and killed by another client of the team; another team gets "not found"', async () => {
    const a = await mcp('dur');
    const b = await mcp('dur');
    const stranger = await mcp('other', ['execute', 'artifacts:read']);
    const started = await call(a, 'execute', { command: 'for i in $(seq 1 600); do echo line-$i; sleep 0.05; done', background: true });
    expect(started.r.isError).toBeFalsy();
    const jobId = started.s.job_id as string;
    expect(['queued', 'running']).toContain(started.s.state);
    expect(started.s.artifact_handle).toMatch(/^art_/);

    // Live tail from another client while it runs.
    const first = await until(
      async () => {
        const o = await call(b, 'job_output', { job_id: jobId, offset: 0, max_bytes: 4096 });
        return (o.s.data as string).includes('line-3\n') ? o : null;
      },
      30_000,
      'live output',
    );
    expect(first.s.source).toBe('live');
    expect(first.s.eof).toBe(false);
    expect((first.s.data as string).startsWith('line-1\nline-2\n')).toBe(true);
    const middle = await call(b, 'job_output', { job_id: jobId, offset: 9, max_bytes: 5 });
    expect(middle.s.data).toBe((first.s.data as string).slice(9, 14));
    expect(middle.s.next_offset).toBe(14);

    for (const tool of ['job_status', 'job_output', 'job_kill']) {
      const r = await call(stranger, tool, { job_id: jobId });
      expect(r.r.isError).toBe(true);
      expect(r.t).toContain(`job "${jobId}" not found`);
    }
    const theirList = await call(stranger, 'job_list', {});
    expect((theirList.s.jobs as S[]).map((j) => j.job_id)).not.toContain(jobId);

    const killed = await call(b, 'job_kill', { job_id: jobId });
    expect(killed.r.isError).toBeFalsy();
    const end = await call(b, 'job_status', { job_id: jobId, wait_ms: 30_000 });
    expect(end.s).toMatchObject({ job_id: jobId, state: 'cancelled', agent_id: 'dur-gv', sandbox: 'gvisor', background: true });
    const listed = await call(b, 'job_list', { state: 'cancelled' });
    expect((listed.s.jobs as S[]).filter((j) => j.job_id === jobId)).toHaveLength(1);
  }, 120_000);

  it("serves a finished job's output from its stored artifact at any offset, with eof", async () => {
    const c = await mcp('dur');
    const expected = Array.from({ length: 20_000 }, (_, i) => `${i + 1}\n`).join('');
    const started = await call(c, 'execute', { command: 'seq', args: ['1', '20000'], background: true });
    const jobId = started.s.job_id as string;
    // job_status answers when the process ends; the artifact's upload follows.
    const end = await until(
      async () => {
        const v = await call(c, 'job_status', { job_id: jobId, wait_ms: 60_000 });
        return v.s.artifact_state === 'complete' ? v : null;
      },
      60_000,
      'the artifact to be stored',
    );
    expect(end.s).toMatchObject({ state: 'exited', exit_code: 0, artifact_state: 'complete', stdout_bytes: expected.length });
    const mid = await call(c, 'job_output', { job_id: jobId, offset: 50_000, max_bytes: 1000 });
    expect(mid.s).toMatchObject({ source: 'artifact', data: expected.slice(50_000, 51_000), next_offset: 51_000, eof: false, total_bytes: expected.length });
    const last = await call(c, 'job_output', { job_id: jobId, offset: expected.length - 10, max_bytes: 1000 });
    expect(last.s).toMatchObject({ data: expected.slice(-10), eof: true });
  }, 120_000);

  it('a foreground call names its job in the first progress notification and says which agent and sandbox ran it', async () => {
    const c = await mcp('dur');
    const notes: string[] = [];
    const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['hi'] } }, undefined, {
      timeout: 60_000,
      onprogress: (p) => notes.push(p.message ?? ''),
    });
    const s = r.structuredContent as S;
    expect(s).toMatchObject({ stdout: 'hi\n', agent_id: 'dur-gv', sandbox: 'gvisor' });
    expect(notes[0]).toContain(`job ${s.job_id as string}`);
  }, 60_000);

  it("an agent token cannot overwrite a finished job's artifact, and a forged job.exit from another agent is ignored", async () => {
    const c = await mcp('dur');
    const done = await call(c, 'execute', { command: 'echo', args: ['original'] });
    const jobId = done.s.job_id as string;
    for (const subject of ['agent-dur-gv', 'some-other-agent']) {
      const token = await gw.token({ team: 'dur', scopes: ['agent'], subject });
      const put = await fetch(`${gw.url}/agent/v1/artifacts/${done.s.artifact_handle as string}/stdout`, {
        method: 'PUT',
        body: 'OVERWRITTEN\n',
        headers: { Authorization: `Bearer ${token}`, 'X-Gatehouse-Job': jobId },
      });
      expect([404, 409]).toContain(put.status);
    }
    const read = await call(c, 'job_output', { job_id: jobId });
    expect(read.s.data).toBe('original\n');

    // A rogue agent (another token, its own id) sends a made-up result for a job it does not run.
    const bg = await call(c, 'execute', { command: 'sleep 2; echo real', background: true });
    const bgId = bg.s.job_id as string;
    await until(async () => (await call(c, 'job_status', { job_id: bgId })).s.state === 'running', 20_000, 'job running');
    const rogue = await rawAgent(await gw.token({ team: 'dur', scopes: ['agent'], subject: 'rogue' }));
    rogue.ws.send(hello('rogue'));
    await until(async () => rogue.messages.some((m) => m.type === 'welcome'), 10_000, 'welcome');
    const empty = { bytes: 0, lines: 0, artifactTruncated: false };
    rogue.ws.send(
      JSON.stringify({
        type: 'job.exit',
        jobId: bgId,
        state: 'exited',
        exitCode: 0,
        signal: null,
        timedOut: false,
        durationMs: 1,
        stdout: 'FORGED BY ROGUE AGENT',
        stderr: '',
        stdoutTruncated: false,
        stderrTruncated: false,
        streams: { stdout: empty, stderr: empty },
        artifactsUploaded: true,
      }),
    );
    const end = await call(c, 'job_status', { job_id: bgId, wait_ms: 30_000 });
    expect(end.s).toMatchObject({ state: 'exited', exit_code: 0, agent_id: 'dur-gv' });
    const out = await call(c, 'job_output', { job_id: bgId });
    expect(out.s.data).toBe('real\n');
    const res = await admin('dur', 'GET', `/jobs/${bgId}?include=result`);
    expect((res.body.result as S).stdout).toBe('real\n');
    rogue.ws.close();
  }, 120_000);

  it("a second agent token cannot take over a connected agent's id", async () => {
    const impostor = await rawAgent(await gw.token({ team: 'dur', scopes: ['agent'], subject: 'impostor' }));
    impostor.ws.send(hello('dur-gv'));
    const closed = await impostor.closed;
    expect(closed.code).toBe(4003);
    expect(closed.reason).toContain('in use by another agent token');
    const c = await mcp('dur');
    const r = await call(c, 'execute', { command: 'echo', args: ['still-mine'] });
    expect(r.s).toMatchObject({ stdout: 'still-mine\n', agent_id: 'dur-gv' });
  }, 60_000);

  it('keeps the agent registry out of the socket attachment: 16 runtimes with long versions at capacity 32', async () => {
    const longVersion = (n: string) => `${n} ${'9.'.repeat(1500)}0`; // ~3 KB each, ~48 KB in all: 3× the attachment limit
    const runtimes = RUNTIME_NAMES.map((name) => ({ name, executable: name, path: `/usr/bin/${name}`, version: longVersion(name) }));
    const big = await rawAgent(await gw.token({ team: 'other', scopes: ['agent'], subject: 'big-agent' }));
    big.ws.send(
      hello('big-agent', {
        capacity: 32,
        runtimes,
        labels: Array.from({ length: 32 }, (_, i) => `label-${i}`),
        running: Array.from({ length: 32 }, (_, i) => `00000000-0000-0000-0000-${String(i).padStart(12, '0')}`),
      }),
    );
    await until(async () => big.messages.some((m) => m.type === 'welcome'), 10_000, 'welcome');
    const listed = await admin('other', 'GET', '/agents');
    const me = (listed.body.agents as S[]).find((a) => a.agent_id === 'big-agent')!;
    expect(me).toMatchObject({ state: 'connected', capacity: 32 });
    expect((me.runtimes as S[]).map((r) => r.version)).toEqual(runtimes.map((r) => r.version));
    big.ws.close();
  }, 60_000);

  it("revoking a connected agent's token disconnects it within a second; the next jobs go to another agent", async () => {
    const a = revAgents[1];
    const before = Date.now();
    const revoke = await admin('rev', 'DELETE', `/tokens/${REV_JTI}?unrecorded=true`);
    expect(revoke.status).toBe(200);
    expect(revoke.body.agentsDisconnected).toBe(1);
    await until(async () => /agent token revoked/.test(a.logs()), 1_000, 'the agent to see its socket closed');
    expect(Date.now() - before).toBeLessThan(2_000);
    const c = await mcp('rev');
    const runs = await Promise.all(Array.from({ length: 4 }, (_, i) => call(c, 'execute', { command: 'echo', args: [`after-revoke-${i}`] })));
    for (const r of runs) expect(r.s).toMatchObject({ agent_id: 'rev-b', sandbox: 'bwrap', exit_code: 0 });
    await until(async () => /refused the agent token/.test(a.logs()), 30_000, 'the revoked agent to be refused on reconnect');
    const listed = await admin('rev', 'GET', '/agents');
    expect((listed.body.agents as S[]).find((x) => x.agent_id === 'rev-a')).toMatchObject({ state: 'disconnected' });
  }, 120_000);

  it('a team whose policy requires gVisor never runs a job on a bwrap agent', async () => {
    const onlyBwrap = await mcp('floor');
    const refused = await call(onlyBwrap, 'execute', { command: 'echo', args: ['x'] });
    expect(refused.r.isError).toBe(true);
    expect(refused.t).toContain('sandbox.minimum = gvisor');
    const c = await mcp('floor2');
    const runs = await Promise.all(Array.from({ length: 6 }, (_, i) => call(c, 'execute', { command: 'echo', args: [`n${i}`] })));
    for (const r of runs) expect(r.s).toMatchObject({ agent_id: 'floor2-gv', sandbox: 'gvisor', exit_code: 0 });
    const labelled = await call(c, 'execute', { command: 'echo', args: ['gpu'], labels: ['gpu'] });
    expect(labelled.s).toMatchObject({ agent_id: 'floor2-gv' });
    const noSuch = await call(c, 'execute', { command: 'echo', args: ['x'], labels: ['arm64'] });
    expect(noSuch.t).toContain('carries all the labels');
  }, 120_000);

  it('a 2025-era client that hangs up mid-call does not stop its job: the result stays readable and the call has exactly one audit row', async () => {
    const token = await gw.token({ team: 'dur', scopes: ['execute', 'artifacts:read'] });
    const ctl = new AbortController();
    const res = await fetch(gw.mcpUrl, {
      method: 'POST',
      signal: ctl.signal,
      headers: {
        Authorization: `Bearer ${token}`,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': '2025-11-25',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'execute', arguments: { command: 'sleep 2; echo survived' }, _meta: { progressToken: 'p1' } },
      }),
    });
    // Read until the first progress notification names the job, then hang up without cancelling.
    const reader = res.body!.getReader();
    let seen = '';
    let jobId = '';
    while (!jobId) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`stream ended before a progress notification: ${seen}`);
      seen += new TextDecoder().decode(value);
      jobId = /job ([0-9a-f-]{36})/.exec(seen)?.[1] ?? '';
    }
    ctl.abort();
    const c = await mcp('dur');
    const end = await call(c, 'job_status', { job_id: jobId, wait_ms: 30_000 });
    expect(end.s).toMatchObject({ state: 'exited', exit_code: 0 });
    expect((await call(c, 'job_output', { job_id: jobId })).s.data).toBe('survived\n');
    const rows = await until(
      async () => {
        const a = await admin('dur', 'GET', '/audit?tool=execute&limit=200');
        const mine = (a.body.entries as S[]).filter((e) => e.jobId === jobId);
        return mine.length === 1 && mine[0].exitStatus === 'exit 0' ? mine : null;
      },
      20_000,
      'the audit row to be completed',
    );
    expect(rows).toHaveLength(1);
  }, 60_000);

  it('audits admin actions: policy set, token create and revoke, job kill', async () => {
    await gw.putPolicy('dur', POLICY);
    const created = await admin('dur', 'POST', '/tokens', { subject: 'audited-token', scopes: ['execute'] });
    expect(created.status).toBe(201);
    await admin('dur', 'DELETE', `/tokens/${created.body.jti as string}`);
    await admin('dur', 'POST', '/jobs/no-such-job/kill');
    const audit = await admin('dur', 'GET', '/audit?limit=50');
    const tools = (audit.body.entries as S[]).map((e) => e.tool);
    for (const t of ['admin.policy_set', 'admin.token_create', 'admin.token_revoke', 'admin.job_kill']) expect(tools).toContain(t);
  }, 60_000);

  it("queue cap and kill -9: a full queue refuses at once; a killed agent's job is lost within 3 heartbeats and its rows reach that final state", async () => {
    const agent = revAgents[6];
    const c = await mcp('k9');
    const running = await call(c, 'execute', { command: 'sleep 30', background: true });
    await until(async () => (await call(c, 'job_status', { job_id: running.s.job_id })).s.state === 'running', 20_000, 'job running');
    const queued = await call(c, 'execute', { command: 'echo', args: ['queued'], background: true });
    expect(queued.s.state).toBe('queued');
    const full = await call(c, 'execute', { command: 'echo', args: ['too many'], background: true });
    expect(full.r.isError).toBe(true);
    expect(full.t).toContain('queue is full');
    await call(c, 'job_kill', { job_id: queued.s.job_id });

    await agent.stop('SIGKILL');
    const killedAt = Date.now();
    const end = await call(c, 'job_status', { job_id: running.s.job_id, wait_ms: 30_000 });
    expect(end.s).toMatchObject({ state: 'lost', agent_id: 'k9-agent', error: { code: 'lost' } });
    // HEARTBEAT_MS is 1000 in tests: 3 heartbeats after the socket closed, at the next liveness tick (every
    // heartbeat), with 2 s of slack for a loaded machine.
    expect((end.s.ended_at as number) - killedAt).toBeLessThan(3 * 1000 + 1000 + 2000);
    const rows = await until(
      async () => {
        const a = await admin('k9', 'GET', '/audit?tool=execute&limit=50');
        const mine = (a.body.entries as S[]).filter((e) => e.jobId === running.s.job_id);
        return mine.length === 1 && mine[0].exitStatus === 'lost' ? mine : null;
      },
      20_000,
      'the audit row to say lost',
    );
    expect(rows[0]).toMatchObject({ decision: 'failed' });
    const refused = (await call(c, 'job_list', { state: 'refused' })).s.jobs as S[];
    expect(refused.some((j) => (j.error as S | null)?.code === 'queue_full')).toBe(true);
  }, 120_000);

  it('a gateway restart mid-job loses nothing: the job completes, its result and a 10 MiB inline output read back, recorded once; a job accepted just before the restart keeps its audit row', async () => {
    const c = await mcp('dur');
    // 10 MiB of inline output: stored in the DO in chunks below the 2 MB row limit.
    const big = await call(c, 'execute', { command: `head -c ${TEN_MIB} /dev/zero | tr '\\0' x` }, 120_000);
    expect(big.s.stdout_truncated).toBe(false);
    expect((big.s.stdout as string).length).toBe(TEN_MIB);
    const bigId = big.s.job_id as string;

    const bg = await call(c, 'execute', { command: 'sleep 10; echo finished', background: true });
    const jobId = bg.s.job_id as string;
    await until(async () => (await call(c, 'job_status', { job_id: jobId })).s.state === 'running', 20_000, 'job running');
    // Team `nosync` has no agent: its job waits in the queue. The team's object wrote the call's audit
    // row with the job, in one step, before it answered; the restart comes right after the answer.
    const nosync = await call(await mcp('nosync'), 'execute', { command: 'echo accepted before the restart', background: true });
    const nosyncId = nosync.s.job_id as string;
    const auditOf = async (team: string, id: string) =>
      ((await admin(team, 'GET', '/audit?tool=execute&limit=200')).body.entries as S[]).filter((e) => e.jobId === id);
    await gw.restart();
    // The queued job's audit row is read back from the restarted object while the job still waits.
    const queuedRow = await until(
      async () => {
        const rows = await auditOf('nosync', nosyncId);
        return rows.length === 1 ? rows : null;
      },
      20_000,
      "the queued job's audit row after the restart",
    );
    expect(queuedRow[0]).toMatchObject({ decision: 'allowed', exitStatus: 'queued' });
    const nosyncAgent = agentFor('nosync', { id: 'nosync-bw', sandbox: 'bwrap' });

    const c2 = await mcp('dur');
    const end = await call(c2, 'job_status', { job_id: jobId, wait_ms: 60_000 });
    expect(end.s).toMatchObject({ state: 'exited', exit_code: 0, agent_id: 'dur-gv' });
    // The exit comes first, the artifact upload after it: until that ends, job_output reads the live copy (eof false).
    const out = await until(
      async () => {
        const o = await call(c2, 'job_output', { job_id: jobId });
        expect(o.s.data).toBe('finished\n');
        return o.s.eof === true ? o : null;
      },
      20_000,
      "the job's artifact to be complete",
    );
    expect(out.s).toMatchObject({ data: 'finished\n', eof: true });
    const listed = await call(c2, 'job_list', { limit: 200 });
    expect((listed.s.jobs as S[]).filter((j) => j.job_id === jobId)).toHaveLength(1);
    const audit = await until(
      async () => {
        const a = await admin('dur', 'GET', '/audit?tool=execute&limit=200');
        const rows = (a.body.entries as S[]).filter((e) => e.jobId === jobId);
        return rows.length === 1 && rows[0].exitStatus === 'exit 0' ? rows : null;
      },
      20_000,
      'the audit row to be completed',
    );
    expect(audit[0]).toMatchObject({ decision: 'allowed', exitStatus: 'exit 0' });

    const stored = await admin('dur', 'GET', `/jobs/${bigId}?include=result`);
    const stdout = (stored.body.result as S).stdout as string;
    expect(stdout.length).toBe(TEN_MIB);
    expect(/^x+$/.test(stdout)).toBe(true);

    await nosyncAgent;
    const ran = await call(await mcp('nosync'), 'job_status', { job_id: nosyncId, wait_ms: 60_000 });
    expect(ran.s).toMatchObject({ state: 'exited', exit_code: 0, agent_id: 'nosync-bw' });
    const done = await until(
      async () => {
        const rows = await auditOf('nosync', nosyncId);
        return rows.length === 1 && rows[0].exitStatus === 'exit 0' ? rows : null;
      },
      20_000,
      "the queued job's audit row to be completed, once",
    );
    expect(done[0].reason).toMatch(/agent nosync-bw \(bwrap\)/);
  }, 300_000);
});
