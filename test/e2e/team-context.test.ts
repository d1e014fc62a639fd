/**
 * The MCP server is built per request from the caller's context (team, subject, scopes), while
 * tool definitions and their schemas are shared by every request of an isolate. This attacks
 * the seam: many requests of two teams and of a read-only token at once, in both protocol eras,
 * on one gateway (one isolate), and each must see only its own caller. A context that leaked
 * would run a job on the other team's agent, record it under another subject, or let the
 * read-only token run a job.
 * Real `wrangler dev`, real agents (sandbox none: this file is about the edge), the official
 * MCP clients (SDK v1 for the 2025 era, SDK v2 pinned to 2026-07-28).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { connectMcp, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

let gw: Gateway;
const agents: AgentProcess[] = [];
const roots: string[] = [];

beforeAll(async () => {
  // Heartbeats at the production interval: this file is about the edge, and a loaded CI host can hold an agent's
  // event loop past the tests' 3 s loss window while 2×12 jobs start at once.
  gw = await startGateway({ vars: { HEARTBEAT_MS: '5000' } });
  for (const team of ['ctx-a', 'ctx-b']) {
    // Room for every concurrent job of the test, so a slow machine queues them instead of refusing.
    await gw.putPolicy(team, { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 12, queueWaitMs: 60_000 } });
    const root = mkdtempSync(join(tmpdir(), `gatehouse-${team}-`));
    roots.push(root);
    const a = startAgent(gw, { token: await gw.token({ team, scopes: ['agent'] }), root, sandbox: 'none', capacity: 12, agentId: `agent-${team}` });
    agents.push(a);
  }
  await Promise.all(agents.map((a) => a.ready));
}, 120_000);

afterAll(async () => {
  for (const a of agents) await a.stop();
  await gw?.stop();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

interface Caller {
  team: string;
  subject: string;
  canExecute: boolean;
  call(name: string, args: Record<string, unknown>): Promise<{ isError?: boolean; structuredContent?: Record<string, unknown>; content?: unknown }>;
  close(): Promise<void>;
}

async function caller(team: string, subject: string, scopes: string[], era: 'legacy' | 'modern'): Promise<Caller> {
  const token = await gw.token({ team, subject, scopes });
  if (era === 'legacy') {
    const c = await connectMcp(gw.mcpUrl, token);
    return {
      team,
      subject,
      canExecute: scopes.includes('execute'),
      call: (name, args) => c.callTool({ name, arguments: args }) as never,
      close: () => c.close(),
    };
  }
  const c = new ClientV2({ name: 'ctx-modern', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await c.connect(new TransportV2(new URL(gw.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  expect(c.getProtocolEra()).toBe('modern');
  return {
    team,
    subject,
    canExecute: scopes.includes('execute'),
    call: (name, args) => c.callTool({ name, arguments: args }) as never,
    close: () => c.close(),
  };
}

describe('per-request team context', () => {
  it('concurrent requests of two teams and a read-only token, in both eras, each see only their own caller', async () => {
    const callers = await Promise.all([
      caller('ctx-a', 'alice', ['execute', 'artifacts:read'], 'legacy'),
      caller('ctx-b', 'bob', ['execute', 'artifacts:read'], 'legacy'),
      caller('ctx-a', 'reader', ['artifacts:read'], 'legacy'),
      caller('ctx-b', 'carol', ['execute', 'artifacts:read'], 'modern'),
      caller('ctx-a', 'dave', ['execute', 'artifacts:read'], 'modern'),
      caller('ctx-b', 'rita', ['artifacts:read'], 'modern'),
    ]);
    const ROUNDS = 6;
    const results = await Promise.all(
      callers.flatMap((c) =>
        Array.from({ length: ROUNDS }, async (_, i) => {
          const r = await c.call('execute', { command: 'echo', args: [`${c.subject}-${i}`] });
          return { c, i, r };
        }),
      ),
    );
    for (const { c, i, r } of results) {
      const s = r.structuredContent as Record<string, any>;
      if (!c.canExecute) {
        // The read-only token never runs a job, however its requests interleave with executing ones.
        expect(r.isError, `${c.subject} ran a job`).toBe(true);
        expect(s.error.code).toBe('insufficient_scope');
        continue;
      }
      expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
      expect(s.agent_id).toBe(`agent-${c.team}`);
      expect(s.stdout).toBe(`${c.subject}-${i}\n`);
    }
    // Each job is recorded under its caller's team and subject: the other team cannot even see it.
    const ran = results.filter((x) => x.c.canExecute);
    for (const { c, r } of ran) {
      const jobId = (r.structuredContent as { job_id: string }).job_id;
      const own = await c.call('job_status', { job_id: jobId });
      expect(own.isError, JSON.stringify(own.content)).toBeFalsy();
      expect((own.structuredContent as { subject: string }).subject).toBe(c.subject);
      const other = callers.find((o) => o.canExecute && o.team !== c.team)!;
      const theirs = await other.call('job_status', { job_id: jobId });
      expect(theirs.isError).toBe(true);
      expect(JSON.stringify(theirs.content)).toMatch(/not found/);
    }
    await Promise.all(callers.map((c) => c.close()));
  }, 180_000);
});
