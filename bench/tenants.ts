/**
 * Many teams on one gateway, and what each call costs: `teams` teams, each with 1–2 light
 * simulated agents (real WebSockets through the gateway, the real agent protocol: hello, the
 * AGENT_PING heartbeat the platform answers, job.start → job.exit, the stdout artifact PUT and its
 * job.artifact report — what the real agent sends for `echo hi`, less its live output frame), each
 * team's MCP client (official SDK) making `execute echo hi` calls; then everything idles.
 *
 * Measured per call, over the calls phase:
 *  - the Worker's D1 queries, rows read and written, R2 Class A/B operations: the call lines'
 *    storage fields, plus the storage lines of the agents' uploads (src/edge/call-log.ts);
 *  - Worker requests (wrangler's request log) and the gateway's CPU (every workerd process of
 *    `wrangler dev`: the Worker, the objects and the local D1/R2 emulation — an upper bound);
 *  - rows actually added to the shared D1 (each table counted in the emulator's sqlite before and
 *    after), R2 objects added, bytes stored (D1, the objects' SQLite, R2 bodies);
 *  - the team objects' own counters (src/dispatch/usage.ts, read through `GET /admin/v1/usage`
 *    once the object serves them): SQL statements and rows written per call, wake-ups per idle team-minute.
 * Then the cost model: $/team/month at CALLS_PER_DAY calls a day, for MODEL_TEAMS teams on Workers
 * Paid, every price a constant with its source, and the targets with pass/fail.
 *
 * `node bench/tenants.ts [teams=200] [--quick]` runs it alone; `npm run bench` runs it as a section.
 * Loopback only.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { WebSocket } from 'undici';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import * as protocol from '../src/contracts/agent-protocol.ts';
import { AGENT_CONNECT_PATH, PROTOCOL_VERSION, type AgentMessage } from '../src/contracts/agent-protocol.ts';
import { JOB_RETENTION_MS } from '../src/contracts/job-view.ts';
import { RetentionPolicy } from '../src/contracts/policy.ts';
import { DEFAULT_HEARTBEAT_MS } from '../src/platform/config.ts';
import type { Gateway } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';
import { cpuMsOfPid, gatewayPids } from './hotpath.ts';

// ---------------------------------------------------------------- the cost model's inputs

/** The load the model prices: calls a day per team, and teams sharing one account. */
export const CALLS_PER_DAY = 10_000;
export const MODEL_TEAMS = 1000;
const DAYS_PER_MONTH = 30;
/** Days the model keeps audit rows: the policy's default `retention.auditDays`. */
const AUDIT_DAYS = RetentionPolicy.parse({}).auditDays;

/** Workers Paid: https://developers.cloudflare.com/workers/platform/pricing/ ("Workers", Standard usage model). */
const WORKERS_PAID_MONTHLY_USD = 5;
const WORKERS_REQUESTS_INCLUDED = 10e6;
const WORKERS_USD_PER_M_REQUESTS = 0.3;
const WORKERS_CPU_MS_INCLUDED = 30e6;
const WORKERS_USD_PER_M_CPU_MS = 0.02;
/** Workers Logs (same page, "Workers Logs"): log events written, Workers Paid. */
const LOG_EVENTS_INCLUDED = 20e6;
const LOG_USD_PER_M_EVENTS = 0.6;
/** Production keeps one request in 10 (`head_sampling_rate` in wrangler.toml, env.production.observability.logs). */
const LOG_SAMPLING = 0.1;

/** Durable Objects: https://developers.cloudflare.com/durable-objects/platform/pricing/ ("Compute billing", "SQLite storage backend"). */
const DO_REQUESTS_INCLUDED = 1e6;
const DO_USD_PER_M_REQUESTS = 0.15;
/** Incoming WebSocket messages are billed 20 to one request (footnote 2 there). */
const DO_WS_MESSAGES_PER_REQUEST = 20;
const DO_GB_S_INCLUDED = 400_000;
const DO_USD_PER_M_GB_S = 12.5;
/** Duration is billed for the object's 128 MB whatever it uses (footnote 5 there). */
const DO_MEMORY_GB = 0.128;
const DO_ROWS_READ_INCLUDED = 25e9;
const DO_USD_PER_M_ROWS_READ = 0.001;
const DO_ROWS_WRITTEN_INCLUDED = 50e6;
const DO_USD_PER_M_ROWS_WRITTEN = 1;
const DO_STORED_GB_INCLUDED = 5;
const DO_USD_PER_GB_MONTH = 0.2;

/** D1: https://developers.cloudflare.com/d1/platform/pricing/ ("Billing metrics", Workers Paid). */
const D1_ROWS_READ_INCLUDED = 25e9;
const D1_USD_PER_M_ROWS_READ = 0.001;
const D1_ROWS_WRITTEN_INCLUDED = 50e6;
const D1_USD_PER_M_ROWS_WRITTEN = 1;
const D1_STORED_GB_INCLUDED = 5;
const D1_USD_PER_GB_MONTH = 0.75;

/** R2 Standard storage: https://developers.cloudflare.com/r2/pricing/ ("R2 pricing", "Free tier"). */
const R2_CLASS_A_INCLUDED = 1e6;
const R2_USD_PER_M_CLASS_A = 4.5;
const R2_CLASS_B_INCLUDED = 10e6;
const R2_USD_PER_M_CLASS_B = 0.36;
const R2_STORED_GB_INCLUDED = 10;
const R2_USD_PER_GB_MONTH = 0.015;

/** Workers Analytics Engine: https://developers.cloudflare.com/analytics/analytics-engine/pricing/ (Workers Paid). */
const AE_POINTS_INCLUDED = 10e6;
const AE_USD_PER_M_POINTS = 0.25;
/**
 * Data points per execute call, from the code (src/platform/metrics.ts LAYOUT: a `call` point and a `job`
 * point at its end; a `team` point only when the team's counters change, which calls spread evenly over
 * the day leave where they were): `wrangler dev` drops them, so not measured.
 */
