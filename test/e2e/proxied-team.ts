/**
 * A team whose agents share one agent token, with one real agent ("worker") connected through an
 * AgentProxy: the setup of the tests where a second connection on the same token attacks the team
 * (test/e2e/agent-flood.test.ts, test/e2e/agent-uploads.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { AgentProxy } from './agent-proxy.ts';
import { Fleet } from './fleet.ts';
import { until } from '../support/until.ts';

export interface ProxiedTeam {
  gw: Gateway;
  fleet: Fleet;
  proxy: AgentProxy;
  worker: AgentProcess;
  sharedToken: string;
  stop(): Promise<void>;
}

export async function startProxiedTeam(o: { team: string; policy: unknown; subject: string; tmpPrefix: string; heartbeatMs: number }): Promise<ProxiedTeam> {
  // A production-like heartbeat: a loaded test machine never drops the real agent for silence.
  const gw = await startGateway({ vars: { HEARTBEAT_MS: String(o.heartbeatMs) } });
  await gw.putPolicy(o.team, o.policy);
  const fleet = new Fleet(gw, { tmpPrefix: o.tmpPrefix, capacity: 2 });
  // The team's agents share one token: the real agent and the attacker authenticate alike.
  const sharedToken = await gw.token({ team: o.team, scopes: ['agent'], subject: o.subject });
  const proxy = new AgentProxy(gw.url);
  await proxy.start();
  const root = mkdtempSync(join(tmpdir(), o.tmpPrefix));
  const worker = startAgent({ url: proxy.url }, { token: sharedToken, root, sandbox: testSandbox(), capacity: 2, agentId: 'worker' });
  await until(
    async () => {
      if (worker.proc.exitCode !== null) throw new Error(`agent exited:\n${worker.logs()}`);
      return (await fleet.agentView(o.team, 'worker'))?.state === 'connected';
    },
    150_000,
    'the worker agent to connect',
  );
  return {
    gw,
    fleet,
    proxy,
    worker,
    sharedToken,
    async stop() {
      await worker.stop();
      await fleet.close();
      await proxy.stop();
      await gw.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
