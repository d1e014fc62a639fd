/**
 * Teams' agents and MCP clients on one test gateway, with the admin API's view of them, all
 * stopped and removed by `close()`: the scaffolding of the end-to-end tests that start several
 * agents (some through an `AgentProxy`) and watch them from the edge.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { until } from '../support/until.ts';

type S = Record<string, unknown>;

export class Fleet {
  private readonly roots: string[] = [];
  private readonly agents: AgentProcess[] = [];
  private readonly clients: Client[] = [];

  private readonly gw: Gateway;
  private readonly o: { tmpPrefix: string; capacity: number };

  constructor(gw: Gateway, o: { tmpPrefix: string; capacity: number }) {
    this.gw = gw;
    this.o = o;
  }

  /** One admin API call as team `team`'s admin. */
  async admin(team: string, method: string, path: string): Promise<{ status: number; body: S }> {
    const token = await this.gw.token({ team, scopes: ['admin'] });
    const r = await fetch(`${this.gw.url}/admin/v1${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
    return { status: r.status, body: (await r.json()) as S };
  }

  /** The edge's view of agent `id` (admin `/agents`), undefined when it does not list it. */
  async agentView(team: string, id: string): Promise<S | undefined> {
    return ((await this.admin(team, 'GET', '/agents')).body.agents as S[] | undefined)?.find((x) => x.agent_id === id);
  }

  /** Starts an agent for `team` (through `url`, the gateway's by default) and waits until the edge lists it connected. */
  async agentFor(team: string, id: string, o: { url?: string; extraArgs?: string[] } = {}): Promise<AgentProcess> {
    const root = mkdtempSync(join(tmpdir(), this.o.tmpPrefix));
    this.roots.push(root);
    const token = await this.gw.token({ team, scopes: ['agent'], subject: `agent-${id}` });
    const a = startAgent(
      { url: o.url ?? this.gw.url },
      { token, root, sandbox: testSandbox(), capacity: this.o.capacity, agentId: id, extraArgs: o.extraArgs ?? [] },
    );
    this.agents.push(a);
    await until(
      async () => {
        if (a.proc.exitCode !== null) throw new Error(`agent ${id} exited:\n${a.logs()}`);
        return (await this.agentView(team, id))?.state === 'connected';
      },
      150_000,
      `agent ${id} to connect`,
    ).catch((e: Error) => {
      throw new Error(`${e.message}; its log:\n${a.logs()}`);
    });
    return a;
  }

  /** An MCP client of `team` that may run jobs and read artifacts. */
  async mcp(team: string): Promise<Client> {
    const c = await this.gw.mcp(team, ['execute', 'artifacts:read']);
    this.clients.push(c);
    return c;
  }

  async close(): Promise<void> {
    for (const c of this.clients) await c.close().catch(() => {});
    for (const a of this.agents) await a.stop().catch(() => {});
    for (const d of this.roots) rmSync(d, { recursive: true, force: true });
  }
}

/** A tool call with its structured result (`s`) and first text block (`t`). */
export async function call(c: Client, name: string, args: S, timeout = 120_000) {
  const r = await c.callTool({ name, arguments: args }, undefined, { timeout });
  const t = (r.content as { text?: string }[] | undefined)?.[0]?.text ?? '';
  return { r, s: (r.structuredContent ?? {}) as S, t };
}
