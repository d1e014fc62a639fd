/**
 * Idle teams cost nothing: with agents connected and nothing due, the team's object arms no alarm
 * and writes nothing for their heartbeats (the platform answers each ping, and the object reads when
 * it last did only when it is awake anyway). What liveness still does: placement skips an agent silent
 * for MISSED_HEARTBEATS heartbeats; while a job runs the alarm checks its agent every heartbeat and a
 * frozen agent's job is lost; the jobs an agent holds travel as `running` when they change; an agent
 * of the previous protocol version is welcomed in it and its `heartbeat` still works.
 */
import { describe, expect, it, vi } from 'vitest';
import {
  AGENT_PING,
  AGENT_PONG,
  AGENT_PROTOCOL_CLOSE,
  MISSED_HEARTBEATS,
  OLDEST_AGENT_PROTOCOL,
  PROTOCOL_VERSION,
  parseAgentMessage,
  parseEdgeMessage,
} from '../../src/contracts/agent-protocol.ts';
import { FakeSocket } from './sql-host.ts';
import { connect, HB, helloOf, request, say, setup } from './team-fixture.ts';

type Team = ReturnType<typeof setup>;

/** The alarm the DO would arm now (team-dispatcher.ts `rearm`): the soonest wake-up of its capabilities. */
const alarmAt = (t: Team) => Math.min(...t.c.wakes.map((w) => w.nextWake(t.host.now()) ?? Infinity));
/** No alarm within the next hour: nothing about liveness (retention may arm one for its own time, days ahead). */
const IDLE_HOUR = 3600_000;
const idle = (t: Team) => alarmAt(t) > t.host.now() + IDLE_HOUR;

/** The DO's alarm, as team-dispatcher.ts runs it: the link's part, then the jobs'. */
async function alarm(t: Team): Promise<void> {
  t.c.link.onAlarm(t.host.now());
  await t.c.jobs.onAlarm(t.host.now());
}

/** The platform answers the socket's ping now (what `ctx.getWebSocketAutoResponseTimestamp` then says). */
const ping = (t: Team, ws: FakeSocket) => {
  ws.lastPing = t.host.now();
};

/** Counts the writes (INSERT/UPDATE/DELETE) run on the object's SQLite from now on. */
function countWrites(t: Team): string[] {
  const writes: string[] = [];
  const exec = t.host.sql.exec.bind(t.host.sql);
  t.host.sql.exec = ((q: string, ...p: SqlStorageValue[]) => (/^\s*(UPDATE|INSERT|DELETE)/i.test(q) && writes.push(q), exec(q, ...p))) as typeof exec;
  return writes;
}

describe('the heartbeat', () => {
  it('is one fixed text and its answer another, each the JSON of its message (the auto-response matches exact text only)', () => {
    expect(parseAgentMessage(AGENT_PING)).toEqual({ ok: true, message: { type: 'ping' } });
    expect(JSON.stringify({ type: 'ping' })).toBe(AGENT_PING);
    expect(parseEdgeMessage(AGENT_PONG)).toEqual({ ok: true, message: { type: 'pong' } });
    expect(JSON.stringify({ type: 'pong' })).toBe(AGENT_PONG);
  });

  it('that reaches the object (no auto-response set) is answered with the same pong and counts as a sign of life', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    t.host.clock.now += MISSED_HEARTBEATS * HB;
    await say(t, ws, AGENT_PING);
    expect(ws.sent.at(-1)).toEqual({ type: 'pong' });
    t.host.clock.now += HB;
    expect(t.c.link.schedAgents(new Map()).map((a) => a.id)).toEqual(['a1']);
  });
});

describe('an idle team', () => {
  it('arms no alarm with agents connected and nothing due, and writes nothing while they ping', async () => {
    const t = setup();
    const a1 = await connect(t, 'a1');
    const a2 = await connect(t, 'a2');
    expect(idle(t)).toBe(true);
    const writes = countWrites(t);
    for (let i = 0; i < 60; i++) {
      t.host.clock.now += HB;
      ping(t, a1);
      ping(t, a2);
    }
    expect(idle(t)).toBe(true);
    expect(writes).toEqual([]);
    // Listed as connected, last seen at their last ping: computed, not stored.
    expect(t.c.jobs.agents().map((a) => [a.agent_id, a.connected, a.last_seen])).toEqual([
      ['a1', true, t.host.now()],
      ['a2', true, t.host.now()],
    ]);
  });

  it('arms the alarm again once a job is due, and not after it ended', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    expect(alarmAt(t)).toBe(t.host.now() + HB);
    await say(t, ws, { type: 'job.exit', ...exitFields('j1') });
    expect(t.c.rows.get('j1')?.state).toBe('exited');
    expect(idle(t)).toBe(true);
  });
});

