/**
 * An agent that floods its team's Durable Object, end to end (real `wrangler dev`, a real agent
 * process, the official MCP client). Every message of every agent of a team is handled by the
 * team's one DO, one at a time: a second connection with the team's own agent token that sends
 * 10,000 messages a second (heartbeats, and `job.exit.part` of jobs that do not exist) would delay
 * every call of the team. Its socket is closed over its message budget (AGENT_BUDGET_CLOSE) and
 * the close is audited, while the team's real agent keeps taking and finishing jobs, and a real
 * result big enough to travel as `job.exit.part` messages stays inside the budget.
 *
 * Attacker: anyone holding the team's agent token (a compromised agent host, a leaked token).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'undici';
import type { AgentProcess, Gateway } from './harness.ts';
import { startProxiedTeam, type ProxiedTeam } from './proxied-team.ts';
import type { AgentProxy } from './agent-proxy.ts';
import { call, type Fleet } from './fleet.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { AGENT_BUDGET_CLOSE, PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';
import { MALFORMED_BURST } from '../../src/dispatch/agent-budget.ts';
import { until } from '../support/until.ts';

const TEAM = 'swarm';
/**
 * 4 MiB of NUL bytes inline: six bytes each in JSON (24 MiB), so the agent sends the result as parts. The
 * artifact cap is below it: the relay reads the artifact's spool, so the live frames cannot carry the whole
 * inline result and the exit carries it itself (a result the live frames carry never goes as parts).
 */
const BIG_INLINE = 4 * 1024 * 1024;
const POLICY = {
  ...DEFAULT_POLICY,
  shell: { enabled: true, allow: ['/.*/'] },
  runtime: { ...DEFAULT_POLICY.runtime, allowedRuntimes: [...DEFAULT_POLICY.runtime.allowedRuntimes, 'shell'] },
  limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 4, queueWaitMs: 20_000, inlineOutputBytes: BIG_INLINE, maxArtifactBytes: BIG_INLINE / 4 },
};
const HEARTBEAT_MS = 5000;
/** Messages per second the flooder sends, in batches every 10 ms. */
const RATE = 10_000;

type S = Record<string, unknown>;
type Flood = 'heartbeats' | 'ghost-parts';

let gw: Gateway;
let fleet: Fleet;
let proxy: AgentProxy;
let worker: AgentProcess;
let team: ProxiedTeam;
let sharedToken: string;

/**
 * One flooding connection with the team's agent token: hello as its own agent, then RATE
 * messages a second — heartbeats and `job.exit.part` of made-up jobs, or the parts alone — until
 * the gateway closes it or `stop()` says so. Resolves with how the socket ended.
 */