const AE_POINTS_PER_CALL = 2;

/** How long a call's rows and bytes stay: the team object's jobs (JOB_RETENTION_MS), artifacts 24 h (the policy's default `artifacts.retentionHours`). */
const ARTIFACT_RETENTION_DAYS = 1;

// ---------------------------------------------------------------- targets

const TARGETS = {
  sharedD1RowsPerCall: 0.1,
  d1QueriesPerCall: 0,
  r2ObjectsPerSmallCall: 0.1,
  idleWakeupsPerTeamMinute: 0,
  usdPerTeamMonth: 2,
};

// ---------------------------------------------------------------- the run

export interface TenantOptions {
  teams: number;
  callsPerTeam: number;
  idleS: number;
  /** Teams making calls at the same time (each team's calls are one after the other). */
  concurrency: number;
}

/** What the team objects report through `usage()` (src/dispatch/usage.ts), summed over the teams read. */
interface UsageSum {
  teams: number;
  restarted: number;
  wakes: { rpc: number; fetch: number; message: number; alarm: number; total: number };
  sqlStatements: number;
  sqlRowsRead: number;
  sqlRowsWritten: number;
  /** Rows written by statement kind and table (absent from objects that do not report it). */
  sqlRowsWrittenBy: Record<string, number>;
  alarmsSet: number;
  databaseBytes: number;
  d1Queries: number;
  d1RowsRead: number;
  d1RowsWritten: number;
  r2ClassA: number;
  r2ClassB: number;
}

export interface TenantFigures {
  teams: number;
  agents: number;
  calls: number;
  errors: number;
  firstError: string;
  callsPerS: number;
  callP50Ms: number;
  /** p50 of one team's calls one at a time on an otherwise idle gateway. */
  pacedP50Ms: number;
  /** From the call lines and the agents' storage lines, per call. */
  lines: { calls: number; d1Queries: number; d1RowsRead: number; d1RowsWritten: number; r2ClassA: number; r2ClassB: number; lineCount: number };
  /** Worker requests per call, by route (wrangler's request log). */
  workerRequestsPerCall: number;
  requestsByRoute: Record<string, number>;
  /** The gateway's CPU per call (all its workerd processes). */
  gatewayCpuMsPerCall: number | null;
  /** Per call: rows added to the shared D1 by table, R2 objects added, bytes stored. */
  d1RowsAdded: Record<string, number>;
  /** Per call: rows the team objects keep by table — each one a row written again when retention deletes it. */
  doRowsAdded: Record<string, number>;
  r2ObjectsAdded: number;
  bytesAdded: { d1: number; objects: number; r2: number; audit: number };
  /** The objects' own counters over the calls and over the idle phase (null until the objects serve `usage()`). */
  doCalls: UsageSum | null;
  doIdle: UsageSum | null;
  idleS: number;
  idleCpuMs: number | null;
}

