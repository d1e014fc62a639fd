/**
 * A job's end and its artifact, end to end (real `wrangler dev` with DO SQLite, D1 and R2, real
 * agent processes, the official MCP client): the exit is recorded when the process ends while the
 * upload still runs; a failed upload or a `kill -9`'d agent keeps the output the edge received
 * live; the live tail reads past the inline cap; an agent whose socket is cut mid-job reconnects
 * and its result is recorded exactly once.
 *
 * The agent talks to the gateway through a loopback proxy (`agent-proxy.ts`) that can hold or
 * refuse artifact uploads and cut the agent's socket: the only way to make a real upload slow or
 * fail, or a real socket break, without changing the agent or the gateway for the test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { AgentProxy } from './agent-proxy.ts';
import { Fleet, call } from './fleet.ts';
import { WebSocket } from 'undici';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';
import { until } from '../support/until.ts';

const INLINE = 1000;
/** "one" doubled ten times, and a newline: 3,073 bytes of stdout from shell builtins, over INLINE. */
const LONG_ONES = 's=one; for i in 1 2 3 4 5 6 7 8 9 10; do s="$s$s"; done; echo "$s"';
const LONG_ONES_BYTES = 3 * 1024 + 1;
const POLICY = {
  ...DEFAULT_POLICY,
  shell: { enabled: true, allow: ['/.*/'] },
  runtime: { ...DEFAULT_POLICY.runtime, allowedRuntimes: [...DEFAULT_POLICY.runtime.allowedRuntimes, 'shell'] },
  limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 4, queueWaitMs: 20_000, inlineOutputBytes: INLINE, maxTimeoutMs: 60_000 },
};

type S = Record<string, unknown>;
const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${from + i}\n`).join('');

let gw: Gateway;
let proxy: AgentProxy;
let viaProxy: AgentProcess;
let doomed: AgentProcess;
let fleet: Fleet;

const status = async (c: Client, jobId: string, waitMs = 0) => (await call(c, 'job_status', { job_id: jobId, wait_ms: waitMs })).s;
const output = async (c: Client, jobId: string, o: S = {}) => (await call(c, 'job_output', { job_id: jobId, ...o })).s;

/** A hand-made agent connection that says hello under its own id and sends `msg` (what a stolen agent token allows). */
async function rogueReport(token: string, msg: S): Promise<void> {
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/agent/v1/connect`, { headers: { Authorization: `Bearer ${token}` } });
  const welcomed = new Promise<void>((resolve, reject) => {
    ws.addEventListener('message', (e) => {
      if ((JSON.parse(String(e.data)) as S).type === 'welcome') resolve();
    });
    ws.addEventListener('error', () => reject(new Error('rogue agent could not connect')));
  });
  await new Promise<void>((r) => ws.addEventListener('open', () => r()));
  ws.send(
    JSON.stringify({
      type: 'hello',
      v: PROTOCOL_VERSION,
      agentId: 'rogue',
      version: 'x',
      capacity: 1,
      sandbox: 'gvisor',
      runtimes: [],
      labels: [],
      running: [],
    }),
  );
  await welcomed;
  ws.send(JSON.stringify(msg));
  await new Promise((r) => setTimeout(r, 500));
  ws.close();
}

async function auditRows(team: string, jobId: string): Promise<S[]> {
  const a = await fleet.admin(team, 'GET', '/audit?tool=execute&limit=200');
  return (a.body.entries as S[]).filter((e) => e.jobId === jobId);
}

