/**
 * Big outputs, end to end (real `wrangler dev` with DO SQLite, D1 and R2, real agent processes,
 * the official MCP client):
 *  - the live relay: a job writing NUL bytes at full speed on both streams keeps its agent alive
 *    in the edge's eyes (heartbeats are not starved behind output: the agent is never dropped),
 *    and the edge keeps each stream's first LIVE_OUTPUT_MAX_BYTES byte for byte;
 *  - multipart artifact uploads (below).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { LIVE_OUTPUT_MAX_BYTES } from '../../src/contracts/limits.ts';
import { until } from '../support/until.ts';

const SANDBOX = testSandbox();
/** Short heartbeats: an agent silent for 3 of them (1.5 s) is dropped by the edge. */
const HEARTBEAT_MS = 500;
const POLICY = {
  ...DEFAULT_POLICY,
  shell: { enabled: true, allow: ['/.*/'] },
  runtime: { ...DEFAULT_POLICY.runtime, allowedRuntimes: [...DEFAULT_POLICY.runtime.allowedRuntimes, 'shell'] },
  // The artifact cap keeps a full-speed writer's spool small; the live window (16 MiB) fits inside it.
  limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 4, queueWaitMs: 20_000, maxTimeoutMs: 120_000, maxArtifactBytes: LIVE_OUTPUT_MAX_BYTES + 4 * 1024 * 1024 },
};

type S = Record<string, unknown>;

let gw: Gateway;
const roots: string[] = [];
const agents: AgentProcess[] = [];
const clients: Client[] = [];

async function admin(team: string, method: string, path: string) {
  const token = await gw.token({ team, scopes: ['admin'] });
  const r = await fetch(`${gw.url}/admin/v1${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
  return { status: r.status, body: (await r.json()) as S };
}

async function agentFor(team: string, id: string, extraArgs: string[] = []): Promise<AgentProcess> {
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-bigout-'));
  roots.push(root);
  const token = await gw.token({ team, scopes: ['agent'], subject: `agent-${id}` });
  const a = startAgent(gw, { token, root, sandbox: SANDBOX, capacity: 2, agentId: id, extraArgs });
  agents.push(a);
  await until(async () => {
    if (a.proc.exitCode !== null) throw new Error(`agent ${id} exited:\n${a.logs()}`);
    return (await agentView(team, id))?.state === 'connected';
  }, 150_000, `agent ${id} to connect`).catch((e: Error) => {
    throw new Error(`${e.message}; its log:\n${a.logs()}`);
  });
  return a;
}

async function agentView(team: string, id: string): Promise<S | undefined> {
  return ((await admin(team, 'GET', '/agents')).body.agents as S[] | undefined)?.find((x) => x.agent_id === id);
}

async function mcp(team: string): Promise<Client> {
  const c = await gw.mcp(team, ['execute', 'artifacts:read']);
  clients.push(c);
  return c;
}

async function call(c: Client, name: string, args: S, timeout = 120_000) {
  const r = await c.callTool({ name, arguments: args }, undefined, { timeout });
  return { r, s: (r.structuredContent ?? {}) as S };
}

describe('big outputs', () => {
  beforeAll(async () => {
    gw = await startGateway({ vars: { HEARTBEAT_MS: String(HEARTBEAT_MS) } });
    await gw.putPolicy('flood', POLICY);
  }, 300_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    for (const a of agents) await a.stop().catch(() => {});
    await gw?.stop();
    for (const d of roots) rmSync(d, { recursive: true, force: true });
  });

  it('a job writing NUL bytes at full speed on both streams: its agent stays alive to the edge, and the edge keeps each stream\'s live window byte for byte', async () => {
    const agent = await agentFor('flood', 'flood-agent');
    const c = await mcp('flood');
    const before = await agentView('flood', 'flood-agent');
    // Both streams at once for 4 s (many heartbeat intervals): 16 MiB of each is relayed live, the rest
    // spooled up to the cap; then it idles, so the live window can be read while the job still runs.
    const started = await call(c, 'execute', {
      command: '(timeout 4 cat /dev/zero &) ; timeout 4 cat /dev/zero >&2; sleep 4; echo end', background: true, timeout_ms: 60_000,
    });
    expect(started.r.isError).toBeFalsy();
    const jobId = started.s.job_id as string;
    // While it floods, the edge hears the agent's heartbeats: output frames do not count as a sign of
    // life, so an agent whose heartbeats queued behind its output would be dropped (3 silent heartbeats).
    let heard = 0;
    let lastSeen = before!.last_seen as number;
    const liveWindow: Record<string, S> = {};
    const ended = await until(async () => {
      const v = await agentView('flood', 'flood-agent');
      expect(v).toMatchObject({ state: 'connected', connected_at: before!.connected_at });
      if ((v!.last_seen as number) > lastSeen) (heard += 1, (lastSeen = v!.last_seen as number));
      for (const stream of ['stdout', 'stderr']) {
        if (liveWindow[stream]) continue;
        // The last bytes of the live window, read from what the edge kept while the job runs: exactly 8 bytes, nothing past it.
        const o = (await call(c, 'job_output', { job_id: jobId, stream, offset: LIVE_OUTPUT_MAX_BYTES - 8, max_bytes: 16 })).s;
        if (o.source === 'live' && o.state === 'running' && (o.data as string).length === 8) liveWindow[stream] = o;
      }
      const s = (await call(c, 'job_status', { job_id: jobId })).s;
      return s.state !== 'running' && s.artifact_state !== 'uploading' ? s : null;
    }, 90_000, 'the flooding job to end');
    expect(ended).toMatchObject({ state: 'exited', exit_code: 0, agent_id: 'flood-agent', artifact_state: 'complete' });
    expect(heard).toBeGreaterThanOrEqual(2);
    expect(agent.logs()).not.toMatch(/disconnected from/);
    for (const stream of ['stdout', 'stderr']) {
      expect(liveWindow[stream], `the ${stream} live window was never complete while the job ran`).toMatchObject({ data: '\0'.repeat(8), next_offset: LIVE_OUTPUT_MAX_BYTES });
      // Stored whole: the artifact holds the capped stream, NUL bytes as written.
      const head = (await call(c, 'job_output', { job_id: jobId, stream, offset: 0, max_bytes: 4096 })).s;
      expect(head).toMatchObject({ source: 'artifact', data: '\0'.repeat(4096) });
    }
  }, 180_000);
});
