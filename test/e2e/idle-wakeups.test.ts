/**
 * Idle teams cost nothing: a team whose agent is connected and idle wakes its Durable Object neither
 * for heartbeats nor for alarms — the agent's ping is answered by the platform (WebSocket auto-response)
 * and no alarm is armed for liveness alone. The observable is the object's own wake counter (`wakes`
 * in `GET /admin/v1/overview`'s `dispatcher`: `webSocketMessage` and `alarm` runs of this instance).
 * Liveness still holds: an agent frozen with SIGSTOP (socket open, no pings) gets no job at the next
 * placement, and its running job is lost after the alarm's liveness check; an agent of the previous
 * protocol version still heartbeats its old way; and the agent itself reconnects when an edge that
 * answered its pings stops answering them.
 * Real `wrangler dev` with 200 ms heartbeats, a real agent (`node executor/main.ts`, sandbox none), the
 * MCP SDK client; the agent's side of a dead link against the stand-in edge of the agent tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { WebSocket } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_CONNECT_PATH, MISSED_HEARTBEATS, OLDEST_AGENT_PROTOCOL, PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';
import type { AgentView } from '../../src/contracts/job-view.ts';
import type { DispatchHealth } from '../../src/dispatch/job-metrics.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { FakeEdge } from '../executor/fake-edge.ts';
import { ROOT, startAgent, startGateway, stopGroup, type AgentProcess, type Gateway } from './harness.ts';

const HB = 200;
const SILENT_MS = MISSED_HEARTBEATS * HB;
const TEAM = 'idle';
const QUEUE_WAIT_MS = 1500;

let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function admin(team: string, path: string): Promise<Record<string, any>> {
  const token = await gw.token({ team, scopes: ['admin'] });
  const r = await fetch(`${gw.url}/admin/v1${path}`, { headers: { Authorization: `Bearer ${token}` } });
  if (!r.ok) throw new Error(`GET ${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as Record<string, any>;
}
const health = async (team = TEAM) => (await admin(team, '/overview')).dispatcher as DispatchHealth;
const agentView = async (id: string, team = TEAM) => ((await admin(team, '/agents')).agents as AgentView[]).find((a) => a.agent_id === id);

async function until<T>(f: () => Promise<T | null | undefined | false>, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function call(name: string, args: Record<string, unknown>) {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
  return { r, s: r.structuredContent as Record<string, any> };
}

beforeAll(async () => {
  gw = await startGateway({ vars: { HEARTBEAT_MS: String(HB) } });
  await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, queueWaitMs: QUEUE_WAIT_MS } });
  root = mkdtempSync(join(tmpdir(), 'gatehouse-idle-'));
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: 'none', capacity: 1, agentId: 'idle-agent' });
  await agent.ready;
  client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
}, 120_000);

afterAll(async () => {
  await client?.close().catch(() => {});
  if (agent?.proc.pid && agent.proc.exitCode === null) process.kill(agent.proc.pid, 'SIGCONT');
  await agent?.stop('SIGKILL');
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('an idle team', () => {
  it('with its agent connected, wakes its object neither for heartbeats nor for alarms (the platform answers the pings)', async () => {
    await until(async () => (await agentView('idle-agent'))?.connected, 10_000, 'the agent to be listed');
    // The connection's own messages (hello) are behind us; from here the agent only pings.
    await sleep(3 * HB);
    const before = await health();
    expect(before.wakes, 'the object counts its wake-ups (health().wakes)').toBeDefined();
    const idleFrom = Date.now();
    await sleep(12 * HB);
    const after = await health();
    // The same instance all along (hibernation would start a new one and its own count)…
    expect(after.wakes?.since).toBe(before.wakes?.since);
    // …which read no message and ran no alarm in 12 heartbeat periods.
    expect({ messages: after.wakes?.messages, alarms: after.wakes?.alarms }).toEqual({ messages: before.wakes?.messages, alarms: before.wakes?.alarms });
    // Yet the agent is alive to it: last seen at a ping the platform answered, during the idle time.
    const v = await agentView('idle-agent');
    expect(v).toMatchObject({ connected: true, state: 'connected' });
    expect(v!.last_seen).toBeGreaterThan(idleFrom);
    // And the agent heard its pongs: it never took the link for dead.
    expect(agent.logs(), agent.logs()).not.toMatch(/no answer from|reconnecting/);
  });

  it('an agent of the oldest protocol version the edge speaks (v2) is welcomed in it, and its heartbeat (which wakes the object) keeps it alive', async () => {
    const team = 'idle-v2';
    const token = await gw.token({ team, scopes: ['agent'], subject: 'old-agent' });
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}${AGENT_CONNECT_PATH}`, { headers: { Authorization: `Bearer ${token}` } });
    const messages: Record<string, unknown>[] = [];
    let closed: { code: number; reason: string } | null = null;
    ws.addEventListener('message', (e) => messages.push(JSON.parse(String(e.data)) as Record<string, unknown>));
    ws.addEventListener('close', (e) => (closed = { code: e.code, reason: e.reason }));
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve());
      ws.addEventListener('error', () => reject(new Error('the agent socket did not open')));
    });
    const v = OLDEST_AGENT_PROTOCOL;
    ws.send(
      JSON.stringify({
        type: 'hello',
        v,
        agentId: 'old-agent',
        version: 'previous release',
        capacity: 1,
        sandbox: 'none',
        runtimes: [],
        labels: [],
        running: [],
      }),
    );
    expect(await until(async () => messages.find((m) => m.type === 'welcome'), 10_000, 'the welcome')).toMatchObject({ v });
    const before = await health(team);
    // Heartbeats as a protocol-2 agent sends them (every interval), for longer than the silence limit.
    let beats = 0;
    const beat = () => {
      ws.send(JSON.stringify({ type: 'heartbeat', running: [] }));
      beats += 1;
    };
    beat();
    const timer = setInterval(beat, HB);
    try {
      await sleep(10 * HB);
      expect(await agentView('old-agent', team)).toMatchObject({ connected: true });
    } finally {
      clearInterval(timer);
    }
    const after = await health(team);
    // Each heartbeat reached (and woke) the same instance of the object.
    expect(after.wakes?.since).toBe(before.wakes?.since);
    expect(after.wakes!.messages - before.wakes!.messages).toBe(beats);
    expect(closed).toBeNull();
    // Silent for longer than the limit: gone to placement and to the listing (its socket may stay open).
    await sleep(SILENT_MS + 2 * HB);
    expect(await agentView('old-agent', team)).toMatchObject({ connected: false });
    ws.close();
  });
});

describe('an agent frozen with SIGSTOP (socket open, no pings)', () => {
  it('gets no job at the next placement: the job waits for an agent and is refused no_agent', async () => {
    await until(async () => (await agentView('idle-agent'))?.connected, 10_000, 'the agent to be connected');
    process.kill(agent.proc.pid!, 'SIGSTOP');
    try {
      await sleep(SILENT_MS + 2 * HB);
      expect(await agentView('idle-agent')).toMatchObject({ connected: false });
      const { r, s } = await call('execute', { command: 'echo', args: ['never'] });
      expect(r.isError).toBe(true);
      expect(s.error).toMatchObject({ code: 'no_agent' });
    } finally {
      process.kill(agent.proc.pid!, 'SIGCONT');
    }
    // Running again, it is back (on the same socket, or a new one if it took the link for dead) and takes jobs.
    await until(async () => (await agentView('idle-agent'))?.connected, 15_000, 'the agent to be back');
    const { s } = await call('execute', { command: 'echo', args: ['back'] });
    expect(s.stdout).toBe('back\n');
  }, 60_000);

  it("loses its running job after the alarm's liveness check (the alarm runs while the job does)", async () => {
    const { s: started } = await call('execute', { command: 'sleep', args: ['30'], background: true });
    const jobId = started.job_id as string;
    await until(async () => (await call('job_status', { job_id: jobId })).s.state === 'running', 10_000, 'the job to run');
    process.kill(agent.proc.pid!, 'SIGSTOP');
    const frozenAt = Date.now();
    try {
      // Dropped after SILENT_MS of silence, its job orphaned and lost after SILENT_MS more (plus alarm ticks).
      const lost = await until(
        async () => {
          const st = (await call('job_status', { job_id: jobId })).s;
          return st.state === 'lost' ? st : null;
        },
        15_000,
        'the job to be lost',
      );
      expect(lost).toMatchObject({ state: 'lost', agent_id: 'idle-agent' });
      // Silence counts from the agent's last ping, which came up to one heartbeat before the freeze.
      expect(Date.now() - frozenAt).toBeGreaterThanOrEqual(2 * SILENT_MS - HB);
      expect(await agentView('idle-agent')).toMatchObject({ connected: false });
    } finally {
      process.kill(agent.proc.pid!, 'SIGCONT');
    }
  }, 60_000);
});

describe("the agent's side of a dead link (the stand-in edge of the agent tests)", () => {
  let edge: FakeEdge;
  let p: ChildProcess | null = null;
  let logs = '';
  afterEach(async () => {
    if (p) await stopGroup(p, 3000);
    p = null;
    await edge?.stop();
  });

  it('reconnects when an edge that answered its pings stops answering for three heartbeats', async () => {
    edge = new FakeEdge();
    edge.pong = true;
    await edge.start();
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-idle-edge-'));
    p = spawn(
      process.execPath,
      [join(ROOT, 'executor/main.ts'), '--url', edge.url, '--root', dir, '--sandbox', 'none', '--allow-no-isolation', '--capacity', '1'],
      {
        cwd: ROOT,
        env: { ...process.env, GATEHOUSE_AGENT_TOKEN: edge.token },
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    p.stdout!.on('data', (d) => (logs += d));
    p.stderr!.on('data', (d) => (logs += d));
    try {
      expect(await edge.next((m) => m.type === 'hello', 30_000)).toMatchObject({ v: PROTOCOL_VERSION });
      edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'idle', heartbeatMs: HB });
      // Pings, answered: the link is alive for as long as they are (no reconnect over many heartbeats).
      await edge.next((m) => m.type === 'ping', 10_000);
      await sleep(10 * HB);
      expect(edge.connections).toBe(1);
      // The edge stops answering (a link dead without TCP noticing): a new connection within a few heartbeats.
      edge.pong = false;
      const stoppedAt = Date.now();
      await edge.next((m) => m.type === 'hello', 10_000);
      expect(edge.connections).toBe(2);
      expect(Date.now() - stoppedAt).toBeGreaterThan(SILENT_MS - HB);
      expect(logs).toMatch(/no answer from .* for \d+ ms \(3 heartbeats\); reconnecting/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
