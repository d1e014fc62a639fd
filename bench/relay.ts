/**
 * The live relay under a binary flood: one job writes `bytes` of random binary to stdout
 * (`head -c N /dev/urandom`, sandbox none) through an agent whose socket goes through a loopback
 * proxy that counts what it sends (test/e2e/agent-proxy.ts). Figures: the agent's peak RSS, the
 * bytes on its socket against the output it relayed live (the edge keeps the first
 * LIVE_OUTPUT_MAX_BYTES of each stream live; the rest goes only to the artifact) and against the
 * whole output, and how late the agent's heartbeats arrived while the job ran (the largest gap
 * between two heartbeats at the proxy, minus the heartbeat interval).
 *
 * Each figure is measured twice, side by side: with the agent run from its TypeScript sources
 * (`npx gatehouse agent` in a checkout, `node executor/main.ts`) and bundled, as a package installs
 * it and `npm start` runs it (the bundle `npm run build` writes, dist/agent.mjs).
 *
 * `node bench/relay.ts [megabytes=1000] [sources|packed]` runs it alone against a fresh gateway (both setups unless one is named).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type Gateway } from '../test/e2e/harness.ts';
import { AgentProxy } from '../test/e2e/agent-proxy.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';
import { startBenchGateway } from './gateway.ts';

/** The two ways a user runs the agent. */
export const AGENT_ENTRIES = {
  sources: { label: 'TypeScript sources (executor/main.ts)', entry: undefined },
  packed: { label: 'packed (dist/agent.mjs, as installed and as npm start runs it)', entry: join(import.meta.dirname, '../dist/agent.mjs') },
} as const;
export type AgentEntry = keyof typeof AGENT_ENTRIES;

export interface RelayFigures {
  entry: AgentEntry;
  outputBytes: number;
  /** Output bytes the agent relayed live (binary frames' data). */
  relayedBytes: number;
  /** Everything the agent wrote on its socket while the job ran (frames with headers, heartbeats, the exit). */
  socketBytes: number;
  rssIdleMb: number;
  rssPeakMb: number;
  heartbeatMs: number;
  /** Largest gap between two heartbeats at the proxy while the job ran (or from the last one to its end), minus heartbeatMs. */
  heartbeatLateMs: number | null;
  seconds: number;
  complete: boolean;
  error?: string;
  /** The end of the agent's log when the run failed. */
  agentLogTail?: string;
}

function rssMb(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

/** Builds dist/agent.mjs (`npm run build`), which the packed rows run. */
export function buildPackedAgent(): void {
  execFileSync(process.execPath, [join(import.meta.dirname, '../scripts/build-dist.ts')], { stdio: 'ignore' });
}

/** One agent (`entry`) on its own team through a counting proxy; one job of `bytes` random binary stdout. */
export async function benchRelay(gw: Gateway, entry: AgentEntry, bytes: number, heartbeatMs: number): Promise<RelayFigures> {
  const team = `b-relay-${entry}`;
  await gw.putPolicy(team, {
    ...DEFAULT_POLICY,
    limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: 600_000, maxArtifactBytes: Math.max(bytes, 1024 * 1024) },
    executables: { allow: [...DEFAULT_POLICY.executables.allow, 'head'] },
    sandbox: { minimum: 'none' as const },
  });
  const proxy = new AgentProxy(gw.url);
  await proxy.start();
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-relay-'));
  const agent = startAgent(
    { url: proxy.url },
    {
      token: await gw.token({ team, scopes: ['agent'] }),
      root,
      sandbox: 'none',
      capacity: 2,
      agentId: team,
      extraArgs: ['--max-artifact-bytes', String(Math.max(bytes, 1024 * 1024))],
      ...(AGENT_ENTRIES[entry].entry ? { entry: AGENT_ENTRIES[entry].entry } : {}),
    },
  );
  const c = await gw.mcp(team, ['execute', 'artifacts:read']);
  const out: RelayFigures = {
    entry,
    outputBytes: bytes,
    relayedBytes: 0,
    socketBytes: 0,
    rssIdleMb: 0,
    rssPeakMb: 0,
    heartbeatMs,
    heartbeatLateMs: null,
    seconds: 0,
    complete: false,
  };
  try {
    await agent.ready;
    // Settle after start-up (module loading, the first heartbeats) before reading the idle RSS.
    await new Promise((r) => setTimeout(r, 2000));
    const pid = agent.proc.pid!;
    out.rssIdleMb = rssMb(pid) ?? 0;
    out.rssPeakMb = out.rssIdleMb;
    const sampler = setInterval(() => {
      const mb = rssMb(pid);
      if (mb !== null) out.rssPeakMb = Math.max(out.rssPeakMb, mb);
    }, 50);
    const socketBefore = proxy.agentSocketBytes;
    const beatsBefore = proxy.heartbeatTimes.length;
    const t = performance.now();
    try {
      const r = await c.callTool(
        { name: 'execute', arguments: { command: 'head', args: ['-c', String(bytes), '/dev/urandom'], timeout_ms: 600_000 } },
        undefined,
        {
          timeout: 900_000,
        },
      );
      out.seconds = (performance.now() - t) / 1000;
      const s = r.structuredContent as { exit_code?: number; job_id?: string; error?: { message: string } };
      if (r.isError || s.exit_code !== 0) throw new Error(s.error?.message ?? JSON.stringify(r.content).slice(0, 200));
      const jobId = s.job_id!;
      // The call returns once the exit is stored; the upload (and its report) may still run.
      let st: Record<string, unknown> = {};
      for (let i = 0; i < 1200; i++) {
        st = (await c.callTool({ name: 'job_status', arguments: { job_id: jobId } })).structuredContent as Record<string, unknown>;
        if (st.artifact_state !== 'uploading') break;
        await new Promise((r2) => setTimeout(r2, 250));
      }
      out.complete = st.artifact_state === 'complete' && st.stdout_bytes === bytes;
      out.relayedBytes = proxy.messages('job.output', jobId).reduce((n, f) => n + (f.bytes as number), 0);
    } finally {
      clearInterval(sampler);
    }
    out.socketBytes = proxy.agentSocketBytes - socketBefore;
    // From the last heartbeat before the job to its end: a heartbeat still missing at the end counts too.
    const end = t + out.seconds * 1000;
    const beats = proxy.heartbeatTimes.slice(Math.max(0, beatsBefore - 1)).filter((x) => x <= end);
    if (beats.length >= 1) {
      let gap = end - beats[beats.length - 1];
      for (let i = 1; i < beats.length; i++) gap = Math.max(gap, beats[i] - beats[i - 1]);
      out.heartbeatLateMs = Math.max(0, gap - heartbeatMs);
    }
  } catch (e) {
    out.error = (e as Error).message;
    out.agentLogTail = agent.logs().slice(-2000);
  } finally {
    await c.close().catch(() => {});
    await agent.stop();
    await proxy.stop();
    rmSync(root, { recursive: true, force: true });
  }
  return out;
}