async function floodOnce(kind: Flood, stop: () => boolean): Promise<{ kind: Flood; code: number; reason: string; sent: number }> {
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/agent/v1/connect`, { headers: { Authorization: `Bearer ${sharedToken}` } });
  let sent = 0;
  let welcomed = false;
  let done!: (end: { code: number; reason: string }) => void;
  const closed = new Promise<{ code: number; reason: string }>((resolve) => (done = resolve));
  ws.addEventListener('close', (e) => done({ code: e.code, reason: e.reason }));
  ws.addEventListener('error', () => {});
  ws.addEventListener('open', () => {
    ws.send(
      JSON.stringify({
        type: 'hello',
        v: PROTOCOL_VERSION,
        agentId: 'flooder',
        version: 'x',
        capacity: 1,
        sandbox: 'none',
        runtimes: [],
        labels: [],
        running: [],
      }),
    );
  });
  ws.addEventListener('message', (e) => {
    if (!welcomed && typeof e.data === 'string' && (JSON.parse(e.data) as S).type === 'welcome') welcomed = true;
  });
  const timer = setInterval(() => {
    if (stop()) {
      // Stopped by the test, not closed by the gateway: no need to wait for the close handshake.
      ws.close(1000, 'done');
      done({ code: 1000, reason: 'stopped by the test' });
      return;
    }
    if (!welcomed || ws.readyState !== WebSocket.OPEN) return;
    for (let i = 0; i < RATE / 100; i++, sent++) {
      const heartbeat = kind === 'heartbeats' && sent % 2 === 0;
      ws.send(
        JSON.stringify(
          heartbeat ? { type: 'heartbeat', running: [] } : { type: 'job.exit.part', jobId: `ghost-${sent}`, stream: 'stdout', seq: 0, data: 'x'.repeat(64) },
        ),
      );
    }
  }, 10);
  const end = await closed;
  clearInterval(timer);
  return { kind, ...end, sent };
}

/** Junk a forged agent floods with: not JSON, a big message, valid JSON of no message's shape. */
const JUNK = ['not-json', 'oversized', 'wrong-shape'] as const;
type Junk = (typeof JUNK)[number];
/** Bytes of each `oversized` message: 256 KiB, so each costs several times the whole stranger burst. */
const OVERSIZED_BYTES = 256 * 1024;
/** The flooder keeps at most this much unsent (it never buffers without end). */
const FLOOD_BUFFERED_MAX = 1024 * 1024;
/**
 * From the flood's first message to the close, on a loaded 2-CPU host: measured 40–110 ms to the
 * close frame and 120–560 ms to the end of the connection; 1–5 s (and ~30 s reported) before
 * malformed messages had their own small bucket and a refused socket's backlog was dropped unread.
 */
const CLOSE_BOUND_MS = 3000;
/** The close frame itself: the socket is closed within a second of going over its budget (its first messages). */
const CLOSE_FRAME_BOUND_MS = 1000;
/** Each admin call of the team during the flood: measured up to ~700 ms (the backlog's drain); 1–5 s before. */
const ADMIN_BOUND_MS = 2000;

function junkMessage(kind: Junk, i: number): string {
  if (kind === 'not-json') return `garbage ${i} {{{`;
  if (kind === 'wrong-shape') return JSON.stringify({ type: 'job.exit.part', jobId: 7, seq: 'x', n: i });
  return `{"type":"heartbeat","pad":"${'x'.repeat(OVERSIZED_BYTES)}`;
}

/** A connection of the team's agent token that said hello as `agentId` and was welcomed. */
async function welcomedFlooder(agentId: string): Promise<WebSocket> {
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/agent/v1/connect`, { headers: { Authorization: `Bearer ${sharedToken}` } });
  ws.addEventListener('error', () => {});
  await new Promise<void>((res, rej) => {
    ws.addEventListener('open', () => {
      ws.send(
        JSON.stringify({ type: 'hello', v: PROTOCOL_VERSION, agentId, version: 'x', capacity: 1, sandbox: 'none', runtimes: [], labels: [], running: [] }),
      );
    });
    ws.addEventListener('message', (e) => {
      if (typeof e.data === 'string' && (JSON.parse(e.data) as S).type === 'welcome') res();
    });
    ws.addEventListener('close', (e) => rej(new Error(`closed before welcome: ${e.code} ${e.reason}`)));
  });
  return ws;
}

/**
 * Sends `kind` junk on `ws` at RATE messages a second (the reported flood; never more than the
 * socket takes) until the gateway closes it (or 60 s pass): how it ended, and how long after the
 * first junk message its close frame arrived and the connection ended (after the gateway read what
 * was still on its way: the flooder's backlog). An unpaced flood of tiny messages (~90,000 a second
 * here) puts thousands on the wire before the close can arrive, and the runtime delivers each of
 * them to the object however little it does with them: that drain is the runtime's, not the budget's.
 */
async function junkFlood(ws: WebSocket, kind: Junk): Promise<{ code: number; reason: string; closeFrameAfterMs: number; closedAfterMs: number; sent: number }> {
  let sent = 0;
  const closed = new Promise<{ code: number; reason: string }>((res) => ws.addEventListener('close', (e) => res({ code: e.code, reason: e.reason })));
  const started = Date.now();
  let open = true;
  void closed.then(() => (open = false));
  let closeFrameAfterMs = -1;
  const pump = async () => {
    while (open && Date.now() - started < 60_000) {
      if (ws.readyState === WebSocket.OPEN) {
        const due = Math.floor(((Date.now() - started) * RATE) / 1000) + 1;
        while (sent < due && ws.bufferedAmount < FLOOD_BUFFERED_MAX) ws.send(junkMessage(kind, sent++));
      } else if (closeFrameAfterMs < 0) closeFrameAfterMs = Date.now() - started; // the gateway's close frame arrived (CLOSING)
      await new Promise((res) => setTimeout(res, 5));
    }
  };
  const done = pump();
  const end = await Promise.race([closed, done.then(() => ({ code: 0, reason: 'still open after 60 s' }))]);
  const closedAfterMs = Date.now() - started;
  open = false;
  await done;
  if (end.code === 0) ws.close(1000, 'done');
  if (closeFrameAfterMs < 0) closeFrameAfterMs = closedAfterMs;
  return { ...end, closeFrameAfterMs, closedAfterMs, sent };
}

describe("an agent flooding its team's dispatcher", () => {
  beforeAll(async () => {
    team = await startProxiedTeam({ team: TEAM, policy: POLICY, subject: 'agent-swarm', tmpPrefix: 'gatehouse-flood-', heartbeatMs: HEARTBEAT_MS });
    ({ gw, fleet, proxy, worker, sharedToken } = team);
  }, 300_000);

  afterAll(async () => {
    await team?.stop();
  });

  it("closes a connection of the team's token flooding heartbeats and parts of unknown jobs (4008), audits it, and the real agent keeps running jobs", async () => {
    const c = await fleet.mcp(TEAM);
    const before = await fleet.agentView(TEAM, 'worker');
    let flooding = true;
    const started = Date.now();
    const closes: Awaited<ReturnType<typeof floodOnce>>[] = [];
    // Flood again and again (as a flooder whose socket is closed would): heartbeats, then parts alone.
    const flood = (async () => {
      for (let i = 0; flooding && i < 40; i++) {
        const kind: Flood = i % 2 === 0 ? 'heartbeats' : 'ghost-parts';
        const r = await floodOnce(kind, () => !flooding || Date.now() > started + 60_000);
        closes.push(r);
        await new Promise((res) => setTimeout(res, 100));
      }
    })();
    try {
      // Meanwhile the team's real agent takes and finishes calls, each well within 15 s.
      for (let i = 0; i < 6; i++) {
        const r = await call(c, 'execute', { command: `echo run-${i}`, agent: 'worker' }, 15_000);
        expect(r.r.isError, r.t).toBeFalsy();
        expect(r.s).toMatchObject({ exit_code: 0, stdout: `run-${i}\n`, state: 'exited' });
      }
      await until(async () => closes.some((x) => x.kind === 'ghost-parts') && closes.some((x) => x.kind === 'heartbeats'), 60_000, 'both floods to end');
    } finally {
      flooding = false;
      await flood;
    }
    const heartbeats = closes.find((x) => x.kind === 'heartbeats')!;
    expect(heartbeats, JSON.stringify(closes)).toMatchObject({
      code: AGENT_BUDGET_CLOSE,
      reason: `message budget exceeded: heartbeats more often than 2 per ${HEARTBEAT_MS} ms`,
    });
    const ghosts = closes.find((x) => x.kind === 'ghost-parts')!;
    expect(ghosts, JSON.stringify(closes)).toMatchObject({
      code: AGENT_BUDGET_CLOSE,
      reason: expect.stringMatching(/^message budget exceeded: more than \d+ messages about jobs unknown or not its own$/),
    });
    // Each closed flood is one audit row of the token that sent it.
    const rows = await until(
      async () => {
        const a = await fleet.admin(TEAM, 'GET', '/audit?decision=denied&limit=200');
        const mine = (a.body.entries as S[]).filter((e) => e.subject === 'agent-swarm' && /^agent flooder: message budget exceeded/.test(String(e.reason)));
        return mine.some((e) => /heartbeats/.test(String(e.reason))) && mine.some((e) => /jobs unknown or not its own/.test(String(e.reason))) ? mine : null;
      },
      20_000,
      'the audit rows of the closed floods',
    );
    expect(rows[0]).toMatchObject({ decision: 'denied', reason: expect.stringContaining(`connection closed (${AGENT_BUDGET_CLOSE})`) });
    // The real agent was never disconnected, and the flooder is not left connected.
    expect(await fleet.agentView(TEAM, 'worker')).toMatchObject({ state: 'connected', connected_at: before!.connected_at });
    expect(worker.logs()).not.toMatch(/disconnected from/);
    expect((await fleet.agentView(TEAM, 'flooder'))?.state).not.toBe('connected');
  }, 180_000);

  it.each(JUNK)(
    'closes (4008) a connection flooding %s messages within seconds; the team answers its admin and MCP calls throughout',
    async (kind) => {
      const c = await fleet.mcp(TEAM);
      const ws = await welcomedFlooder(`junk-${kind}`);
      const polls: { ms: number; status: number }[] = [];
      let flooding = true;
      // The team's admin API throughout the flood, every ~200 ms, each answer timed on its own
      // (a fresh token each time, so the admin rate limit per token never answers instead).
      const poller = (async () => {
        while (flooding) {
          const token = await gw.token({ team: TEAM, scopes: ['admin'] });
          const t0 = Date.now();
          const r = await fetch(`${gw.url}/admin/v1/agents`, { headers: { Authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(60_000) });
          await r.arrayBuffer();
          polls.push({ ms: Date.now() - t0, status: r.status });
          await new Promise((res) => setTimeout(res, 200));
        }
      })();
      let end: Awaited<ReturnType<typeof junkFlood>>;
      let job: Awaited<ReturnType<typeof call>>;
      try {
        // The team's real agent takes a job meanwhile.
        const running = call(c, 'execute', { command: `echo during-${kind}`, agent: 'worker' }, 30_000);
        end = await junkFlood(ws, kind);
        // Two more polls after the close: the object is not still chewing on a backlog.
        const seen = polls.length;
        await until(async () => polls.length >= seen + 2, 30_000, 'two admin calls after the close');
        job = await running;
      } finally {
        flooding = false;
        await poller;
      }
      console.log(`${kind} flood: ${JSON.stringify(end)}; admin calls meanwhile (ms): ${polls.map((p) => p.ms).join(' ')}`);
      expect(end, JSON.stringify(end)).toMatchObject({
        code: AGENT_BUDGET_CLOSE,
        reason: `message budget exceeded: more than ${MALFORMED_BURST} malformed messages`,
      });
      // The budget is spent by the flood's first MALFORMED_BURST + 1 messages (or its first big one),
      // so the first junk message stands for the moment it went over.
      expect(end.closeFrameAfterMs, JSON.stringify(end)).toBeLessThan(CLOSE_FRAME_BOUND_MS);
      expect(end.closedAfterMs, JSON.stringify(end)).toBeLessThan(CLOSE_BOUND_MS);
      expect(
        polls.every((p) => p.status === 200),
        JSON.stringify(polls),
      ).toBe(true);
      expect(Math.max(...polls.map((p) => p.ms)), JSON.stringify(polls)).toBeLessThan(ADMIN_BOUND_MS);
      expect(job.r.isError, job.t).toBeFalsy();
      expect(job.s).toMatchObject({ exit_code: 0, stdout: `during-${kind}\n`, state: 'exited' });
    },
    120_000,
  );

  it('a real result big enough to travel as job.exit.part messages stays inside the budget', async () => {
    const c = await fleet.mcp(TEAM);
    const before = await fleet.agentView(TEAM, 'worker');
    // In the background: what is checked is the agent's messages, not the foreground answer's size.
    const started = await call(c, 'execute', { command: `head -c ${BIG_INLINE} /dev/zero`, agent: 'worker', background: true });
    expect(started.r.isError, started.t).toBeFalsy();
    const jobId = started.s.job_id as string;
    const ended = await until(
      async () => {
        const v = (await call(c, 'job_status', { job_id: jobId, wait_ms: 5000 })).s;
        return v.state !== 'running' && v.artifact_state !== 'uploading' ? v : null;
      },
      120_000,
      'the big job to end',
    );
    expect(ended).toMatchObject({ state: 'exited', exit_code: 0, agent_id: 'worker', stdout_bytes: BIG_INLINE, artifact_state: 'complete' });
    // Its inline result went as parts (24 MiB of JSON), each taken by the edge.
    expect(proxy.messages('job.exit.part', jobId).length).toBeGreaterThanOrEqual(4);
    expect(await fleet.agentView(TEAM, 'worker')).toMatchObject({ state: 'connected', connected_at: before!.connected_at });
    expect(worker.logs()).not.toMatch(/disconnected from/);
  }, 180_000);
});
