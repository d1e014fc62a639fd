/**
 * The life of a job in the team DO (src/dispatch/job-lifecycle.ts): refused at once when it can never run
 * or the queue is full, killed queued or running, cancelled by its MCP call, its kept output read
 * from the result once that holds more than the live copy, and listed newest first by cursor.
 */
import { describe, expect, it } from 'vitest';
import type { JobExit } from '../../src/contracts/agent-protocol.ts';
import { connect, exitOf, request, say, setup, specOf } from './team-fixture.ts';

describe('jobs', () => {
  it('refuses a job at once when connected agents can never run it (the sandbox floor), saying how to fix it', async () => {
    const t = setup();
    await connect(t, 'a1');
    expect(await t.c.jobs.submit(request('j1', { sandboxMinimum: 'gvisor' }))).toEqual({
      ok: false,
      code: 'no_agent',
      message: "no connected executor agent meets the team's sandbox floor (sandbox.minimum = gvisor); start an agent with --sandbox gvisor",
    });
  });

  it('audits a workspace job refused at placement (no connected agent can hold a workspace), with the reason', async () => {
    const t = setup();
    await connect(t, 'bw1');
    const ws = { id: 'w1', quotaBytes: 1 << 20, idleMs: 3_600_000 };
    const answer = await t.c.jobs.submit(request('w-job', { spec: specOf('w-job', { workspace: ws }) }));
    expect(answer).toMatchObject({ ok: false, code: 'no_agent' });
    const [row] = t.c.auditLog.query({ limit: 10 }).entries;
    expect(row).toMatchObject({ tool: 'execute', decision: 'failed', exitStatus: 'refused', jobId: 'w-job', subject: 'alice' });
    expect(row.reason).toBe(
      'rule r1; no_agent: workspace "w1" cannot be created: no connected executor agent can hold workspaces: bw1 (bwrap: its sandbox cannot mount one); start a current agent with --sandbox gvisor',
    );
    expect(t.c.rows.get('w-job')).toBeNull();
  });

  it('refuses a job when the queue is full, and answers the same job id again with its first answer', async () => {
    const t = setup();
    await t.c.jobs.submit(request('q1', { maxQueueLength: 1 }));
    const full = await t.c.jobs.submit(request('q2', { maxQueueLength: 1 }));
    expect(full).toMatchObject({ ok: false, code: 'queue_full' });
    expect(await t.c.jobs.submit(request('q2', { maxQueueLength: 5 }))).toEqual(full);
  });

  it("cancels a queued job at once, and asks the agent to stop a running one (it ends by the agent's report)", async () => {
    const t = setup();
    await t.c.jobs.submit(request('q1'));
    expect(await t.c.jobs.kill('q1', 'no longer needed')).toEqual({ found: true, state: 'cancelled' });
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('r1'));
    expect(await t.c.jobs.cancelByKey('k-r1', 'client hung up')).toBe(true);
    expect(ws.of('job.cancel')).toEqual([{ type: 'job.cancel', jobId: 'r1', reason: 'client hung up' }]);
    expect(t.c.rows.get('r1')?.state).toBe('running');
    await say(t, ws, { ...exitOf('r1', ''), state: 'cancelled' } satisfies JobExit);
    expect(t.c.rows.get('r1')?.state).toBe('cancelled');
    expect(await t.c.jobs.kill('nope', 'x')).toEqual({ found: false, state: null });
  });

  it('reads kept output from the result once the job ended with more inline output than was relayed live', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    expect(t.c.views.liveOutput('j1', 'stdout', 0, 100)).toMatchObject({ total: 0, source: 'live' });
    await say(t, ws, exitOf('j1', 'hello world'));
    const kept = t.c.views.liveOutput('j1', 'stdout', 6, 100)!;
    expect({ text: new TextDecoder().decode(kept.data), total: kept.total, source: kept.source }).toEqual({ text: 'world', total: 11, source: 'result' });
  });

  it('lists jobs newest first, a page at a time', async () => {
    const t = setup();
    for (const id of ['a', 'b', 'c']) await t.c.jobs.submit(request(id));
    const first = t.c.views.list({ limit: 2 });
    expect(first.jobs.map((j) => j.job_id)).toEqual(['c', 'b']);
    const rest = t.c.views.list({ limit: 2, cursor: first.next_cursor! });
    expect([rest.jobs.map((j) => j.job_id), rest.next_cursor]).toEqual([['a'], null]);
  });
});