/** One table row per figure of `f`, as bench/run.ts prints them. */
export function relayRows(f: RelayFigures): string[][] {
  const mb = (n: number) => `${(n / 1e6).toFixed(n < 1e7 ? 2 : 0)} MB`;
  const who = AGENT_ENTRIES[f.entry].label;
  if (f.error) return [[`relay, ${mb(f.outputBytes)} random binary stdout, agent from ${who}`, `failed: ${f.error.slice(0, 100)}`, '', '']];
  return [
    [
      `relay, ${mb(f.outputBytes)} random binary stdout, agent from ${who}: agent RSS`,
      `${f.rssIdleMb.toFixed(0)} → peak ${f.rssPeakMb.toFixed(0)} MB`,
      `${f.seconds.toFixed(1)} s`,
      `target < 150 MB; artifact ${f.complete ? 'complete' : 'NOT complete'}`,
    ],
    [
      `  bytes on the agent's socket / bytes relayed live`,
      `${(f.socketBytes / Math.max(1, f.relayedBytes)).toFixed(4)}×`,
      `${mb(f.socketBytes)} / ${mb(f.relayedBytes)}`,
      `target ≤ 1.05× plus framing; of the whole output ${(f.socketBytes / f.outputBytes).toFixed(4)}× (the edge keeps the first 16 MiB live, the artifact all)`,
    ],
    [
      `  heartbeat lateness while the job ran (interval ${f.heartbeatMs} ms)`,
      f.heartbeatLateMs === null ? 'n/a' : `${f.heartbeatLateMs.toFixed(0)} ms`,
      '',
      'largest gap between two heartbeats at the proxy minus the interval; target: never late enough to drop the agent (3 intervals)',
    ],
  ];
}

if (import.meta.main) {
  const mb = Number(process.argv[2] ?? 1000);
  const heartbeatMs = 1000;
  buildPackedAgent();
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: String(heartbeatMs) } });
  try {
    const figures: RelayFigures[] = [];
    const only = process.argv[3] as AgentEntry | undefined;
    for (const entry of ['sources', 'packed'] as const) if (!only || only === entry) figures.push(await benchRelay(gw, entry, mb * 1_000_000, heartbeatMs));
    for (const f of figures) for (const r of relayRows(f)) console.log(r.join(' | '));
    for (const f of figures) if (f.agentLogTail) console.log(`\n${f.entry} agent's log, last lines:\n${f.agentLogTail}`);
    const [src, packed] = figures;
    if (src && packed && !src.error && !packed.error)
      console.log(
        `sources / packed: peak RSS ${(src.rssPeakMb / packed.rssPeakMb).toFixed(2)}×, idle RSS ${(src.rssIdleMb / packed.rssIdleMb).toFixed(2)}×, time ${(src.seconds / packed.seconds).toFixed(2)}×`,
      );
  } finally {
    await gw.stop();
  }
}
