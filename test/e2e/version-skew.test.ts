/**
 * Version skew between agents and gateways (docs/protocol.md, "Versions: which agent talks to which gateway"):
 * the gateway speaks its protocol version and the one before (welcoming an agent in the version it said);
 * otherwise both sides refuse a peer of another agent protocol version, and the agent then stops for good,
 * saying what to install. Two halves, each with one real side and one stand-in for the other release:
 *  - the real gateway (`wrangler dev`) and, standing in for an older or a newer agent, a hand-made socket whose
 *    `hello` says PROTOCOL_VERSION - 2, - 1 or + 1;
 *  - the real agent process (`node executor/main.ts`) and, standing in for an older or a newer gateway, the
 *    stand-in edge of the agent tests (test/executor/fake-edge.ts), which refuses the hello with 4426 or welcomes
 *    it in another version.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_CONNECT_PATH, AGENT_PROTOCOL_CLOSE, OLDEST_AGENT_PROTOCOL, PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';
import { AGENT_REFUSED_EXIT_CODE } from '../../src/contracts/agent-grant.ts';
import { FakeEdge } from '../executor/fake-edge.ts';
import { ROOT, startGateway, stopGroup, type Gateway } from './harness.ts';

const roots: string[] = [];
const tempRoot = () => {
  const r = mkdtempSync(join(tmpdir(), 'gatehouse-skew-'));
  roots.push(r);
  return r;
};
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

describe('the real gateway and an agent of another protocol version (a hand-made hello)', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway();
  }, 120_000);
  afterAll(async () => {
    await gw?.stop();
  });

  /** Opens the agent socket with a real agent token, says `hello` in version `v`, and answers what came back. */
  async function helloIn(v: number): Promise<{ code: number; reason: string; messages: Record<string, unknown>[] }> {
    const token = await gw.token({ team: 'skew', scopes: ['agent'], subject: `agent-v${v}` });
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}${AGENT_CONNECT_PATH}`, { headers: { Authorization: `Bearer ${token}` } });
    const messages: Record<string, unknown>[] = [];
    ws.addEventListener('message', (e) => messages.push(JSON.parse(String(e.data)) as Record<string, unknown>));
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.addEventListener('close', (e) => r({ code: e.code, reason: e.reason })));
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve());
      ws.addEventListener('error', () => reject(new Error('the agent socket did not open')));
    });
    ws.send(
      JSON.stringify({
        type: 'hello',
        v,
        agentId: `skew-v${v}`,
        version: `stand-in for protocol v${v}`,
        capacity: 1,
        sandbox: 'none',
        runtimes: [],
        labels: [],
        running: [],
      }),
    );
    return { ...(await closed), messages };
  }

  for (const [what, v] of [
    ['an older agent (below the oldest version the gateway speaks)', OLDEST_AGENT_PROTOCOL - 1],
    ['a newer agent (one version above)', PROTOCOL_VERSION + 1],
  ] as const)
    it(`closes the hello of ${what} with 4426, naming both versions and what to install, and never welcomes it`, async () => {
      const r = await helloIn(v);
      expect(r.code).toBe(AGENT_PROTOCOL_CLOSE);
      expect(r.reason).toContain(`agent protocol v${v} is not spoken here: this gateway speaks v${PROTOCOL_VERSION}`);
      expect(r.reason).toContain("install the agent of the gateway's release");
      expect(r.messages.filter((m) => m.type === 'welcome')).toEqual([]);
    });

  for (const [what, v] of [
    ['its own version (the stand-ins are refused for their version, nothing else)', PROTOCOL_VERSION],
    ['the version before, in that version (an agent of the previous release keeps working)', PROTOCOL_VERSION - 1],
    ['the oldest version it speaks, in that version', OLDEST_AGENT_PROTOCOL],
  ] as const)
    it(`welcomes a hello in ${what}`, async () => {
      const token = await gw.token({ team: 'skew', scopes: ['agent'], subject: `agent-same-v${v}` });
      const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}${AGENT_CONNECT_PATH}`, { headers: { Authorization: `Bearer ${token}` } });
      const welcome = new Promise<Record<string, unknown>>((resolve, reject) => {
        ws.addEventListener('message', (e) => resolve(JSON.parse(String(e.data)) as Record<string, unknown>));
        ws.addEventListener('close', (e) => reject(new Error(`closed ${e.code} ${e.reason}`)));
      });
      ws.addEventListener('open', () =>
        ws.send(
          JSON.stringify({
            type: 'hello',
            v,
            agentId: `skew-same-v${v}`,
            version: 'x',
            capacity: 1,
            sandbox: 'none',
            runtimes: [],
            labels: [],
            running: [],
          }),
        ),
      );
      expect(await welcome).toMatchObject({ type: 'welcome', v });
      ws.close();
    });
});

