/**
 * The link to the team's agents (src/dispatch/agent-link.ts): a socket speaks for its agent only
 * after hello; an agent is heard from through the platform's answers to its pings, its messages,
 * or (protocol 2) its heartbeats, and one silent for three heartbeats is dropped at the next alarm;
 * a revoked token's sockets go at once; its jobs are orphaned only when its last socket is gone.
 */
import { describe, expect, it } from 'vitest';
import { AgentLink, MISSED_HEARTBEATS } from '../../src/dispatch/agent-link.ts';
import { dispatchHost, FakeSocket } from './sql-host.ts';
import { helloOf } from './team-fixture.ts';

const HB = 1000;

function setup() {
  // Any D1 query fails the test: liveness and revocation never ask the shared database.
  const DB = new Proxy({}, { get: (_, name) => () => expect.fail(`the link asked D1 (${String(name)})`) });
  const host = dispatchHost({ heartbeatMs: HB, env: { DB: DB as never } });
  const gone: string[] = [];
  const link = new AgentLink(host, (id) => gone.push(id));
  const open = (agentId: string, tokenId = 't1') => {
    const ws = new FakeSocket();
    host.socketList.push(ws);
    link.attach(ws as unknown as WebSocket, { subject: 's', tokenId, grant: null, agentId: null, connectedAt: host.clock.now });
    expect(link.bind(ws as unknown as WebSocket, link.attachmentOf(ws as unknown as WebSocket)!, helloOf(agentId), () => false, host.clock.now)).toBe(true);
    return ws;
  };
  return { host, link, gone, open };
}

describe('agent link', () => {
  it('drops an agent silent for more than three heartbeats at the next alarm, and orphans its jobs', () => {
    const t = setup();
    const ws = t.open('a1');
    t.host.clock.now += MISSED_HEARTBEATS * HB;
    t.link.onAlarm(t.host.clock.now);
    expect(ws.closed).toBeNull();
    t.host.clock.now += 1;
    t.link.onAlarm(t.host.clock.now);
    expect(ws.closed?.code).toBe(4000);
    expect(t.gone).toEqual(['a1']);
  });

  it('keeps an agent whose pings the platform answers, with no row written for them', () => {
    const t = setup();
    const ws = t.open('a1');
    const writes: string[] = [];
    const exec = t.host.sql.exec.bind(t.host.sql);
    t.host.sql.exec = ((q: string, ...p: SqlStorageValue[]) => (/^\s*(UPDATE|INSERT|DELETE)/i.test(q) && writes.push(q), exec(q, ...p))) as typeof exec;
    for (let i = 0; i < 10; i++) {
      t.host.clock.now += HB;
      ws.lastPing = t.host.clock.now;
      t.link.onAlarm(t.host.clock.now);
    }
    expect(ws.closed).toBeNull();
    expect(writes).toEqual([]);
  });

  it('keeps an agent that sends messages, and a protocol-2 agent that heartbeats', () => {
    const t = setup();
    const v3 = t.open('a1');
    t.open('a2');
    for (let i = 0; i < 10; i++) {
      t.host.clock.now += HB;
      t.link.hear(v3 as unknown as WebSocket, t.host.clock.now);
      t.link.touch('a2', t.host.clock.now);
      t.link.onAlarm(t.host.clock.now);
    }
    expect(t.host.socketList.map((s) => s.closed)).toEqual([null, null]);
  });

  it('places no job on a silent agent, and lists it as disconnected with when it was last heard from', () => {
    const t = setup();
    const quiet = t.open('quiet');
    const pinging = t.open('pinging');
    const pingedAt = t.host.clock.now + 2 * HB;
    quiet.lastPing = pingedAt;
    pinging.lastPing = pingedAt;
    t.host.clock.now = pingedAt + MISSED_HEARTBEATS * HB;
    expect(t.link.schedAgents(new Map()).map((a) => a.id)).toEqual(['quiet', 'pinging']);
    t.host.clock.now += 1;
    pinging.lastPing = t.host.clock.now;
    expect(t.link.schedAgents(new Map()).map((a) => a.id)).toEqual(['pinging']);
    const views = Object.fromEntries(t.link.views(new Map()).map((v) => [v.agent_id, v]));
    expect(views.quiet).toMatchObject({ connected: false, state: 'disconnected', last_seen: pingedAt });
    expect(views.pinging).toMatchObject({ connected: true, state: 'connected', last_seen: t.host.clock.now });
    // Its socket is still open: it comes back with its next ping.
    quiet.lastPing = t.host.clock.now;
    expect(t.link.schedAgents(new Map()).map((a) => a.id)).toEqual(['quiet', 'pinging']);
    expect(quiet.closed).toBeNull();
  });

  it('writes when a gone agent was last heard from (its last ping) with its disconnect', () => {
    const t = setup();
    const ws = t.open('a1');
    const connectedAt = t.host.clock.now;
    ws.lastPing = connectedAt + 5 * HB;
    t.host.clock.now += 6 * HB;
    t.link.drop(ws as unknown as WebSocket, 'closed');
    expect(t.link.views(new Map())).toMatchObject([{ agent_id: 'a1', connected: false, last_seen: connectedAt + 5 * HB }]);
    expect(t.link.agent('a1')?.last_seen).toBe(connectedAt + 5 * HB);
  });

  it("closes a revoked token's sockets at once (4001), without asking D1", () => {
    const t = setup();
    const good = t.open('a1', 'ok');
    const bad = t.open('a2', 'bad');
    expect(t.link.revoke('bad')).toBe(1);
    expect([good.closed, bad.closed?.code]).toEqual([null, 4001]);
    expect(t.gone).toEqual(['a2']);
  });

  it("orphans the jobs only when the agent's last socket is gone: a reconnect replaces the old socket", () => {
    const t = setup();
    const old = t.open('a1');
    const fresh = t.open('a1');
    expect(old.closed).toEqual({ code: 1000, reason: 'replaced by a new connection of the same agent' });
    t.link.drop(old as unknown as WebSocket, 'closed');
    expect(t.gone).toEqual([]);
    t.link.drop(fresh as unknown as WebSocket, 'closed');
    expect(t.gone).toEqual(['a1']);
  });
});
