/**
 * The agent protocol as the team DO applies it (src/dispatch/agent-messages.ts): claims checked
 * against the token's grant, a hello in another protocol version refused, an exit in parts
 * reassembled, an exit's inline output rebuilt from the live frames it was left to, a full agent's refusal requeued, and a
 * socket that floods messages about jobs it does not run closed for its budget.
 */
import { describe, expect, it, vi } from 'vitest';
import {
  AGENT_BUDGET_CLOSE,
  AGENT_PROTOCOL_CLOSE,
  OLDEST_AGENT_PROTOCOL,
  PROTOCOL_VERSION,
  type JobExit,
  type StreamName,
} from '../../src/contracts/agent-protocol.ts';
import { inlineResult } from '../../src/contracts/inline-result.ts';
import { encodeOutputFrame } from '../../src/contracts/output-frame.ts';
import { AGENT_CLAIM_REFUSED_CLOSE, AGENT_GRANT_HEADER } from '../../src/contracts/agent-grant.ts';
import { MALFORMED_BURST } from '../../src/dispatch/agent-budget.ts';
import { FakeSocket } from './sql-host.ts';
import { connect, exitOf, helloOf, request, say, setup } from './team-fixture.ts';

describe('agent messages', () => {
  it('closes (4403) a hello that claims a sandbox its token does not grant, and places no job on it', async () => {
    const t = setup();
    const ws = new FakeSocket();
    t.host.socketList.push(ws);
    const headers = { 'X-Gatehouse-Subject': 's', 'X-Gatehouse-Token-Id': 't', [AGENT_GRANT_HEADER]: JSON.stringify({ sandboxes: ['bwrap'], labels: [] }) };
    const att = t.c.link.attachmentFor(new Request('https://x/', { headers }));
    if (!att.ok) throw new Error(att.message);
    t.c.link.attach(ws as unknown as WebSocket, att.att);
    await say(t, ws, helloOf('g1', { sandbox: 'gvisor' }));
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
    expect(t.c.rows.get('j1')?.state).toBe('running');
    await say(t, ws, { type: 'job.exit.part', jobId: 'j1', stream: 'stdout', seq: 1, data: 'second half' });
    await say(t, ws, big);
    expect(t.c.views.result('j1')?.exit?.stdout).toBe('first half, second half');
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
    expect(t.c.rows.get('j1')).toMatchObject({ state: 'failed_to_start', error_code: 'spawn_failed', error_message: 'no such file' });
  });

  it('takes a code outside the error vocabulary from an agent as its failure to start, never as a code callers see', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    await say(t, ws, { type: 'job.error', jobId: 'j1', code: 'policy_approved_by_agent', message: 'nope' });
    expect(t.c.rows.get('j1')).toMatchObject({ state: 'failed_to_start', error_code: 'spawn_failed', error_message: 'nope' });
  });

  it('closes a socket that floods messages about jobs it does not run, and gives it no more jobs', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    for (let i = 0; i < 100 && !ws.closed; i++) await say(t, ws, { type: 'job.error', jobId: `nope-${i}`, code: 'x', message: 'y' });
    expect(ws.closed?.code).toBe(AGENT_BUDGET_CLOSE);
    expect(await t.c.jobs.submit(request('j1'))).toMatchObject({ ok: true, state: 'queued' });
  });

  it('closes (4008) a socket flooding junk after a handful of messages, logs it once, and drops all it sends after unread', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    let sent = 0;
    try {
      for (; sent < 1000 && !ws.closed; sent++) await say(t, ws, sent % 2 ? 'not json {' : { type: 'job.exit', jobId: 7 });
      expect(ws.closed).toEqual({ code: AGENT_BUDGET_CLOSE, reason: `message budget exceeded: more than ${MALFORMED_BURST} malformed messages` });
      expect(sent).toBe(MALFORMED_BURST + 1);
      // One line for the first rejected message, one for the close: never one per message.
      expect(warn.mock.calls.map((c) => String(c[0]))).toEqual([
        expect.stringMatching(/^agent a1: rejected message: /),
        expect.stringMatching(/^agent a1 \(subject agent-a1\): message budget exceeded: .*; connection closed$/),
      ]);
    } finally {
      warn.mockRestore();
    }
    // Messages that were already queued behind it, even well-formed ones about its own job, change nothing.
    const sql = vi.spyOn(t.c.rows, 'get');
    await say(t, ws, { type: 'job.error', jobId: 'j1', code: 'spawn_failed', message: 'no' });
    await say(t, ws, 'more junk');
    expect(sql).not.toHaveBeenCalled();
    expect(t.c.rows.get('j1')?.state).toBe('running');
  });

  it('still drops what a refused socket sends after a hibernation (its attachment says so), without parsing it', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      for (let i = 0; i <= MALFORMED_BURST && !ws.closed; i++) await say(t, ws, 'junk');
    } finally {
      warn.mockRestore();
    }
    expect(ws.closed?.code).toBe(AGENT_BUDGET_CLOSE);
    // A new instance over the same storage and socket: no budget, no cache in memory.
    const woken = setup({ host: t.host });
    expect(woken.c.link.isRefused(ws as unknown as WebSocket)).toBe(true);
    const parse = vi.spyOn(JSON, 'parse');
    try {
      await woken.c.messages.receive(ws as unknown as WebSocket, JSON.stringify(helloOf('a1')));
    } finally {
      parse.mockRestore();
    }
    expect(parse).not.toHaveBeenCalled();
    expect(ws.of('welcome')).toHaveLength(1);
  });

  it('asks an agent to say hello before anything else', async () => {
    const t = setup();
    const ws = new FakeSocket();
    t.host.socketList.push(ws);
    t.c.link.attach(ws as unknown as WebSocket, { subject: 's', tokenId: 't', grant: null, agentId: null, connectedAt: 0 });
    await say(t, ws, { type: 'heartbeat', running: [] });
    expect(ws.closed).toEqual({ code: 1002, reason: 'hello first' });
  });

  it('closes (4426) a hello in another protocol version, naming both, and places no job on it', async () => {
    const t = setup();
    const ws = new FakeSocket();
    t.host.socketList.push(ws);
    t.c.link.attach(ws as unknown as WebSocket, { subject: 's', tokenId: 't', grant: null, agentId: null, connectedAt: 0 });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      await say(t, ws, helloOf('old', { v: OLDEST_AGENT_PROTOCOL - 1 }));
    } finally {
      warn.mockRestore();
    }
    expect(ws.closed?.code).toBe(AGENT_PROTOCOL_CLOSE);
    expect(ws.closed?.reason).toContain(`agent protocol v${OLDEST_AGENT_PROTOCOL - 1} is not spoken here: this gateway speaks v${PROTOCOL_VERSION}`);
    expect(ws.of('welcome')).toEqual([]);
    expect(await t.c.jobs.submit(request('j1'))).toMatchObject({ ok: true, state: 'queued' });
  });
});