export async function benchTenants(o: TenantOptions): Promise<TenantFigures> {
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: String(DEFAULT_HEARTBEAT_MS) }, logLevel: 'info' });
  const agents: SimAgent[] = [];
  const clients: Client[] = [];
  try {
    const names = Array.from({ length: o.teams }, (_, i) => `t${String(i).padStart(4, '0')}`);
    // Setup: every team's agents (odd teams two) and its MCP client.
    await pool(names, 16, async (team, i) => {
      for (let k = 0; k < (i % 2 ? 2 : 1); k++) agents.push(await simAgent(gw, team, `${team}-a${k}`));
      clients[i] = await gw.mcp(team, ['execute']);
    });
    await pool(names, 16, async (_t, i) => void (await clients[i].callTool({ name: 'execute', arguments: { command: 'echo', args: ['warm'] } })));
    await settle(gw);

    const usage0 = await readUsage(gw, names);
    const before = storeCounts(gw);
    const logFrom = gw.logs().length;
    const port = Number(new URL(gw.url).port);
    const cpu0 = gatewayCpu(port);
    const ms: number[] = [];
    let errors = 0;
    let firstError = '';
    const t0 = performance.now();
    // Each team's object counters are read just before and just after its own calls: an object left idle
    // hibernates (its counters start again), so a read minutes later would miss what the calls cost.
    const callsFrom = new Map<string, Snapshot>();
    const callsTo = new Map<string, Snapshot>();
    await pool(names, o.concurrency, async (team, i) => {
      const from = await readUsageOf(gw, team);
      for (let k = 0; k < o.callsPerTeam; k++) {
        const t = performance.now();
        try {
          const r = await clients[i].callTool({ name: 'execute', arguments: { command: 'echo', args: ['hi'] } }, undefined, { timeout: 60_000 });
          if (r.isError) throw new Error(JSON.stringify(r.structuredContent ?? r.content).slice(0, 300));
          ms.push(performance.now() - t);
        } catch (e) {
          errors += 1;
          firstError ||= (e as Error).message;
        }
      }
      const to = await readUsageOf(gw, team);
      if (from && to) {
        callsFrom.set(team, from);
        callsTo.set(team, to);
      }
    });
    const callsS = (performance.now() - t0) / 1000;
    const calls = names.length * o.callsPerTeam;
    // The uploads and the objects' background work (D1 copies, alarms) end after the calls' answers.
    await settle(gw);
    const cpu1 = gatewayCpu(port);
    const after = storeCounts(gw);
    const phaseLog = gw.logs().slice(logFrom);
    const usage1 = await readUsage(gw, names);

    // Idle: agents connected and pinging, no calls. First the calls' own timed work runs out (a running
    // job's liveness check fires MISSED_HEARTBEATS heartbeats after its start), then the idle phase is measured.
    await new Promise((r) => setTimeout(r, 3 * DEFAULT_HEARTBEAT_MS + 2000));
    const usage1idle = await readUsage(gw, names);
    const idleCpu0 = gatewayCpu(port);
    await new Promise((r) => setTimeout(r, o.idleS * 1000));
    const idleCpu1 = gatewayCpu(port);
    const usage2 = await readUsage(gw, names);
    // One team's calls one at a time with nothing else running: the latency the object is active for.
    const paced: number[] = [];
    for (let k = 0; k < 15; k++) {
      const t = performance.now();
      await clients[0].callTool({ name: 'execute', arguments: { command: 'echo', args: ['hi'] } });
      paced.push(performance.now() - t);
    }

    const lines = sumLines(phaseLog);
    const requests = requestsByRoute(phaseLog);
    const per = (n: number) => n / calls;
    const d1RowsAdded: Record<string, number> = {};
    for (const [t, n] of Object.entries(after.d1Rows)) if (n !== (before.d1Rows[t] ?? 0)) d1RowsAdded[t] = per(n - (before.d1Rows[t] ?? 0));
    const doRowsAdded: Record<string, number> = {};
    for (const [t, n] of Object.entries(after.doRows)) if (n > (before.doRows[t] ?? 0)) doRowsAdded[t] = per(n - (before.doRows[t] ?? 0));
    return {
      teams: names.length,
      agents: agents.length,
      calls,
      errors,
      firstError,
      callsPerS: calls / callsS,
      callP50Ms: pct(ms, 50),
      pacedP50Ms: pct(paced, 50),
      lines: {
        calls: lines.calls,
        d1Queries: per(lines.d1Queries),
        d1RowsRead: per(lines.d1RowsRead),
        d1RowsWritten: per(lines.d1RowsWritten),
        r2ClassA: per(lines.r2ClassA),
        r2ClassB: per(lines.r2ClassB),
        lineCount: per(lines.lineCount),
      },
      workerRequestsPerCall: per(Object.values(requests).reduce((a, b) => a + b, 0)),
      requestsByRoute: Object.fromEntries(Object.entries(requests).map(([k, v]) => [k, per(v)])),
      gatewayCpuMsPerCall: cpu0 !== null && cpu1 !== null ? per(cpu1 - cpu0) : null,
      d1RowsAdded,
      doRowsAdded,
      r2ObjectsAdded: per(after.r2Objects - before.r2Objects),
      bytesAdded: {
        d1: per(after.d1Bytes - before.d1Bytes),
        objects: per(after.doBytes - before.doBytes),
        r2: per(after.r2Bytes - before.r2Bytes),
        audit: per(after.auditBytes - before.auditBytes),
      },
      // The second read's own RPCs taken out; an object that restarted between the two reads is left out (`restarted`).
      doCalls: usage0 && usage1 ? withoutReads(usageDelta(callsFrom, callsTo, { skipRestarted: true }), READ_RPCS) : null,
      // Reading the counters is itself a request to each object (its admission and `teamUsage`): not idle work.
      doIdle: withoutReads(usageDelta(usage1idle, usage2), READ_RPCS),
      idleS: o.idleS,
      idleCpuMs: idleCpu0 !== null && idleCpu1 !== null ? idleCpu1 - idleCpu0 : null,
    };
  } finally {
    await Promise.all(clients.map((c) => c?.close().catch(() => {})));
    for (const a of agents) a.close();
    await gw.stop();
  }
}

/** Runs `f` over `items`, at most `n` at a time. */
async function pool<T>(items: T[], n: number, f: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        await f(items[i], i);
      }
    }),
  );
}

