/**
 * One team at scale: `jobs` jobs submitted as background `execute` calls by 16 MCP clients as
 * fast as the gateway takes them, queued in the team's Durable Object while no agent is connected;
 * then `agents` light simulated agents (real WebSockets through the gateway, the real agent
 * protocol: hello, heartbeats, job.start → job.exit after `jobMs`) connect and drain the queue.
 * Reports the submit rate and the submit call's latency, the dispatch rate from the moment the
 * agents are let in, the queue-to-start delay (the DO's own created → started times of every job,
 * counted from that moment for the jobs that were waiting; p50/p99), and the isolate's JS heap
 * (V8's own figure through the inspector `wrangler dev` serves, after a forced GC) before the
 * jobs, at the peak with the DO reporting every job queued, and after the drain (the agents still
 * connected). Locally the inspector lists one target per Worker and the Worker's Durable Objects
 * run in its isolate, so the heap is the Worker's (module code, MCP sessions) and every live DO's
 * of the gateway; the growth to the peak is the queued jobs. The DO's SQLite lives outside the JS
 * heap. Also the gateway's RSS growth (the whole workerd process: an upper bound).
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
import { inspectorSession, inspectorTargets, type InspectorSession } from './inspector.ts';

export interface ScaleFigures {
  agents: number;
  jobs: number;
  errors: number;
  submitPerS: number;
  dispatchPerS: number;
  queueToStartP50: number;
  queueToStartP99: number;
  submitCallP50: number;
  /** Jobs the DO listed as queued at the peak (all of them, unless some waited past queueWaitMs). */
  queuedAtPeak: number;
  heap: { target: string; before: HeapUsage; peak: HeapUsage; after: HeapUsage };
  gatewayRssGrowthMb: number | null;
}

/**
 * V8's heap of the isolate after a forced GC, in MB (10^6 bytes): live objects, the heap V8 holds,
 * and the ArrayBuffer backing stores outside it.
 */
export interface HeapUsage {
  usedMb: number;
  totalMb: number;
  backingStorageMb: number;
}

/**
 * Memory of one Workers isolate: 128 MB on Workers Free and Paid ("Memory",
 * https://developers.cloudflare.com/workers/platform/limits/#memory). A Durable Object runs in
 * such an isolate. MB as the page writes it; 10^6 bytes is the stricter reading.
 */