describe('an exit whose inline output was left to the live frames', () => {
  /** The live frames of a stream, as the agent's relay sends them (binary, by offset). */
  async function relay(t: ReturnType<typeof setup>, ws: FakeSocket, jobId: string, stream: StreamName, bytes: Uint8Array, frame = 300) {
    for (let at = 0; at < bytes.byteLength; at += frame) {
      const f = encodeOutputFrame({ jobId, stream, offset: at, data: bytes.subarray(at, at + frame) });
      await t.c.messages.receive(ws as unknown as WebSocket, f.buffer.slice(f.byteOffset, f.byteOffset + f.byteLength) as ArrayBuffer);
    }
  }
  const liveExit = (id: string, out: number, err: number): JobExit => ({
    ...exitOf(id, ''),
    streams: { stdout: { bytes: out, lines: 1, artifactTruncated: false }, stderr: { bytes: err, lines: 1, artifactTruncated: false } },
    inlineFromLive: true,
  });
  const nulHeavy = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i % 7 === 0 ? i % 32 : i % 11 === 0 ? 0xe9 : 0));

  it("stores the result the agent would have sent: the same function over the kept bytes, with the job's inline cap", async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1')); // limits.inlineBytes 1000
    const out = nulHeavy(1200);
    const err = new TextEncoder().encode('warning: é\n');
    await relay(t, ws, 'j1', 'stdout', out);
    await relay(t, ws, 'j1', 'stderr', err);
    await say(t, ws, liveExit('j1', out.byteLength, err.byteLength));
    const expected = inlineResult({ head: out, total: out.byteLength }, { head: err, total: err.byteLength }, 1000);
    expect(expected).toMatchObject({ stdoutTruncated: true, stderrTruncated: true });
    const exit = t.c.views.result('j1')?.exit;
    expect(exit).toMatchObject({ ...expected, state: 'exited', exitCode: 0 });
    expect(exit).not.toHaveProperty('inlineFromLive');
    expect(ws.of('job.ack')).toEqual([{ type: 'job.ack', jobId: 'j1' }]);

    // Both streams within the cap: whole, control bytes and all.
    await t.c.jobs.submit(request('j2'));
    const small = nulHeavy(500);
    await relay(t, ws, 'j2', 'stdout', small);
    await say(t, ws, liveExit('j2', small.byteLength, 0));
    expect(t.c.views.result('j2')?.exit).toMatchObject({ stdout: new TextDecoder().decode(small), stderr: '', stdoutTruncated: false, stderrTruncated: false });
  });

  it('keeps what there is, flagged truncated, when fewer bytes were kept than the result needs, and still ends the job', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    await relay(t, ws, 'j1', 'stdout', new TextEncoder().encode('only this'));
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      await say(t, ws, liveExit('j1', 50, 7)); // says 50 bytes of stdout and 7 of stderr; none of stderr came
      expect(warn.mock.calls.map((c) => String(c[0]))).toEqual([
        'job j1: its exit leaves the inline stdout to the live output, but only 9 of the 50 bytes it needs were kept; marked truncated',
        'job j1: its exit leaves the inline stderr to the live output, but only 0 of the 7 bytes it needs were kept; marked truncated',
      ]);
    } finally {
      warn.mockRestore();
    }
    expect(t.c.rows.get('j1')?.state).toBe('exited');
    expect(t.c.views.result('j1')?.exit).toMatchObject({ stdout: 'only this', stderr: '', stdoutTruncated: true, stderrTruncated: true });
    expect(ws.of('job.ack')).toEqual([{ type: 'job.ack', jobId: 'j1' }]);
  });
});
