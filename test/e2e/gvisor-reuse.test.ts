/**
 * Sandbox reuse end to end: a team policy with `sandbox.reuse` reaches the agent through the
 * gateway and the team's DO, and the agent then runs the team's consecutive calls in one gVisor
 * sandbox; a policy without it keeps every call in a fresh one. Real `wrangler dev`, a real agent
 * in gVisor, the official MCP SDK client. Outside CI the file skips when runsc is missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, requireParts, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { PRESETS } from '../../src/policy/presets.ts';

const RUNSC = requireParts({ runsc: hasCommand('runsc') });
if (!RUNSC) console.warn('gvisor-reuse.test.ts: skipped — runsc is not installed (allowed outside CI only)');
const maybe = RUNSC ? describe : describe.skip;

maybe('sandbox.reuse through the gateway', () => {
  let gw: Gateway;
  const agents: AgentProcess[] = [];
  const roots: string[] = [];
  const clients: Client[] = [];

  /** `reuse`: the team's sandbox.reuse; 'default': the team keeps the policy it starts with; a preset name: that preset. */
  async function team(name: string, reuse?: { jobs: number; seconds: number } | 'default' | 'strict'): Promise<Client> {
    const root = mkdtempSync(join(tmpdir(), 'gatehouse-ws-'));
    roots.push(root);
    if (reuse === 'strict') await gw.putPolicy(name, PRESETS.strict.policy);
    else if (reuse !== 'default') await gw.putPolicy(name, { ...DEFAULT_POLICY, sandbox: { minimum: 'gvisor', ...(reuse ? { reuse } : {}) } });
    const a = startAgent(gw, { token: await gw.token({ team: name, scopes: ['agent'] }), root, sandbox: 'gvisor', capacity: 2, agentId: `reuse-${name}` });
    agents.push(a);
    await a.ready;
    const c = await gw.mcp(name, ['execute']);
    clients.push(c);
    return c;
  }

  /** gVisor's boot id is random per sandbox: the same id means the same sandbox ran both calls. */
  async function bootId(c: Client): Promise<string> {
    const r = await c.callTool({ name: 'execute', arguments: { command: 'cat', args: ['/proc/sys/kernel/random/boot_id'] } }, undefined, { timeout: 60_000 });
    const s = r.structuredContent as { stdout: string; exit_code: number };
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    expect(s.exit_code).toBe(0);
    expect(s.stdout).toMatch(/^[0-9a-f-]{36}\n$/);
    return s.stdout;
  }

  beforeAll(async () => {
    gw = await startGateway();
  }, 120_000);
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    for (const a of agents) await a.stop();
    await gw?.stop();
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  }, 60_000);

  it('a team with sandbox.reuse runs consecutive calls in one sandbox; a team without it never does', async () => {
    const reusing = await team('reuse-on', { jobs: 10, seconds: 600 });
    const a = await bootId(reusing);
    expect(await bootId(reusing)).toBe(a);
    expect(await bootId(reusing)).toBe(a);
    const single = await team('reuse-off');
    const ids = [await bootId(single), await bootId(single), await bootId(single)];
    expect(new Set(ids).size).toBe(3);
    // The agent built its reuse init's compiled job start (CI's machines have a C compiler).
    if (process.env.CI === 'true') expect(agents[0].logs()).toMatch(/sandbox: gvisor \(.*reused jobs start with compiled\)/);
  }, 180_000);

  it('a team that never set a policy gets reuse (the standard preset); the strict preset is single-use', async () => {
    const fresh = await team('reuse-default', 'default');
    const a = await bootId(fresh);
    expect(await bootId(fresh)).toBe(a);
    const strict = await team('reuse-strict', 'strict');
    const ids = [await bootId(strict), await bootId(strict)];
    expect(new Set(ids).size).toBe(2);
  }, 180_000);
});