/** Background work after the answers (uploads, the objects' copies and alarms): the log and the stores go quiet. */
async function settle(gw: Gateway): Promise<void> {
  let last = -1;
  for (let i = 0; i < 40; i++) {
    await new Promise((r) => setTimeout(r, 500));
    const now = gw.logs().length;
    if (now === last && i >= 3) return;
    last = now;
  }
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

function gatewayCpu(port: number): number | null {
  const pids = gatewayPids(port);
  if (!pids) return null;
  const w = pids.worker ? cpuMsOfPid(pids.worker) : 0;
  const p = cpuMsOfPid(pids.proxy);
  return w === null || p === null ? null : w + p;
}

// ---------------------------------------------------------------- a light agent

/**
 * The heartbeat: the fixed ping the platform answers for the object (protocol 3's AGENT_PING), or
 * protocol 2's `heartbeat` message where the contracts have no such ping.
 */
const AGENT_PING: string | undefined = (protocol as { AGENT_PING?: string }).AGENT_PING;

interface SimAgent {
  close(): void;
}

/** A protocol-complete agent that answers each job at once as `echo hi` would: exit 0, "hi\n" inline (the whole stream: no upload). */
async function simAgent(gw: Gateway, team: string, id: string): Promise<SimAgent> {
  const token = await gw.token({ team, scopes: ['agent'], subject: `sim-${id}` });
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}${AGENT_CONNECT_PATH}`, { headers: { Authorization: `Bearer ${token}` } });
  const send = (m: AgentMessage) => ws.send(JSON.stringify(m));
  let beat: NodeJS.Timeout | undefined;
  const body = 'hi\n';
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () =>
      send({ type: 'hello', v: PROTOCOL_VERSION, agentId: id, version: 'bench', capacity: 4, sandbox: 'none', runtimes: [], labels: [], running: [] });
    ws.onerror = () => reject(new Error(`simulated agent ${id} could not connect`));
    ws.onmessage = (ev) => {
      if (typeof ev.data !== 'string' || !ev.data.startsWith('{"type":"') || ev.data.startsWith('{"type":"pong"')) return;
      const m = JSON.parse(ev.data) as {
        type: string;
        heartbeatMs?: number;
        spec?: { jobId: string; artifactHandle: string };
      };
      if (m.type === 'welcome') {
        beat = setInterval(() => ws.send(AGENT_PING ?? JSON.stringify({ type: 'heartbeat', running: [] })), m.heartbeatMs ?? DEFAULT_HEARTBEAT_MS);
        resolve();
      } else if (m.type === 'job.start' && m.spec) {
        const spec = m.spec;
        const one = { bytes: body.length, lines: 1, artifactTruncated: false };
        send({
          type: 'job.exit',
          jobId: spec.jobId,
          state: 'exited',
          exitCode: 0,
          signal: null,
          timedOut: false,
          durationMs: 1,
          stdout: body,
          stderr: '',
          stdoutTruncated: false,
          stderrTruncated: false,
          streams: { stdout: one, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
          // Protocol v4: the exit holds the stream whole, so there is nothing to upload.
          artifactsUploaded: true,
        });
      }
    };
  });
  return {
    close: () => {
      clearInterval(beat);
      ws.close();
    },
  };
}

// ---------------------------------------------------------------- the gateway's log

/** The fields of `{ event: 'call' | 'storage', … }` objects as `wrangler dev` prints them (util.inspect: unquoted keys). */
function loggedObjects(text: string, event: string): Record<string, unknown>[] {
  return [...text.matchAll(new RegExp(`\\{\\s*event: '${event}',[^}]*\\}`, 'g'))].flatMap((m) => {
    try {
      return [
        JSON.parse(
          m[0].replace(/([{,]\s*)(\w+):/g, '$1"$2":').replace(/'((?:[^'\\]|\\.)*)'/g, (_all, s: string) => JSON.stringify(s.replace(/\\(.)/g, '$1'))),
        ) as Record<string, unknown>,
      ];
    } catch {
      return [];
    }
  });
}

function sumLines(text: string) {
  const calls = loggedObjects(text, 'call').filter((l) => l.tool === 'execute');
  const all = [...loggedObjects(text, 'call'), ...loggedObjects(text, 'storage')];
  const sum = (k: string) => all.reduce((n, l) => n + (Number(l[k]) || 0), 0);
  return {
    calls: calls.length,
    lineCount: all.length,
    d1Queries: sum('d1Queries'),
    d1RowsRead: sum('d1RowsRead'),
    d1RowsWritten: sum('d1RowsWritten'),
    r2ClassA: sum('r2ClassA'),
    r2ClassB: sum('r2ClassB'),
  };
}

/** Requests wrangler dev logged (`[wrangler:info] PUT /agent/v1/artifacts/… 200 OK (3ms)`), by route with ids folded. */
function requestsByRoute(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/\[wrangler:info\] (GET|POST|PUT|DELETE|PATCH) (\S+) (\d{3})/g)) {
    const route = `${m[1]} ${m[2].replace(/\?.*$/, '').replace(/\/artifacts\/[^/]+\//, '/artifacts/:handle/')}`;
    // The bench's own reads of the objects' counters are not the calls' requests.
    if (route === 'GET /admin/v1/usage') continue;
    out[route] = (out[route] ?? 0) + 1;
  }
  return out;
}

// ---------------------------------------------------------------- the emulator's stores on disk

function sqliteFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.sqlite'))
    .map((e) => join(e.parentPath, e.name));
}

function filesBytes(dir: string): number {
  if (!existsSync(dir)) return 0;
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .reduce((n, e) => n + statSync(join(e.parentPath, e.name)).size, 0);
}

/** Opens a store's sqlite read-only (workerd holds it open; WAL readers do not block it). */
function withDb<T>(file: string, f: (db: DatabaseSync) => T): T | null {
  let db: DatabaseSync | null = null;
  try {
    db = new DatabaseSync(file, { readOnly: true });
    return f(db);
  } catch {
    return null;
  } finally {
    db?.close();
  }
}

const dbBytes = (db: DatabaseSync) => {
  const c = db.prepare('PRAGMA page_count').get() as { page_count: number };
  const s = db.prepare('PRAGMA page_size').get() as { page_size: number };
  return c.page_count * s.page_size;
};

