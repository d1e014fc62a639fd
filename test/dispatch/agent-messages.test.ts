/**
 * The agent protocol as the team DO applies it (src/dispatch/agent-messages.ts): claims checked
 * against the token's grant, an exit in parts reassembled, a full agent's refusal requeued, and a
 * socket that floods messages about jobs it does not run closed for its budget.
 */
import { describe, expect, it } from 'vitest';
import { AGENT_BUDGET_CLOSE, PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';
import { AGENT_CLAIM_REFUSED_CLOSE } from '../../src/contracts/agent-grant.ts';
import { AGENT_GRANT_HEADER } from '../../src/dispatch/client.ts';
import { FakeSocket } from './sql-host.ts';
import { connect, exitOf, request, say, setup } from './team-fixture.ts';

describe('agent messages', () => {
  it('closes (4403) a hello that claims a sandbox its token does not grant, and places no job on it', async () => {
    const t = setup();
    const ws = new FakeSocket();
    t.host.socketList.push(ws);
    const headers = { 'X-Gatehouse-Subject': 's', 'X-Gatehouse-Token-Id': 't', [AGENT_GRANT_HEADER]: JSON.stringify({ sandboxes: ['bwrap'], labels: [] }) };
    const att = t.c.link.attachmentFor(new Request('https://x/', { headers }));
    if (!att.ok) throw new Error(att.message);
    t.c.link.attach(ws as unknown as WebSocket, att.att);
    await say(t, ws, {
      type: 'hello',
      v: PROTOCOL_VERSION,
      agentId: 'g1',
      version: '1',
      capacity: 2,
      sandbox: 'gvisor',
      runtimes: [],
      labels: [],
      running: [],
    });
    expect(ws.closed?.code).toBe(AGENT_CLAIM_REFUSED_CLOSE);
    expect(await t.c.jobs.submit(request('j1'))).toMatchObject({ ok: true, state: 'queued' });
    expect(ws.of('job.start')).toEqual([]);
  });

  it('reassembles an exit sent in parts, and waits (no ack) while a part is missing', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    const big = { ...exitOf('j1', ''), parts: { stdout: 2, stderr: 0 } };
    await say(t, ws, { type: 'job.exit.part', jobId: 'j1', stream: 'stdout', seq: 0, data: 'first half, ' });
    await say(t, ws, big);
    expect(t.c.store.get('j1')?.state).toBe('running');
    await say(t, ws, { type: 'job.exit.part', jobId: 'j1', stream: 'stdout', seq: 1, data: 'second half' });
    await say(t, ws, big);
    expect(t.c.jobs.result('j1')?.exit?.stdout).toBe('first half, second half');
    expect(ws.of('job.ack')).toEqual([{ type: 'job.ack', jobId: 'j1' }]);
  });

  it('puts a job a full agent refused back in the queue, and ends one the agent could not start', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    await say(t, ws, { type: 'job.error', jobId: 'j1', code: 'capacity', message: 'full' });
    // Requeued and placed again on the only agent.
    expect(ws.of('job.start').length).toBe(2);
    await say(t, ws, { type: 'job.error', jobId: 'j1', code: 'spawn_failed', message: 'no such file' });
    expect(t.c.store.get('j1')).toMatchObject({ state: 'failed_to_start', error_code: 'spawn_failed', error_message: 'no such file' });
  });

  it('takes a code outside the error vocabulary from an agent as its failure to start, never as a code callers see', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    await say(t, ws, { type: 'job.error', jobId: 'j1', code: 'policy_approved_by_agent', message: 'nope' });
    expect(t.c.store.get('j1')).toMatchObject({ state: 'failed_to_start', error_code: 'spawn_failed', error_message: 'nope' });
  });

  it('closes a socket that floods messages about jobs it does not run, and gives it no more jobs', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    for (let i = 0; i < 100 && !ws.closed; i++) await say(t, ws, { type: 'job.error', jobId: `nope-${i}`, code: 'x', message: 'y' });
    expect(ws.closed?.code).toBe(AGENT_BUDGET_CLOSE);
    expect(await t.c.jobs.submit(request('j1'))).toMatchObject({ ok: true, state: 'queued' });
  });

  it('asks an agent to say hello before anything else', async () => {
    const t = setup();
    const ws = new FakeSocket();
    t.host.socketList.push(ws);
    t.c.link.attach(ws as unknown as WebSocket, { subject: 's', tokenId: 't', grant: null, agentId: null, connectedAt: 0 });
    await say(t, ws, { type: 'heartbeat', running: [] });
    expect(ws.closed).toEqual({ code: 1002, reason: 'hello first' });
  });
});
