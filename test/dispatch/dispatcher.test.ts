/**
 * The team DO's capabilities wired together (src/dispatch/capabilities.ts) over node:sqlite, fake
 * agent sockets and a clock the test moves: a job placed on a connected agent, its output and end
 * reaching its follower, the rules on who may report a job, the loss of a silent agent's jobs, the
 * one alarm's wake-ups, a restart over the same storage, and an unknown Workers plan.
 */
import { describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION, type JobSpec } from '../../src/contracts/agent-protocol.ts';
import { encodeOutputFrame } from '../../src/contracts/output-frame.ts';
import { FakeSocket } from './sql-host.ts';
import { connect, exitOf, HB, helloOf, request, say, setup } from './team-fixture.ts';

async function lines(stream: ReadableStream<Uint8Array>): Promise<Record<string, unknown>[]> {
  const text = await new Response(stream).text();
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('team dispatcher capabilities', () => {
  it('places a job on the connected agent and gives its follower the output and the end', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    expect(ws.of('welcome')).toEqual([{ type: 'welcome', v: PROTOCOL_VERSION, team: 'acme', heartbeatMs: HB }]);
    const answer = await t.c.jobs.submit(request('j1'));
    expect(answer).toEqual({ ok: true, jobId: 'j1', state: 'running', agentId: 'a1' });
    const [start] = ws.of('job.start') as { spec: JobSpec; upload: { agentId: string; token: string } }[];
    expect(start.spec.jobId).toBe('j1');
    expect(start.upload.agentId).toBe('a1');
    const events = t.c.followers.follow('j1');
    await t.c.messages.receive(
      ws as unknown as WebSocket,
      encodeOutputFrame({ jobId: 'j1', stream: 'stdout', offset: 0, data: new TextEncoder().encode('hi\n') }).slice().buffer,
    );
    await say(t, ws, exitOf('j1', 'hi\n'));
    expect(ws.of('job.ack')).toEqual([{ type: 'job.ack', jobId: 'j1' }]);
    const got = await lines(events);
    expect(got.map((e) => e.type)).toEqual(['started', 'output', 'exit']);
    expect(got[1]).toMatchObject({ stream: 'stdout', data: 'hi\n' });
    expect(t.c.views.result('j1')?.exit?.stdout).toBe('hi\n');
    expect(t.trace).toEqual(['do.job_start_sent', 'do.exit_received', 'do.settled']);
  });

  it("takes a job's end only from the agent it was sent to, once", async () => {
    const t = setup();
    const a1 = await connect(t, 'a1');
    const a2 = await connect(t, 'a2');
    await t.c.jobs.submit(request('j1', { agent: 'a1' }));
    await say(t, a2, exitOf('j1', 'FORGED'));
    expect(t.c.rows.get('j1')?.state).toBe('running');
    await say(t, a1, exitOf('j1', 'real'));
    await say(t, a1, exitOf('j1', 'again'));
    expect(t.c.views.result('j1')?.exit?.stdout).toBe('real');
    // The re-send is acknowledged again, so the agent forgets it.
    expect(a1.of('job.ack').length).toBe(2);
  });

  it('refuses a hello that takes over an agent id another token subject uses', async () => {
    const t = setup();
    await connect(t, 'a1', 'agent-one');
    const thief = await connect(t, 'a1', 'agent-two');
    expect(thief.closed).toEqual({ code: 4003, reason: 'agent id "a1" is in use by another agent token; pick another --id' });
  });

  it('loses the jobs of an agent that went away and did not come back within three heartbeats', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    ws.close(1006, '');
    t.c.link.drop(ws as unknown as WebSocket, 'closed (1006)');
    expect(t.c.rows.get('j1')?.orphaned_at).toBe(t.host.clock.now);
    t.host.clock.now += 3 * HB;
    await t.c.jobs.onAlarm(t.host.clock.now);
    expect(t.c.rows.get('j1')?.state).toBe('running');
    t.host.clock.now += 1;
    await t.c.jobs.onAlarm(t.host.clock.now);
    expect(t.c.rows.get('j1')).toMatchObject({ state: 'lost', error_code: 'lost' });
  });

  it('keeps a job whose agent reconnects and reports it in time', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    t.c.link.drop(ws as unknown as WebSocket, 'closed');
    ws.close(1006, '');
    t.host.clock.now += HB;
    const again = new FakeSocket();
    t.host.socketList.push(again);
    const att = t.c.link.attachmentFor(new Request('https://x/', { headers: { 'X-Gatehouse-Subject': 'agent-a1', 'X-Gatehouse-Token-Id': 't' } }));
    if (att.ok) t.c.link.attach(again as unknown as WebSocket, att.att);
    await say(t, again, helloOf('a1', { running: ['j1'] }));
    expect(t.c.rows.get('j1')?.orphaned_at).toBeNull();
    t.host.clock.now += 10 * HB;
    await say(t, again, { type: 'heartbeat', running: ['j1'] });
    await t.c.jobs.onAlarm(t.host.clock.now);
    expect(t.c.rows.get('j1')?.state).toBe('running');
  });

  it('wakes the alarm every heartbeat while sockets or jobs are open, sooner for a queue deadline, and not at all when idle', async () => {
    const t = setup();
    const now = t.host.clock.now;
    const wake = () => Math.min(...t.c.wakes.map((w) => w.nextWake(now) ?? Infinity));
    expect(wake()).toBe(Infinity);
    await t.c.jobs.submit(request('q1', { queueWaitMs: 300 }));
    expect(wake()).toBe(now + 300);
    await connect(t, 'a1');
    expect(t.c.rows.get('q1')?.state).toBe('running');
    expect(wake()).toBe(now + HB);
  });

  it('runs every capability that asks for the alarm when it fires, quotas before retention and retention before the upload aborts', () => {
    const t = setup();
    const order = t.c.alarm;
    for (const w of t.c.wakes) expect(order).toContain(w);
    expect(order.indexOf(t.c.quotas)).toBeLessThan(order.indexOf(t.c.retention));
    expect(order.indexOf(t.c.retention)).toBeLessThan(order.indexOf(t.c.uploads));
  });

  it('refuses a job that waited past its deadline with no agent, and its audit row says so', async () => {
    const t = setup();
    expect(await t.c.jobs.submit(request('q1', { queueWaitMs: 100 }))).toMatchObject({ ok: true, state: 'queued' });
    expect(t.c.auditLog.query({ jobId: 'q1' }).entries).toMatchObject([{ decision: 'allowed', exitStatus: 'queued' }]);
    t.host.clock.now += 101;
    await t.c.jobs.onAlarm(t.host.clock.now);
    expect(t.c.rows.get('q1')).toMatchObject({ state: 'refused', error_code: 'no_agent' });
    expect(t.c.auditLog.query({ jobId: 'q1' }).entries).toMatchObject([{ decision: 'failed', exitStatus: 'refused', tool: 'execute' }]);
    expect(t.batches).toEqual([]);
  });

  it('reads every job back after a restart over the same storage', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    await say(t, ws, exitOf('j1', 'kept'));
    const restarted = setup({ host: { ...t.host } });
    expect(restarted.c.views.result('j1')?.exit?.stdout).toBe('kept');
    expect(restarted.c.jobs.agents().map((a) => a.agent_id)).toEqual(['a1']);
  });

  it('refuses every job with one config_error naming the var when the Workers plan is unknown, and still audits it', async () => {
    const t = setup({ plan: 'enterprise' });
    await connect(t, 'a1');
    const answer = await t.c.jobs.submit(request('j1'));
    expect(answer).toEqual({
      ok: false,
      code: 'config_error',
      message:
        'Error: GATEHOUSE_WORKERS_PLAN is "enterprise"; allowed: "paid" (Workers Paid, 10000 subrequests per request) or "free" (Workers Free, 50); set it in wrangler.toml [vars]',
    });
    // Audited in the team's own log, and the shared D1 is not written.
    expect(t.c.auditLog.query({ jobId: 'j1' }).entries).toMatchObject([{ decision: 'failed', exitStatus: 'refused' }]);
    expect(t.batches).toEqual([]);
  });

  it('closes every socket of a revoked token', async () => {
    const t = setup();
    const a = await connect(t, 'a1', 'shared');
    const b = await connect(t, 'a2', 'shared');
    const other = await connect(t, 'a3', 'other');
    expect(t.c.link.revoke('tok-shared')).toBe(2);
    expect([a.closed?.code, b.closed?.code, other.closed]).toEqual([4001, 4001, null]);
  });
});