describe("a job's end and its artifact", () => {
  beforeAll(async () => {
    gw = await startGateway();
    fleet = new Fleet(gw, { tmpPrefix: 'gatehouse-durart-', capacity: 3 });
    proxy = new AgentProxy(gw.url);
    await proxy.start();
    for (const team of ['art', 'k9p']) await gw.putPolicy(team, POLICY);
    [viaProxy, doomed] = await Promise.all([fleet.agentFor('art', 'art-proxied', { url: proxy.url }), fleet.agentFor('k9p', 'k9p-agent')]);
  }, 300_000);

  afterAll(async () => {
    await fleet?.close();
    await proxy?.stop();
    await gw?.stop();
  });

  it('reports the exit when the process ends while the upload is held, never turns it lost, ignores another agent, and ends complete', async () => {
    const c = await fleet.mcp('art');
    const release = proxy.holdUploads();
    let released = false;
    try {
      // Over the inline cap (INLINE, shared by both streams): neither stream is whole in the exit, so both are uploaded.
      const started = await call(c, 'execute', { command: `${LONG_ONES}; echo two >&2; exit 3`, background: true });
      const jobId = started.s.job_id as string;
      const ended = await status(c, jobId, 30_000);
      expect(ended).toMatchObject({
        state: 'exited',
        exit_code: 3,
        artifact_state: 'uploading',
        artifacts: { stdout: { state: 'uploading' }, stderr: { state: 'uploading' } },
      });
      // Held for more than 3 heartbeats (1 s each in tests): a job whose exit is recorded is never lost.
      await new Promise((r) => setTimeout(r, 4500));
      expect(await status(c, jobId)).toMatchObject({ state: 'exited', exit_code: 3, artifact_state: 'uploading' });
      expect((await fleet.admin('art', 'GET', `/jobs/${jobId}`)).body.job).toMatchObject({ state: 'exited', artifact_state: 'uploading' });
      // Its output is readable meanwhile, from what the edge kept live; more may come, so no eof yet.
      expect(await output(c, jobId)).toMatchObject({ data: expect.stringMatching(/^(one)+/), source: 'live', eof: false, total_bytes: null });
      // Another agent of the team can neither write the open artifact nor say how its upload ended.
      const rogueToken = await gw.token({ team: 'art', scopes: ['agent'], subject: 'rogue-agent' });
      const put = await fetch(`${gw.url}/agent/v1/artifacts/${started.s.artifact_handle as string}/stdout`, {
        method: 'PUT',
        body: 'FORGED\n',
        headers: { Authorization: `Bearer ${rogueToken}`, 'X-Gatehouse-Job': jobId },
      });
      expect(put.status).toBe(404);
      await rogueReport(rogueToken, { type: 'job.artifact', jobId, stream: 'stdout', state: 'failed', bytes: 0 });
      expect(await status(c, jobId)).toMatchObject({ artifacts: { stdout: { state: 'uploading' } } });
      released = true;
      release();
      const done = await until(
        async () => {
          const v = await status(c, jobId);
          return v.artifact_state === 'complete' ? v : null;
        },
        30_000,
        'the artifact to be complete',
      );
      expect(done).toMatchObject({
        state: 'exited',
        exit_code: 3,
        artifacts: { stdout: { state: 'complete', bytes: LONG_ONES_BYTES }, stderr: { state: 'complete', bytes: 4 } },
      });
      expect(await output(c, jobId, { stream: 'stderr' })).toMatchObject({ data: 'two\n', source: 'artifact', eof: true });
      expect((await fleet.admin('art', 'GET', `/jobs/${jobId}`)).body.job).toMatchObject({ state: 'exited', artifact_state: 'complete' });
      // The agent reported each stream once, and the call has one audit row, completed with the real exit.
      expect(
        proxy
          .messages('job.artifact', jobId)
          .map((m) => [m.stream, m.state])
          .sort(),
      ).toEqual([
        ['stderr', 'complete'],
        ['stdout', 'complete'],
      ]);
      const rows = await until(
        async () => {
          const mine = await auditRows('art', jobId);
          return mine.length === 1 && mine[0].exitStatus === 'exit 3' ? mine : null;
        },
        20_000,
        'the audit row to be completed',
      );
      expect(rows).toHaveLength(1);
    } finally {
      if (!released) release();
    }
  }, 120_000);

  it('a foreground call answers once the held upload is stored, with a queryable artifact', async () => {
    const c = await fleet.mcp('art');
    const release = proxy.holdUploads();
    try {
      let answered: Awaited<ReturnType<typeof call>> | null = null;
      const pending = call(c, 'runtime_execute', { runtime: 'shell', code: 'seq 1 500; echo needle-here', outputMode: 'minimal' }).then((r) => (answered = r));
      const jobId = await until(
        async () => {
          if (answered) throw new Error(`the call answered while its upload was held: ${answered.t}`);
          const l = await call(c, 'job_list', { tool: 'runtime_execute', limit: 5 });
          return ((l.s.jobs as S[]).find((j) => j.state === 'exited' && j.artifact_state === 'uploading')?.job_id as string | undefined) ?? null;
        },
        30_000,
        'the foreground job to end with its upload held',
      );
      await new Promise((r) => setTimeout(r, 500));
      expect(answered).toBeNull();
      release();
      const r = await pending;
      expect(r.s).toMatchObject({ status: 'success', exitCode: 0, jobId });
      const q = await call(c, 'query_output', { artifactHandle: r.s.artifactHandle, queryTerms: ['needle-here'] });
      expect(q.s).toMatchObject({ matchCount: 1 });
    } finally {
      release();
    }
  }, 120_000);

  it('an upload that fails ends partial: the job stays exited and its output stays readable from what the edge kept', async () => {
    const c = await fleet.mcp('art');
    proxy.refuseUploads(400);
    try {
      const expected = lines(1, 3000);
      const started = await call(c, 'execute', { command: 'seq', args: ['1', '3000'], background: true });
      const jobId = started.s.job_id as string;
      const v = await until(
        async () => {
          const s = await status(c, jobId, 30_000);
          return s.artifact_state !== 'uploading' && s.state !== 'running' ? s : null;
        },
        60_000,
        'the upload to end',
      );
      expect(v).toMatchObject({
        state: 'exited',
        exit_code: 0,
        artifact_state: 'partial',
        artifacts: { stdout: { state: 'partial', bytes: expected.length }, stderr: { state: 'none' } },
      });
      expect(proxy.messages('job.artifact', jobId)).toMatchObject([{ stream: 'stdout', state: 'failed' }]);
      // Past the inline cap (1000 bytes): the live output the edge kept, to its end.
      const page = await output(c, jobId, { offset: 10_000, max_bytes: 2000 });
      expect(page).toMatchObject({ data: expected.slice(10_000, 12_000), source: 'live', eof: false, total_bytes: expected.length });
      const last = await output(c, jobId, { offset: expected.length - 5 });
      expect(last).toMatchObject({ data: expected.slice(-5), eof: true });
      const res = await fleet.admin('art', 'GET', `/jobs/${jobId}?include=result`);
      expect((res.body.result as S).stdout as string).toBe(expected.slice(0, INLINE));
    } finally {
      proxy.refuseUploads(null);
    }
  }, 120_000);

  it('the live tail of a running job reads from the middle of its output, far past the inline cap', async () => {
    const c = await fleet.mcp('art');
    const expected = lines(1, 20_000);
    const started = await call(c, 'execute', { command: 'seq 1 20000; sleep 30', background: true });
    const jobId = started.s.job_id as string;
    const page = await until(
      async () => {
        const o = await output(c, jobId, { offset: 50_000, max_bytes: 100 });
        return (o.data as string).length === 100 ? o : null;
      },
      30_000,
      'the output past 50,000 bytes',
    );
    expect(page).toMatchObject({ state: 'running', data: expected.slice(50_000, 50_100), source: 'live', next_offset: 50_100, eof: false, total_bytes: null });
    await call(c, 'job_kill', { job_id: jobId });
    expect(await status(c, jobId, 30_000)).toMatchObject({ state: 'cancelled' });
  }, 120_000);

  it('kill -9 of the agent mid-job: lost within 3 heartbeats, and the lines it printed before stay readable', async () => {
    const c = await fleet.mcp('k9p');
    const started = await call(c, 'execute', { command: 'for i in 1 2 3 4 5; do echo known-line-$i; done; sleep 30', background: true });
    const jobId = started.s.job_id as string;
    const printed = 'known-line-1\nknown-line-2\nknown-line-3\nknown-line-4\nknown-line-5\n';
    await until(async () => (await output(c, jobId)).data === printed, 30_000, 'the printed lines to arrive live');
    await doomed.stop('SIGKILL');
    const killedAt = Date.now();
    const end = await status(c, jobId, 30_000);
    expect(end).toMatchObject({
      state: 'lost',
      agent_id: 'k9p-agent',
      artifact_state: 'partial',
      artifacts: { stdout: { state: 'partial', bytes: printed.length } },
    });
    // HEARTBEAT_MS is 1000 in tests: 3 heartbeats, the next liveness tick, 2 s of slack for a loaded machine.
    expect((end.ended_at as number) - killedAt).toBeLessThan(3 * 1000 + 1000 + 2000);
    expect(await output(c, jobId)).toMatchObject({ data: printed, source: 'live', eof: true, total_bytes: printed.length });
    expect(await output(c, jobId, { offset: 13, max_bytes: 13 })).toMatchObject({ data: 'known-line-2\n' });
  }, 120_000);

  it('an agent whose socket is cut mid-job, and again right after it sent the exit, reconnects and its result is recorded once', async () => {
    const c = await fleet.mcp('art');
    const started = await call(c, 'execute', { command: 'echo before; sleep 3; echo after', background: true });
    const jobId = started.s.job_id as string;
    await until(async () => (await output(c, jobId)).data === 'before\n', 30_000, 'the job to print');
    const connectionsBefore = proxy.connections;
    const hellosBefore = proxy.messages('hello').length;
    proxy.dropRightAfterExitOf(jobId);
    proxy.dropAgentSockets(); // mid-job: the agent process lives on
    // It reconnects with backoff and says in its hello that it holds the job.
    await until(
      async () =>
        proxy
          .messages('hello')
          .slice(hellosBefore)
          .some((h) => (h.running as string[]).includes(jobId)),
      30_000,
      'a hello that lists the job',
    );
    expect(await status(c, jobId)).toMatchObject({ state: 'running' });
    // The first exit reached the gateway but its acknowledgement was cut off: the agent sends it again after reconnecting.
    const end = await status(c, jobId, 30_000);
    expect(end).toMatchObject({ state: 'exited', exit_code: 0, agent_id: 'art-proxied' });
    await until(async () => proxy.messages('job.exit', jobId).length >= 2, 30_000, 'the exit to be sent again');
    expect(proxy.connections).toBeGreaterThanOrEqual(connectionsBefore + 2);
    expect(viaProxy.logs()).toMatch(/disconnected from .*reconnecting/);
    const out = await until(
      async () => {
        const o = await output(c, jobId);
        return o.eof ? o : null;
      },
      30_000,
      'the stored output',
    );
    expect(out.data).toBe('before\nafter\n');
    const listed = await call(c, 'job_list', { limit: 200 });
    expect((listed.s.jobs as S[]).filter((j) => j.job_id === jobId)).toHaveLength(1);
    const rows = await until(
      async () => {
        const mine = await auditRows('art', jobId);
        return mine.length === 1 && mine[0].exitStatus === 'exit 0' ? mine : null;
      },
      20_000,
      'one completed audit row',
    );
    expect(rows).toHaveLength(1);
  }, 120_000);
});
