/**
 * One team at scale: `agents` light simulated agents (real WebSockets through the gateway, the
 * real agent protocol: hello, heartbeats, job.start → job.exit after `jobMs`) and `jobs` jobs
 * submitted as background `execute` calls by 16 MCP clients as fast as the gateway takes them,
 * so a queue builds in the team's Durable Object. Reports the dispatch rate, the queue-to-start
 * delay (the DO's own created → started times of every job; p50/p99), the background submit
 * call's latency, and the gateway's RSS growth (workerd: an upper bound of the DO's memory,
 * which workerd does not report alone).
 *
 * `node bench/scale.ts [agents=100] [jobs=2000]` runs it alone against a fresh gateway.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { WebSocket } from 'undici';
import { AGENT_CONNECT_PATH, PROTOCOL_VERSION, type AgentMessage } from '../src/contracts/agent-protocol.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';
import type { Gateway } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';

export interface ScaleFigures {
  agents: number;
  jobs: number;
  errors: number;
  submitPerS: number;
  dispatchPerS: number;
  queueToStartP50: number;
  queueToStartP99: number;
  submitCallP50: number;
  gatewayRssGrowthMb: number | null;
}

const CAPACITY = 2;
const TEAM = 'b-scale';

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

function rssMbOfListener(port: number): number | null {
  try {
    const pid = /pid=(\d+)/.exec(execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' }))?.[1];
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Number(kb) / 1024 : null;
  } catch {
    return null;
  }
}

interface SimAgent {
  ws: WebSocket;
  close(): void;
}

/** A protocol-complete agent that "runs" every job in `jobMs` and reports exit 0. */
async function simAgent(gw: Gateway, id: string, jobMs: number, onStart: (jobId: string) => void): Promise<SimAgent> {
  const token = await gw.token({ team: TEAM, scopes: ['agent'], subject: `sim-${id}` });
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}${AGENT_CONNECT_PATH}`, { headers: { Authorization: `Bearer ${token}` } });
  const running = new Set<string>();
  const send = (m: AgentMessage) => ws.send(JSON.stringify(m));
  let beat: NodeJS.Timeout | undefined;
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () =>
      send({ type: 'hello', v: PROTOCOL_VERSION, agentId: id, version: 'bench', capacity: CAPACITY, sandbox: 'none', runtimes: [], labels: [], running: [] });
    ws.onerror = () => reject(new Error(`simulated agent ${id} could not connect`));
    ws.onmessage = (ev) => {
      const m = JSON.parse(String(ev.data)) as { type: string; heartbeatMs?: number; spec?: { jobId: string } };
      if (m.type === 'welcome') {
        beat = setInterval(() => send({ type: 'heartbeat', running: [...running] }), m.heartbeatMs ?? 5000);
        resolve();
      } else if (m.type === 'job.start' && m.spec) {
        const jobId = m.spec.jobId;
        onStart(jobId);
        running.add(jobId);
        setTimeout(() => {
          running.delete(jobId);
          const empty = { bytes: 0, lines: 0, artifactTruncated: false };
          send({
            type: 'job.exit',
            jobId,
            state: 'exited',
            exitCode: 0,
            signal: null,
            timedOut: false,
            durationMs: jobMs,
            stdout: '',
            stderr: '',
            stdoutTruncated: false,
            stderrTruncated: false,
            streams: { stdout: empty, stderr: empty },
            artifactsUploaded: true,
          });
        }, jobMs);
      }
    };
  });
  return {
    ws,
    close: () => {
      clearInterval(beat);
      ws.close();
    },
  };
}

/** created → started (ms) of every started job of the team, as the team's DO recorded them. */
async function queueDelays(gw: Gateway): Promise<number[]> {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  const out: number[] = [];
  let cursor: string | null = null;
  do {
    const r = await fetch(`${gw.url}/admin/v1/jobs?limit=200${cursor ? `&cursor=${cursor}` : ''}`, { headers: { Authorization: `Bearer ${token}` } });
    const page = (await r.json()) as { jobs: { created_at: number; started_at: number | null }[]; next_cursor: string | null };
    for (const j of page.jobs) if (j.started_at !== null) out.push(j.started_at - j.created_at);
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

export async function benchScale(gw: Gateway, o: { agents: number; jobs: number; jobMs?: number; submitters?: number }): Promise<ScaleFigures> {
  await gw.putPolicy(TEAM, {
    ...DEFAULT_POLICY,
    limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 256, queueWaitMs: 60_000 },
    queue: { maxLength: 10_000 },
  });
  const port = Number(new URL(gw.url).port);
  const rss0 = rssMbOfListener(port);
  const startedAt = new Map<string, number>();
  let lastStart = 0;
  const agents: SimAgent[] = [];
  for (let i = 0; i < o.agents; i += 10) {
    agents.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(10, o.agents - i) }, (_, k) =>
          simAgent(gw, `sim-${i + k}`, o.jobMs ?? 50, (jobId) => {
            lastStart = performance.now();
            startedAt.set(jobId, lastStart);
          }),
        ),
      )),
    );
  }
  const submitters = await Promise.all(Array.from({ length: o.submitters ?? 16 }, () => gw.mcp(TEAM, ['execute'])));
  const submittedAt = new Map<string, number>();
  const callMs: number[] = [];
  let errors = 0;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    submitters.map(async (c) => {
      while (next < o.jobs) {
        next += 1;
        const t = performance.now();
        try {
          const r = await c.callTool({ name: 'execute', arguments: { command: 'true', args: [], background: true } }, undefined, { timeout: 120_000 });
          const id = (r.structuredContent as { job_id?: string } | undefined)?.job_id;
          if (r.isError || !id) errors += 1;
          else submittedAt.set(id, t);
          callMs.push(performance.now() - t);
        } catch {
          errors += 1;
        }
      }
    }),
  );
  const submitS = (performance.now() - t0) / 1000;
  // Wait until every accepted job has started somewhere (or a minute passes).
  const deadline = Date.now() + 60_000;
  while ([...submittedAt.keys()].some((id) => !startedAt.has(id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const started = [...submittedAt.keys()].filter((id) => startedAt.has(id)).length;
  errors += submittedAt.size - started;
  const delays = await queueDelays(gw);
  const rss1 = rssMbOfListener(port);
  for (const a of agents) a.close();
  await Promise.all(submitters.map((c) => c.close()));
  return {
    agents: o.agents,
    jobs: o.jobs,
    errors,
    submitPerS: o.jobs / submitS,
    dispatchPerS: started / ((lastStart - t0) / 1000),
    queueToStartP50: pct(delays, 50),
    queueToStartP99: pct(delays, 99),
    submitCallP50: pct(callMs, 50),
    gatewayRssGrowthMb: rss0 !== null && rss1 !== null ? rss1 - rss0 : null,
  };
}

if (import.meta.main) {
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
  try {
    const f = await benchScale(gw, { agents: Number(process.argv[2] ?? 100), jobs: Number(process.argv[3] ?? 2000) });
    console.log(JSON.stringify(f, null, 2));
  } finally {
    await gw.stop();
  }
}