export const ISOLATE_MEMORY_LIMIT_MB = 128;

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
async function simAgent(gw: Gateway, id: string, jobMs: number, onStart: (jobId: string) => void, onExit: () => void): Promise<SimAgent> {
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
          onExit();
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

interface ListedJob {
  created_at: number;
  started_at: number | null;
}

/** The team's jobs as its DO lists them (admin API), all of them or those in one state. */
async function listJobs(gw: Gateway, state?: 'queued' | 'running'): Promise<ListedJob[]> {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  const out: ListedJob[] = [];
  let cursor: string | null = null;
  do {
    const q = `limit=200${state ? `&state=${state}` : ''}${cursor ? `&cursor=${cursor}` : ''}`;
    const r = await fetch(`${gw.url}/admin/v1/jobs?${q}`, { headers: { Authorization: `Bearer ${token}` } });
    if (!r.ok) throw new Error(`GET /admin/v1/jobs?${q}: HTTP ${r.status} ${(await r.text()).slice(0, 200)}`);
    const page = (await r.json()) as { jobs: ListedJob[]; next_cursor: string | null };
    out.push(...page.jobs);
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

/** The gateway Worker's isolate: wrangler's proxy lists one target per Worker, ours is the only one. */
async function gatewayIsolate(gw: Gateway): Promise<{ title: string; s: InspectorSession }> {
  const targets = await inspectorTargets(gw);
  if (targets.length !== 1) throw new Error(`expected the gateway's one inspector target, got: ${targets.map((t) => t.title).join(', ')}`);
  const s = await inspectorSession(targets[0].webSocketDebuggerUrl);
  await s.send('HeapProfiler.enable');
  return { title: targets[0].title, s };
}

async function heapUsage(gw: Gateway, s: InspectorSession): Promise<HeapUsage> {
  // V8 runs the collection as a task on the isolate, which workerd runs only when the isolate next
  // handles an event: a request to /healthz (a few bytes of garbage) until the answer comes.
  // Twice: a first collection can leave garbage that finalizers free only for the next one.
  for (let i = 0; i < 2; i++) {
    let collected = false;
    const gc = s.send('HeapProfiler.collectGarbage', {}, 60_000).then(() => {
      collected = true;
    });
    while (!collected) {
      await fetch(`${gw.url}/healthz`).then((r) => r.arrayBuffer());
      await Promise.race([gc, new Promise((r) => setTimeout(r, 100))]);
    }
  }
  const u = await s.send<{ usedSize: number; totalSize: number; backingStorageSize?: number }>('Runtime.getHeapUsage');
  return { usedMb: u.usedSize / 1e6, totalMb: u.totalSize / 1e6, backingStorageMb: (u.backingStorageSize ?? 0) / 1e6 };
}

/** The heap figures in a line, the peak against the limit (what V8 holds, the larger figure). */
export function heapSummary(f: ScaleFigures): string {
  const { before, peak, after } = f.heap;
  const mb = (x: number) => x.toFixed(1);
  return (
    `isolate JS heap used ${mb(before.usedMb)} → ${mb(peak.usedMb)} MB with ${f.queuedAtPeak} queued (+${mb(peak.usedMb - before.usedMb)} MB), ` +
    `${mb(peak.totalMb)} MB held = ${((100 * peak.totalMb) / ISOLATE_MEMORY_LIMIT_MB).toFixed(1)} % of the ${ISOLATE_MEMORY_LIMIT_MB} MB isolate limit; ` +
    `${mb(after.usedMb)} MB used after the drain (agents connected)`
  );
}

export async function benchScale(gw: Gateway, o: { agents: number; jobs: number; jobMs?: number; submitters?: number }): Promise<ScaleFigures> {
  // Every job waits in the queue until the agents are let in: submission and the peak's
  // measurement must end within queueWaitMs (60 s at most), or the first jobs expire (errors).
  await gw.putPolicy(TEAM, {
    ...DEFAULT_POLICY,
    limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 256, queueWaitMs: 60_000 },
    queue: { maxLength: 10_000 },
  });
  const port = Number(new URL(gw.url).port);
  const rss0 = rssMbOfListener(port);
  const isolate = await gatewayIsolate(gw);
  const submitters = await Promise.all(Array.from({ length: o.submitters ?? 16 }, () => gw.mcp(TEAM, ['execute'])));
  await listJobs(gw, 'queued'); // wakes the team's DO, so `before` holds it and the peak only adds the jobs
  const before = await heapUsage(gw, isolate.s);

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
  const queuedAtPeak = (await listJobs(gw, 'queued')).length;
  const peak = await heapUsage(gw, isolate.s);

  // The agents are let in: every job starts from here on.
  const released = performance.now();
  const releasedAt = Date.now();
  const startedAt = new Map<string, number>();
  let lastStart = 0;
  let exits = 0;
  const agents: SimAgent[] = [];
  for (let i = 0; i < o.agents; i += 10) {
    agents.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(10, o.agents - i) }, (_, k) =>
          simAgent(
            gw,
            `sim-${i + k}`,
            o.jobMs ?? 50,
            (jobId) => {
              lastStart = performance.now();
              startedAt.set(jobId, lastStart);
            },
            () => {
              exits += 1;
            },
          ),
        ),
      )),
    );
  }
  // Wait until every accepted job has started somewhere and ended (or a minute passes).
  const deadline = Date.now() + 60_000;
  while ((exits < startedAt.size || [...submittedAt.keys()].some((id) => !startedAt.has(id))) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100));
  const started = [...submittedAt.keys()].filter((id) => startedAt.has(id)).length;
  errors += submittedAt.size - started;
  // A job waiting since before the release is counted from the release: the wait before it is the bench's.
  const delays = (await listJobs(gw)).flatMap((j) => (j.started_at === null ? [] : [j.started_at - Math.max(j.created_at, releasedAt)]));
  // Drained: the DO has closed every job (the agents' last job.exit messages may still be on their way).
  while ((await listJobs(gw, 'queued')).length + (await listJobs(gw, 'running')).length > 0 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100));
  const after = await heapUsage(gw, isolate.s);
  const rss1 = rssMbOfListener(port);
  isolate.s.close();
  for (const a of agents) a.close();
  await Promise.all(submitters.map((c) => c.close()));
  return {
    agents: o.agents,
    jobs: o.jobs,
    errors,
    submitPerS: o.jobs / submitS,
    dispatchPerS: started / ((lastStart - released) / 1000),
    queueToStartP50: pct(delays, 50),
    queueToStartP99: pct(delays, 99),
    submitCallP50: pct(callMs, 50),
    queuedAtPeak,
    heap: { target: isolate.title, before, peak, after },
    gatewayRssGrowthMb: rss0 !== null && rss1 !== null ? rss1 - rss0 : null,
  };
}

if (import.meta.main) {
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
  try {
    const f = await benchScale(gw, { agents: Number(process.argv[2] ?? 100), jobs: Number(process.argv[3] ?? 2000) });
    console.log(JSON.stringify(f, null, 2));
    console.log(`${f.heap.target}: ${heapSummary(f)}`);
  } finally {
    await gw.stop();
  }
}