describe('a job a caller waits on', () => {
  it('arms no alarm: a timer checks its agent while the call is open, and the alarm takes over when the caller leaves', async () => {
    vi.useFakeTimers();
    try {
      const t = setup();
      const ws = await connect(t, 'a1');
      await t.c.jobs.submit(request('j1'));
      const events = t.c.followers.follow('j1').getReader();
      // Followed: nothing for the alarm, so a short job writes no alarm and wakes the object for none.
      expect(idle(t)).toBe(true);
      await say(t, ws, { type: 'job.exit', ...exitFields('j1') });
      expect(t.c.rows.get('j1')?.state).toBe('exited');
      expect(idle(t)).toBe(true);
      await events.cancel();

      // A frozen agent under a followed job: the timer finds it silent and the job is lost, with no alarm run.
      await t.c.jobs.submit(request('j2'));
      const follow = t.c.followers.follow('j2').getReader();
      expect(idle(t)).toBe(true);
      for (let i = 0; i <= 2 * MISSED_HEARTBEATS + 1; i++) {
        t.host.clock.now += HB;
        await vi.advanceTimersByTimeAsync(HB);
      }
      expect(t.c.rows.get('j2')?.state).toBe('lost');
      await follow.cancel().catch(() => {});

      // A caller that leaves before its job's end hands the job back to the alarm.
      const b = await connect(t, 'b1');
      await t.c.jobs.submit(request('j3'));
      expect(t.c.rows.get('j3')?.agent).toBe('b1');
      const waiting = t.c.views.status('j3', 10 * HB);
      expect(idle(t)).toBe(true);
      const wakes = t.host.wakeCalls;
      await vi.advanceTimersByTimeAsync(10 * HB);
      await waiting;
      expect(t.host.wakeCalls).toBeGreaterThan(wakes);
      expect(alarmAt(t)).toBe(t.host.now() + HB);
      expect(b.closed).toBeNull();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('liveness from the pings', () => {
  it('places a job on an agent that pings, never on one silent for more than three heartbeats', async () => {
    const t = setup();
    const frozen = await connect(t, 'frozen');
    const alive = await connect(t, 'alive');
    t.host.clock.now += MISSED_HEARTBEATS * HB + 1;
    ping(t, alive);
    for (const id of ['j1', 'j2', 'j3']) await t.c.jobs.submit(request(id));
    expect(['j1', 'j2', 'j3'].map((id) => t.c.rows.get(id)?.agent ?? null)).toEqual(['alive', 'alive', null]);
    expect(frozen.of('job.start')).toEqual([]);
    // The only agent is silent: the job waits for one, and is refused no_agent at its deadline.
    const t2 = setup();
    await connect(t2, 'frozen');
    t2.host.clock.now += MISSED_HEARTBEATS * HB + 1;
    expect(await t2.c.jobs.submit(request('q', { queueWaitMs: 500 }))).toMatchObject({ ok: true, state: 'queued' });
    t2.host.clock.now += 501;
    await alarm(t2);
    expect(t2.c.rows.get('q')).toMatchObject({ state: 'refused', error_code: 'no_agent' });
  });

  it("checks a running job's agent every heartbeat: a frozen agent (socket open, no pings) is dropped and its job lost", async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    // Alive for a while: each alarm (every heartbeat while the job runs) finds its pings.
    for (let i = 0; i < 5; i++) {
      t.host.clock.now += HB;
      ping(t, ws);
      await alarm(t);
      expect(alarmAt(t)).toBe(t.host.now() + HB);
    }
    expect(ws.closed).toBeNull();
    // Frozen (SIGSTOP): the socket stays open, the pings stop.
    const frozenAt = t.host.now();
    while (t.host.now() - frozenAt <= MISSED_HEARTBEATS * HB) {
      t.host.clock.now += HB;
      await alarm(t);
    }
    expect(ws.closed).toMatchObject({ code: 4000 });
    expect(t.c.rows.get('j1')).toMatchObject({ state: 'running', orphaned_at: t.host.now() });
    t.host.clock.now += MISSED_HEARTBEATS * HB + 1;
    await alarm(t);
    expect(t.c.rows.get('j1')).toMatchObject({ state: 'lost', error_code: 'lost' });
  });

  it('counts a message as a sign of life too (an agent busy sending results)', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    for (let i = 0; i < 10; i++) {
      t.host.clock.now += HB;
      await say(t, ws, { type: 'running', jobs: ['j1'] });
      await alarm(t);
    }
    expect(ws.closed).toBeNull();
    expect(t.c.rows.get('j1')?.state).toBe('running');
  });
});

describe('the jobs an agent holds (`running`, sent when they change)', () => {
  it('orphans a job its agent no longer lists once the listing had time to include it, and takes it back when listed again', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await t.c.jobs.submit(request('j1'));
    // Sent before the agent read its job.start: not held against the job.
    await say(t, ws, { type: 'running', jobs: [] });
    expect(t.c.rows.get('j1')?.orphaned_at).toBeNull();
    t.host.clock.now += 2 * HB;
    await say(t, ws, { type: 'running', jobs: [] });
    expect(t.c.rows.get('j1')?.orphaned_at).toBe(t.host.now());
    await say(t, ws, { type: 'running', jobs: ['j1'] });
    expect(t.c.rows.get('j1')?.orphaned_at).toBeNull();
  });

  it('is within the message budget at one per heartbeat, and over it sent in a tight loop', async () => {
    const t = setup();
    const steady = await connect(t, 'steady');
    for (let i = 0; i < 100; i++) {
      t.host.clock.now += HB;
      await say(t, steady, { type: 'running', jobs: [] });
    }
    expect(steady.closed).toBeNull();
    const flood = await connect(t, 'flood');
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      for (let i = 0; i < 20 && !flood.closed; i++) await say(t, flood, { type: 'running', jobs: [] });
    } finally {
      warn.mockRestore();
    }
    expect(flood.closed?.code).toBe(4008);
  });
});

describe('an agent of the oldest protocol version the edge speaks (v2: heartbeats)', () => {
  it('is welcomed in its own version, and its heartbeat (every interval, with its jobs) keeps it alive and its jobs held', async () => {
    const t = setup();
    const ws = new FakeSocket();
    t.host.socketList.push(ws);
    const att = t.c.link.attachmentFor(new Request('https://x/', { headers: { 'X-Gatehouse-Subject': 'old', 'X-Gatehouse-Token-Id': 'tok-old' } }));
    if (!att.ok) throw new Error(att.message);
    t.c.link.attach(ws as unknown as WebSocket, att.att);
    await say(t, ws, helloOf('old', { v: OLDEST_AGENT_PROTOCOL }));
    expect(ws.of('welcome')).toEqual([{ type: 'welcome', v: OLDEST_AGENT_PROTOCOL, team: 'acme', heartbeatMs: HB }]);
    await t.c.jobs.submit(request('j1'));
    expect(t.c.rows.get('j1')?.agent).toBe('old');
    for (let i = 0; i < 10; i++) {
      t.host.clock.now += HB;
      await say(t, ws, { type: 'heartbeat', running: ['j1'] });
      await alarm(t);
    }
    expect(ws.closed).toBeNull();
    expect(t.c.rows.get('j1')).toMatchObject({ state: 'running', orphaned_at: null });
    // Its heartbeats are written as they always were: liveness holds for an object evicted between two.
    expect(t.c.link.agent('old')?.last_seen).toBe(t.host.now());
    t.host.clock.now += 2 * HB;
    await say(t, ws, { type: 'heartbeat', running: [] });
    expect(t.c.rows.get('j1')?.orphaned_at).toBe(t.host.now());
  });

  it('a version older than the oldest it speaks is closed with 4426, naming the versions this gateway speaks', async () => {
    const t = setup();
    const ws = new FakeSocket();
    t.host.socketList.push(ws);
    t.c.link.attach(ws as unknown as WebSocket, { subject: 's', tokenId: 't', grant: null, agentId: null, connectedAt: 0 });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      await say(t, ws, helloOf('older', { v: OLDEST_AGENT_PROTOCOL - 1 }));
    } finally {
      warn.mockRestore();
    }
    expect(ws.closed?.code).toBe(AGENT_PROTOCOL_CLOSE);
    expect(ws.closed?.reason).toBe(
      `agent protocol v${OLDEST_AGENT_PROTOCOL - 1} is not spoken here: this gateway speaks v${PROTOCOL_VERSION} (and v2, v3, v4); install the agent of the gateway's release`,
    );
  });
});

function exitFields(jobId: string) {
  return {
    jobId,
    state: 'exited',
    exitCode: 0,
    signal: null,
    timedOut: false,
    durationMs: 1,
    stdout: '',
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    artifactsUploaded: true,
    streams: { stdout: { bytes: 0, lines: 0, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
  };
}