describe('the real agent process and a gateway of another protocol version (a stand-in edge)', () => {
  let edge: FakeEdge;
  let agent: ChildProcess | null = null;
  let logs = '';
  afterEach(async () => {
    if (agent) await stopGroup(agent, 3000);
    agent = null;
    await edge?.stop();
  });

  /** Starts `node executor/main.ts` (sandbox none: no job runs here) against a fresh stand-in edge. */
  async function startAgent(): Promise<ChildProcess> {
    edge = new FakeEdge();
    await edge.start();
    logs = '';
    const p = spawn(
      process.execPath,
      [join(ROOT, 'executor/main.ts'), '--url', edge.url, '--root', tempRoot(), '--sandbox', 'none', '--allow-no-isolation', '--capacity', '1'],
      {
        cwd: ROOT,
        env: { ...process.env, GATEHOUSE_AGENT_TOKEN: edge.token },
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    p.stdout!.on('data', (d) => (logs += d));
    p.stderr!.on('data', (d) => (logs += d));
    agent = p;
    const hello = await edge.next((m) => m.type === 'hello', 30_000);
    expect(hello.v).toBe(PROTOCOL_VERSION);
    return p;
  }

  /** The agent's exit status; fails with its log if it is still running after `ms`. */
  function exitStatus(p: ChildProcess, ms = 15_000): Promise<number | null> {
    if (p.exitCode !== null) return Promise.resolve(p.exitCode);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`the agent did not exit in ${ms} ms; its log:\n${logs}`)), ms);
      p.once('exit', (code) => {
        clearTimeout(t);
        resolve(code);
      });
    });
  }

  it('stops with status 78 when the gateway refuses its hello with 4426, saying what to install, and does not reconnect', async () => {
    const p = await startAgent();
    edge.close(AGENT_PROTOCOL_CLOSE, `agent protocol v${PROTOCOL_VERSION} is not spoken here: this gateway speaks v${PROTOCOL_VERSION - 1}`);
    expect(await exitStatus(p)).toBe(AGENT_REFUSED_EXIT_CODE);
    expect(logs).toContain(`(close code ${AGENT_PROTOCOL_CLOSE}): agent protocol v${PROTOCOL_VERSION} is not spoken here`);
    expect(logs).toContain('install the agent of the same Gatehouse version as the gateway');
    expect(edge.connections).toBe(1);
  });

  for (const [what, v] of [
    ['an older gateway', PROTOCOL_VERSION - 1],
    ['a newer gateway', PROTOCOL_VERSION + 1],
  ] as const)
    it(`stops with status 78 when ${what} welcomes it in v${v}, naming both versions, instead of waiting for jobs it cannot read`, async () => {
      const p = await startAgent();
      edge.send({ type: 'welcome', v, team: 'skew', heartbeatMs: 1000 });
      expect(await exitStatus(p)).toBe(AGENT_REFUSED_EXIT_CODE);
      expect(logs).toContain(`the gateway speaks agent protocol v${v}; this agent speaks v${PROTOCOL_VERSION}`);
      expect(logs).toContain('install the agent of the same Gatehouse version as the gateway');
      // It never took the welcome: no heartbeat followed, and it did not come back.
      expect(edge.received.filter((m) => m.type === 'heartbeat' || m.type === 'ping' || m.type === 'running')).toEqual([]);
      expect(edge.connections).toBe(1);
    });
});
