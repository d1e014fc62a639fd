/**
 * The link to the team's agents (src/dispatch/agent-link.ts): a socket speaks for its agent only
 * after hello, an agent silent for three heartbeats or whose token was revoked (by any path) is
 * dropped at the next alarm, and its jobs are orphaned only when its last socket is gone.
 */
import { describe, expect, it } from 'vitest';
import { AgentLink, MISSED_HEARTBEATS } from '../../src/dispatch/agent-link.ts';
import { dispatchHost, FakeSocket } from './sql-host.ts';
import { helloOf } from './team-fixture.ts';

const HB = 1000;

function setup(revoked: string[] = []) {
  const DB = { prepare: () => ({ bind: (jti: string) => ({ first: async () => (revoked.includes(jti) ? { r: 1 } : null) }) }) };
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
  it('drops an agent silent for more than three heartbeats at the next alarm, and orphans its jobs', async () => {
    const t = setup();
    const ws = t.open('a1');
    t.host.clock.now += MISSED_HEARTBEATS * HB;
    await t.link.onAlarm(t.host.clock.now);
    expect(ws.closed).toBeNull();
    t.host.clock.now += 1;
    await t.link.onAlarm(t.host.clock.now);
    expect(ws.closed?.code).toBe(4000);
    expect(t.gone).toEqual(['a1']);
  });

  it('keeps an agent that heartbeats', async () => {
    const t = setup();
    const ws = t.open('a1');
    for (let i = 0; i < 10; i++) {
      t.host.clock.now += HB;
      t.link.touch('a1', t.host.clock.now);
      await t.link.onAlarm(t.host.clock.now);
    }
    expect(ws.closed).toBeNull();
  });

  it('disconnects the agents of a token revoked by another path at the next alarm', async () => {
    const t = setup(['bad']);
    const good = t.open('a1', 'ok');
    const bad = t.open('a2', 'bad');
    await t.link.onAlarm(t.host.clock.now);
    expect([good.closed, bad.closed?.code]).toEqual([null, 4001]);
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

  it('asks for the alarm every heartbeat while any socket is open', () => {
    const t = setup();
    expect(t.link.nextWake(0)).toBeNull();
    t.open('a1');
    expect(t.link.nextWake(0)).toBe(HB);
  });
});