function userTables(db: DatabaseSync): string[] {
  return (
    db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name NOT LIKE 'd1_%'`).all() as {
      name: string;
    }[]
  ).map((r) => r.name);
}

/** An audit row's stored bytes, about: its values' lengths plus 8 bytes a number (src/dispatch/audit-log.ts's columns). */
const AUDIT_VALUE_BYTES = `8 * 4 + length(subject) + COALESCE(length(token_id), 0) + length(tool) + COALESCE(length(command), 0) + COALESCE(length(cwd), 0)
  + length(decision) + COALESCE(length(reason), 0) + COALESCE(length(job_id), 0) + COALESCE(length(exit_status), 0) + COALESCE(length(parent_job_id), 0)
  + COALESCE(length(approval_id), 0)`;

interface StoreCounts {
  d1Rows: Record<string, number>;
  d1Bytes: number;
  doBytes: number;
  /** Rows per table over every team object's SQLite. */
  doRows: Record<string, number>;
  /** Bytes of the audit rows' values in the team objects (kept for the audit's days, not the jobs'). */
  auditBytes: number;
  r2Objects: number;
  r2Bytes: number;
}

/** Rows per table of the shared D1, the team objects' SQLite bytes, R2's objects and their bytes. */
function storeCounts(gw: Gateway): StoreCounts {
  const v3 = join(gw.stateDir, 'state', 'v3');
  const d1Rows: Record<string, number> = {};
  let d1Bytes = 0;
  for (const f of sqliteFiles(join(v3, 'd1'))) {
    withDb(f, (db) => {
      d1Bytes += dbBytes(db);
      for (const t of userTables(db)) d1Rows[t] = (d1Rows[t] ?? 0) + (db.prepare(`SELECT count(*) AS n FROM "${t}"`).get() as { n: number }).n;
    });
  }
  let doBytes = 0;
  const doRows: Record<string, number> = {};
  let auditBytes = 0;
  for (const f of sqliteFiles(join(v3, 'do'))) {
    withDb(f, (db) => {
      doBytes += dbBytes(db);
      const tables = userTables(db);
      for (const t of tables) {
        // A day's table (src/dispatch/segments.ts) is dropped whole: its rows cost no delete, so it counts apart.
        const key = /_d\d+$/.test(t) ? `${t.replace(/_d\d+$/, '')} (by day)` : t;
        doRows[key] = (doRows[key] ?? 0) + (db.prepare(`SELECT count(*) AS n FROM "${t}"`).get() as { n: number }).n;
      }
      for (const t of tables.filter((x) => x === 'audit' || /^audit_d\d+$/.test(x))) {
        auditBytes += (db.prepare(`SELECT COALESCE(SUM(${AUDIT_VALUE_BYTES}), 0) AS n FROM "${t}"`).get() as { n: number }).n;
      }
    });
  }
  let r2Objects = 0;
  for (const f of sqliteFiles(join(v3, 'r2')))
    r2Objects += withDb(f, (db) => (db.prepare('SELECT count(*) AS n FROM _mf_objects').get() as { n: number }).n) ?? 0;
  const blobs = readdirSync(join(v3, 'r2'), { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('miniflare-'))
    .reduce((n, e) => n + filesBytes(join(v3, 'r2', e.name, 'blobs')), 0);
  return { d1Rows, d1Bytes, doBytes, doRows, auditBytes, r2Objects, r2Bytes: blobs };
}

// ---------------------------------------------------------------- the team objects' own counters

interface Snapshot {
  startedAt: number;
  wakes: { rpc: number; fetch: number; message: number; alarm: number; total: number };
  sqlStatements: number;
  sqlRowsRead: number;
  sqlRowsWritten: number;
  sqlRowsWrittenBy?: Record<string, number>;
  alarmsSet: number;
  databaseBytes: number | null;
  storage: { d1Queries: number; d1RowsRead: number; d1RowsWritten: number; r2ClassA: number; r2ClassB: number };
}

/** Each team object's `usage()` through the admin API; null when the gateway does not serve it (yet). */
async function readUsage(gw: Gateway, teams: string[]): Promise<Map<string, Snapshot> | null> {
  const out = new Map<string, Snapshot>();
  let missing = false;
  await pool(teams, 16, async (team) => {
    if (missing) return;
    const token = await gw.token({ team, scopes: ['admin'] });
    const r = await fetch(`${gw.url}/admin/v1/usage`, { headers: { Authorization: `Bearer ${token}` } });
    const body = r.ok ? ((await r.json()) as { object?: Snapshot }) : (await r.arrayBuffer(), null);
    const s = body?.object?.wakes ? body.object : null;
    if (!s) missing = true;
    else out.set(team, s);
  });
  return missing ? null : out;
}

/** One team object's `usage()`, or null when the gateway does not serve it. */
async function readUsageOf(gw: Gateway, team: string): Promise<Snapshot | null> {
  const token = await gw.token({ team, scopes: ['admin'] });
  const r = await fetch(`${gw.url}/admin/v1/usage`, { headers: { Authorization: `Bearer ${token}` } });
  const body = r.ok ? ((await r.json()) as { object?: Snapshot }) : (await r.arrayBuffer(), null);
  return body?.object?.wakes ? body.object : null;
}

/** The object calls one reading of the counters makes (`GET /admin/v1/usage`: admission, `teamUsage`; `usage()` counts none). */
const READ_RPCS = 2;

function withoutReads(d: UsageSum | null, rpcs: number): UsageSum | null {
  if (!d) return d;
  const n = Math.min(d.wakes.rpc, rpcs * d.teams);
  return { ...d, wakes: { ...d.wakes, rpc: d.wakes.rpc - n, total: d.wakes.total - n } };
}

function usageDelta(a: Map<string, Snapshot> | null, b: Map<string, Snapshot> | null, o: { skipRestarted?: boolean } = {}): UsageSum | null {
  if (!a || !b) return null;
  const sum: UsageSum = {
    teams: 0,
    restarted: 0,
    wakes: { rpc: 0, fetch: 0, message: 0, alarm: 0, total: 0 },
    sqlStatements: 0,
    sqlRowsRead: 0,
    sqlRowsWritten: 0,
    sqlRowsWrittenBy: {},
    alarmsSet: 0,
    databaseBytes: 0,
    d1Queries: 0,
    d1RowsRead: 0,
    d1RowsWritten: 0,
    r2ClassA: 0,
    r2ClassB: 0,
  };
  for (const [team, y] of b) {
    // An object that started again in between counts from zero: its whole count is the delta.
    const x0 = a.get(team);
    const restarted = !x0 || x0.startedAt !== y.startedAt;
    const x = restarted ? null : x0;
    if (restarted) sum.restarted += 1;
    if (restarted && o.skipRestarted) continue;
    sum.teams += 1;
    for (const k of ['rpc', 'fetch', 'message', 'alarm', 'total'] as const) sum.wakes[k] += y.wakes[k] - (x?.wakes[k] ?? 0);
    sum.sqlStatements += y.sqlStatements - (x?.sqlStatements ?? 0);
    sum.sqlRowsRead += y.sqlRowsRead - (x?.sqlRowsRead ?? 0);
    sum.sqlRowsWritten += y.sqlRowsWritten - (x?.sqlRowsWritten ?? 0);
    for (const [k, n] of Object.entries(y.sqlRowsWrittenBy ?? {}))
      sum.sqlRowsWrittenBy[k] = (sum.sqlRowsWrittenBy[k] ?? 0) + n - (x?.sqlRowsWrittenBy?.[k] ?? 0);
    sum.alarmsSet += y.alarmsSet - (x?.alarmsSet ?? 0);
    sum.databaseBytes += (y.databaseBytes ?? 0) - (x?.databaseBytes ?? 0);
    for (const k of ['d1Queries', 'd1RowsRead', 'd1RowsWritten', 'r2ClassA', 'r2ClassB'] as const) sum[k] += y.storage[k] - (x?.storage[k] ?? 0);
  }
  return sum;
}

// ---------------------------------------------------------------- the cost model

export interface CostLine {
  item: string;
  perCall: string;
  usdPerTeamMonth: number;
  basis: string;
}

/** $ for `total` units a month over what the account includes. */
const over = (total: number, included: number, usdPerUnit: number) => Math.max(0, total - included) * usdPerUnit;

/** The calls the objects' counters cover: those of the teams read before and after their calls in one instance. */
function objectCalls(f: TenantFigures): number {
  return f.doCalls ? Math.max(1, f.doCalls.teams * (f.calls / f.teams)) : f.calls;
}

export function costModel(f: TenantFigures): { lines: CostLine[]; total: number } {
  const callsPerMonth = CALLS_PER_DAY * DAYS_PER_MONTH * MODEL_TEAMS;
  const perTeam = (usd: number) => usd / MODEL_TEAMS;
  const doC = f.doCalls;
  // The objects' counters cover the calls of the teams whose object did not restart between its two reads.
  const doPer = (n: number) => n / objectCalls(f);
  const lines: CostLine[] = [];
  const add = (item: string, perCall: number | string, usd: number, basis: string) =>
    lines.push({ item, perCall: typeof perCall === 'number' ? fmt(perCall) : perCall, usdPerTeamMonth: perTeam(usd), basis });

  add('Workers Paid subscription', '', WORKERS_PAID_MONTHLY_USD, 'per account, shared by the teams');
  add(
    'Workers requests',
    f.workerRequestsPerCall,
    over(f.workerRequestsPerCall * callsPerMonth, WORKERS_REQUESTS_INCLUDED, WORKERS_USD_PER_M_REQUESTS / 1e6),
    'measured (request log)',
  );
  const cpu = f.gatewayCpuMsPerCall ?? 0;
  add(
    'Workers CPU (ms)',
    cpu,
    over(cpu * callsPerMonth, WORKERS_CPU_MS_INCLUDED, WORKERS_USD_PER_M_CPU_MS / 1e6),
    "measured: all of local workerd's CPU (Worker, objects, D1/R2 emulation) — an upper bound",
  );

  // Durable Object requests: measured wake-ups when the objects report them, else what the code makes per call.
  const doRpc = doC ? doPer(doC.wakes.rpc + doC.wakes.fetch + doC.wakes.alarm) : 3;
  const doMsgs = doC ? doPer(doC.wakes.message) : 2;
  const doReq = doRpc + doMsgs / DO_WS_MESSAGES_PER_REQUEST;
  const idleWakesPerTeamMonth = f.doIdle?.teams ? (f.doIdle.wakes.total / f.doIdle.teams / (f.idleS / 60)) * 60 * 24 * DAYS_PER_MONTH : 0;
  add(
    'DO requests',
    doReq,
    over(doReq * callsPerMonth + idleWakesPerTeamMonth * MODEL_TEAMS, DO_REQUESTS_INCLUDED, DO_USD_PER_M_REQUESTS / 1e6),
    doC
      ? `measured: ${fmt(doRpc)} RPC/alarm + ${fmt(doMsgs)} socket messages ÷ ${DO_WS_MESSAGES_PER_REQUEST}; idle wake-ups at the measured rate`
      : 'assumed from the code (no usage()): 3 RPCs (submitAndFollow, upload begin/end) + 2 messages ÷ 20; idle wake-ups not counted',
  );
  // Duration: the object is active while a call's RPC stream is open (the call's latency); hibernated otherwise.
  const activeS = f.pacedP50Ms / 1000;
  add(
    'DO duration (GB-s)',
    activeS * DO_MEMORY_GB,
    over(activeS * DO_MEMORY_GB * callsPerMonth, DO_GB_S_INCLUDED, DO_USD_PER_M_GB_S / 1e6),
    `a call's local latency one at a time (p50 ${f.pacedP50Ms.toFixed(0)} ms, an upper bound) × 128 MB: the object is active while the call is`,
  );
  // A row kept is written once more when retention deletes it (a DELETE is billed per row; index entries go free).
  const kept = Object.entries(f.doRowsAdded)
    .filter(([t]) => !t.endsWith('(by day)'))
    .reduce((a, [, n]) => a + n, 0);
  const doRowsW = doC ? doPer(doC.sqlRowsWritten + doC.alarmsSet) + kept : null;
  const doRowsR = doC ? doPer(doC.sqlRowsRead) : null;
  add(
    'DO rows written',
    doRowsW ?? 'n/a',
    over((doRowsW ?? 0) * callsPerMonth, DO_ROWS_WRITTEN_INCLUDED, DO_USD_PER_M_ROWS_WRITTEN / 1e6),
    doC
      ? `measured: SQL rows written + alarms set ${fmt(doPer(doC.sqlRowsWritten + doC.alarmsSet))}, + rows kept ${fmt(kept)} (${Object.entries(f.doRowsAdded)
          .map(([t, n]) => `${t} ${fmt(n)}`)
          .join(', ')}), each deleted by retention later (a day's table is dropped whole: no row written)`
      : 'not measured: needs usage()',
  );
  add(
    'DO rows read',
    doRowsR ?? 'n/a',
    over((doRowsR ?? 0) * callsPerMonth, DO_ROWS_READ_INCLUDED, DO_USD_PER_M_ROWS_READ / 1e6),
    doC ? 'measured' : 'not measured: needs usage()',
  );
  const retainedCalls = (CALLS_PER_DAY * JOB_RETENTION_MS) / 86_400_000;
  const auditCalls = CALLS_PER_DAY * AUDIT_DAYS;
  const doGb = ((f.bytesAdded.objects - f.bytesAdded.audit) * retainedCalls + f.bytesAdded.audit * auditCalls) * (MODEL_TEAMS / 1e9);
  add(
    'DO storage (GB-month)',
    `${fmt(f.bytesAdded.objects)} B`,
    over(doGb, DO_STORED_GB_INCLUDED, DO_USD_PER_GB_MONTH),
    `measured bytes per call × ${retainedCalls} calls kept (7 days of jobs), of which the audit row's ${fmt(f.bytesAdded.audit)} B × ${auditCalls} (${AUDIT_DAYS} days)`,
  );

  const d1Q = f.lines.d1Queries + (doC ? doPer(doC.d1Queries) : 0);
  const d1R = f.lines.d1RowsRead + (doC ? doPer(doC.d1RowsRead) : 0);
  const added = Object.values(f.d1RowsAdded).reduce((a, b) => a + b, 0);
  const d1W = Math.max(f.lines.d1RowsWritten + (doC ? doPer(doC.d1RowsWritten) : 0), added);
  add('D1 rows read', d1R, over(d1R * callsPerMonth, D1_ROWS_READ_INCLUDED, D1_USD_PER_M_ROWS_READ / 1e6), `measured over ${fmt(d1Q)} queries per call`);
  add(
    'D1 rows written',
    d1W,
    over(d1W * callsPerMonth, D1_ROWS_WRITTEN_INCLUDED, D1_USD_PER_M_ROWS_WRITTEN / 1e6),
    'measured: the larger of rows written (meta) and rows added',
  );
  const d1Gb = (f.bytesAdded.d1 * retainedCalls * MODEL_TEAMS) / 1e9;
  add(
    'D1 storage (GB-month)',
    `${fmt(f.bytesAdded.d1)} B`,
    over(d1Gb, D1_STORED_GB_INCLUDED, D1_USD_PER_GB_MONTH),
    `measured bytes per call × ${retainedCalls} calls kept`,
  );

  add(
    'R2 Class A',
    f.lines.r2ClassA,
    over(f.lines.r2ClassA * callsPerMonth, R2_CLASS_A_INCLUDED, R2_USD_PER_M_CLASS_A / 1e6),
    'measured (call and upload lines)',
  );
  add('R2 Class B', f.lines.r2ClassB, over(f.lines.r2ClassB * callsPerMonth, R2_CLASS_B_INCLUDED, R2_USD_PER_M_CLASS_B / 1e6), 'measured');
  const r2Gb = (f.bytesAdded.r2 * CALLS_PER_DAY * ARTIFACT_RETENTION_DAYS * MODEL_TEAMS) / 1e9;
  add(
    'R2 storage (GB-month)',
    `${fmt(f.bytesAdded.r2)} B`,
    over(r2Gb, R2_STORED_GB_INCLUDED, R2_USD_PER_GB_MONTH),
    'measured bytes per call × 1 day of calls (artifact retention)',
  );

  const logEvents = (f.workerRequestsPerCall + f.lines.lineCount) * LOG_SAMPLING;
  add(
    'Workers Logs events',
    logEvents,
    over(logEvents * callsPerMonth, LOG_EVENTS_INCLUDED, LOG_USD_PER_M_EVENTS / 1e6),
    'one invocation event per request + call/storage lines, 1 request in 10 kept',
  );
  add(
    'Analytics Engine points',
    AE_POINTS_PER_CALL,
    over(AE_POINTS_PER_CALL * callsPerMonth, AE_POINTS_INCLUDED, AE_USD_PER_M_POINTS / 1e6),
    'from the code (call, job; a team point only when its counters change)',
  );
  return { lines, total: lines.reduce((n, l) => n + l.usdPerTeamMonth, 0) };
}

