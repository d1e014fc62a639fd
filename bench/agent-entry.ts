/**
 * The agent both ways, side by side: from its TypeScript sources (`node executor/main.ts`, as a
 * checkout's `npx gatehouse agent` runs it) and the bundle `npm run build` writes (dist/agent.mjs),
 * which a package installs and `npm start` runs.
 * Both connect to the same gateway for their own team (sandbox none, so the figures are the
 * agent's and the edge's); `execute true` calls alternate between them, one at a time, so a
 * change in the machine's load falls on both alike. Figures: p50/p99 of each, the ratio of the
 * p50s, and each agent's idle RSS.
 *
 * `node bench/agent-entry.ts [calls=100]` runs it alone against a fresh gateway.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type AgentProcess, type Gateway } from '../test/e2e/harness.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';
import { startBenchGateway } from './gateway.ts';
import { AGENT_ENTRIES, buildPackedAgent, type AgentEntry } from './relay.ts';

export interface EntryFigures {
  /** Wall time of each `execute true` call, ms. */
  calls: Record<AgentEntry, number[]>;
  idleRssMb: Record<AgentEntry, number | null>;
}

export function rssMb(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

export function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

/** Needs dist/agent.mjs (buildPackedAgent). */
export async function benchAgentEntries(gw: Gateway, n: number): Promise<EntryFigures> {
  const agents: AgentProcess[] = [];
  const roots: string[] = [];
  const clients = [] as Awaited<ReturnType<Gateway['mcp']>>[];
  const out: EntryFigures = { calls: { sources: [], packed: [] }, idleRssMb: { sources: null, packed: null } };
  try {
    const pids = {} as Record<AgentEntry, number>;
    const entries = Object.keys(AGENT_ENTRIES) as AgentEntry[];
    const byEntry = {} as Record<AgentEntry, (typeof clients)[number]>;
    for (const entry of entries) {
      const team = `b-entry-${entry}`;
      await gw.putPolicy(team, { ...DEFAULT_POLICY, sandbox: { minimum: 'none' as const } });
      const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-entry-'));
      roots.push(root);
      const entryPath = AGENT_ENTRIES[entry].entry;
      const a = startAgent(gw, {
        token: await gw.token({ team, scopes: ['agent'] }),
        root,
        sandbox: 'none',
        capacity: 4,
        agentId: team,
        ...(entryPath ? { entry: entryPath } : {}),
      });
      agents.push(a);
      await a.ready;
      pids[entry] = a.proc.pid!;
      byEntry[entry] = await gw.mcp(team, ['execute', 'artifacts:read']);
      clients.push(byEntry[entry]);
    }
    const once = async (entry: AgentEntry) => {
      const t = performance.now();
      const r = await byEntry[entry].callTool({ name: 'execute', arguments: { command: 'true', args: [] } });
      if (r.isError) throw new Error(`execute failed: ${JSON.stringify(r.content).slice(0, 200)}`);
      return performance.now() - t;
    };
    for (let i = 0; i < 5; i++) for (const entry of entries) await once(entry); // warm-up
    for (const entry of entries) out.idleRssMb[entry] = rssMb(pids[entry]);
    for (let i = 0; i < n; i++) {
      // Alternate which goes first, so neither always follows the other.
      for (const entry of i % 2 ? [...entries].reverse() : entries) out.calls[entry].push(await once(entry));
    }
  } finally {
    for (const c of clients) await c.close().catch(() => {});
    for (const a of agents) await a.stop();
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  }
  return out;
}

/** Table rows: one per agent entry, the packed one first, then the ratio. */
export function entryRows(f: EntryFigures): string[][] {
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  const [src, packed] = [f.calls.sources, f.calls.packed];
  const rss = (e: AgentEntry) => (f.idleRssMb[e] === null ? '?' : `${f.idleRssMb[e]!.toFixed(0)} MB`);
  return [
    ['execute true, sandbox none, packed agent (dist/agent.mjs)', ms(pct(packed, 50)), ms(pct(packed, 99)), `idle RSS ${rss('packed')}`],
    [
      'execute true, sandbox none, agent from its TypeScript sources (executor/main.ts)',
      ms(pct(src, 50)),
      ms(pct(src, 99)),
      `${(pct(src, 50) / pct(packed, 50)).toFixed(2)}× the packed agent's p50 (p99 ${(pct(src, 99) / pct(packed, 99)).toFixed(2)}×); idle RSS ${rss('sources')}`,
    ],
  ];
}

if (import.meta.main) {
  const n = Number(process.argv[2] ?? 100);
  buildPackedAgent();
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
  try {
    for (const r of entryRows(await benchAgentEntries(gw, n))) console.log(r.join(' | '));
  } finally {
    await gw.stop();
  }
}