function fmt(n: number): string {
  if (!Number.isFinite(n)) return '?';
  if (n === 0) return '0';
  return Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 1 ? n.toFixed(2) : n.toPrecision(2);
}

/** The figures and the targets as table rows (measure | figure | target | pass). */
export function tenantRows(f: TenantFigures): string[][] {
  const cost = costModel(f);
  const doC = f.doCalls;
  const doI = f.doIdle;
  const rowsAdded = Object.values(f.d1RowsAdded).reduce((a, b) => a + b, 0);
  const d1Written = Math.max(f.lines.d1RowsWritten + (doC ? doC.d1RowsWritten / objectCalls(f) : 0), rowsAdded);
  const d1Queries = f.lines.d1Queries + (doC ? doC.d1Queries / objectCalls(f) : 0);
  const idle = doI?.teams ? doI.wakes.total / doI.teams / (f.idleS / 60) : null;
  const pass = (ok: boolean | null) => (ok === null ? '? (not measured)' : ok ? 'pass' : 'FAIL');
  const rows: string[][] = [
    [
      `${f.teams} teams, ${f.agents} simulated agents, ${f.calls} execute calls (echo hi)`,
      `${f.callsPerS.toFixed(1)} calls/s, p50 ${f.callP50Ms.toFixed(0)} ms (one at a time: ${f.pacedP50Ms.toFixed(0)} ms)`,
      '',
      f.errors ? `${f.errors} errors: ${f.firstError.slice(0, 120)}` : '0 errors',
    ],
    [
      '  Worker (call and upload lines): D1 queries / rows read / rows written per call',
      `${fmt(f.lines.d1Queries)} / ${fmt(f.lines.d1RowsRead)} / ${fmt(f.lines.d1RowsWritten)}`,
      '',
      `${f.lines.calls} call lines for ${f.calls} calls`,
    ],
    ['  Worker: R2 Class A / Class B per call', `${fmt(f.lines.r2ClassA)} / ${fmt(f.lines.r2ClassB)}`, '', ''],
    [
      '  Worker requests per call',
      fmt(f.workerRequestsPerCall),
      '',
      Object.entries(f.requestsByRoute)
        .map(([r, n]) => `${r} ${fmt(n)}`)
        .join('; '),
    ],
    [
      '  gateway CPU per call (all local workerd: Worker, objects, D1/R2 emulation)',
      f.gatewayCpuMsPerCall === null ? '?' : `${fmt(f.gatewayCpuMsPerCall)} ms`,
      '',
      '',
    ],
    [
      '  shared D1: rows added per call (emulator sqlite, by table)',
      fmt(rowsAdded),
      '',
      Object.entries(f.d1RowsAdded)
        .map(([t, n]) => `${t} ${fmt(n)}`)
        .join(', ') || 'none',
    ],
    ['  R2 objects added per call', fmt(f.r2ObjectsAdded), '', ''],
    [
      '  bytes stored per call: shared D1 / team objects / R2',
      `${fmt(f.bytesAdded.d1)} / ${fmt(f.bytesAdded.objects)} / ${fmt(f.bytesAdded.r2)}`,
      '',
      'sqlite page growth and R2 blob bytes',
    ],
    doC
      ? [
          '  team objects: SQL statements / rows written / wake-ups per call',
          `${fmt(doC.sqlStatements / objectCalls(f))} / ${fmt((doC.sqlRowsWritten + doC.alarmsSet) / objectCalls(f))} / ${fmt(doC.wakes.total / objectCalls(f))}`,
          '',
          `rpc ${fmt(doC.wakes.rpc / objectCalls(f))}, message ${fmt(doC.wakes.message / objectCalls(f))}, alarm ${fmt(doC.wakes.alarm / objectCalls(f))}; D1 from the objects ${fmt(doC.d1Queries / objectCalls(f))} queries; counted over ${doC.teams} objects (${doC.restarted} restarted between their two reads, left out)`,
        ]
      : ['  team objects: SQL statements / rows written per call', 'n/a', '', 'the objects do not serve usage() yet (GET /admin/v1/usage)'],
    ...(doC
      ? [
          [
            '  team objects: rows written per call, by statement',
            fmt(doC.sqlRowsWritten / objectCalls(f)),
            '',
            Object.entries(doC.sqlRowsWrittenBy)
              .filter(([, n]) => n > 0)
              .sort((a, b) => b[1] - a[1])
              .map(([k, n]) => `${k} ${fmt(n / objectCalls(f))}`)
              .join(', ') || 'none',
          ],
        ]
      : []),
    [
      `  idle ${f.idleS} s: wake-ups per idle team-minute`,
      idle === null ? 'n/a' : fmt(idle),
      '',
      `${doI ? `rpc ${fmt(doI.wakes.rpc / doI.teams)}, message ${fmt(doI.wakes.message / doI.teams)}, alarm ${fmt(doI.wakes.alarm / doI.teams)} per team (the counters' reads taken out); ${doI.restarted} objects restarted; ` : ''}gateway CPU while idle ${f.idleCpuMs === null ? '?' : `${fmt(f.idleCpuMs / f.teams / (f.idleS / 60))} ms per team-minute`}`,
    ],
    ['target: shared-D1 rows per call', fmt(d1Written), `≤ ${TARGETS.sharedD1RowsPerCall}`, pass(d1Written <= TARGETS.sharedD1RowsPerCall)],
    ['target: D1 queries per call', fmt(d1Queries), `${TARGETS.d1QueriesPerCall}`, pass(d1Queries <= TARGETS.d1QueriesPerCall)],
    ['target: R2 objects per small call', fmt(f.r2ObjectsAdded), `≤ ${TARGETS.r2ObjectsPerSmallCall}`, pass(f.r2ObjectsAdded <= TARGETS.r2ObjectsPerSmallCall)],
    [
      'target: idle wake-ups per team-minute',
      idle === null ? 'n/a' : fmt(idle),
      `${TARGETS.idleWakeupsPerTeamMinute}`,
      pass(idle === null ? null : idle <= TARGETS.idleWakeupsPerTeamMinute),
    ],
    [
      `target: modelled cost, ${MODEL_TEAMS} teams × ${CALLS_PER_DAY.toLocaleString('en')} calls/day`,
      `$${cost.total.toFixed(2)} per team per month`,
      `≤ $${TARGETS.usdPerTeamMonth}`,
      pass(cost.total <= TARGETS.usdPerTeamMonth),
    ],
  ];
  return rows;
}

export function costRows(f: TenantFigures): string[][] {
  return costModel(f).lines.map((l) => [`  cost: ${l.item}`, l.perCall, `$${l.usdPerTeamMonth.toFixed(3)}`, l.basis]);
}

export function tenantOptions(quick: boolean, teams?: number): TenantOptions {
  return quick ? { teams: teams ?? 40, callsPerTeam: 3, idleS: 20, concurrency: 8 } : { teams: teams ?? 200, callsPerTeam: 2, idleS: 60, concurrency: 16 };
}

if (import.meta.main) {
  const quick = process.argv.includes('--quick');
  const n = process.argv.slice(2).find((a) => /^\d+$/.test(a));
  const t = performance.now();
  const f = await benchTenants(tenantOptions(quick, n ? Number(n) : undefined));
  const rows = [['measure', 'figure', 'target / $ per team-month', 'notes'], ...tenantRows(f), ...costRows(f)];
  for (const r of rows) console.log(r.join(' | '));
  console.log(`\n(${((performance.now() - t) / 1000).toFixed(0)} s)\n\nMarkdown:\n`);
  console.log(rows.map((r, i) => `| ${r.join(' | ')} |${i === 0 ? `\n|${r.map(() => '---').join('|')}|` : ''}`).join('\n'));
}
