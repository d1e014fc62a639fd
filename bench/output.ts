/**
 * Big outputs, end to end (sandbox none, so the figures are the agent's and the edge's, not a
 * sandbox's):
 *  - one job writing `bytes` of stdout: the agent's peak RSS while it captures, spools and
 *    uploads it (sampled from /proc every 50 ms, and the kernel's own high-water mark), and
 *    whether the artifact is complete (its stored size equals what the job wrote, and its last
 *    bytes read back are the job's last bytes);
 *  - `query_output` for a rare term in a large artifact (100 MB and 1 GB of a build-like log) while
 *    `clients` other MCP clients run `execute true` in a loop: the search's latency under load,
 *    beside the same search on an idle gateway;
 *  - `query_output` for a rare number in the output of `seq 1 12000000` (96.9 MB), idle.
 *
 * `node bench/output.ts [megabytes=1000] [--no-query] [--no-seq] [--no-big] [--2gb]` runs them alone against a fresh gateway and agent.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, type Gateway } from '../test/e2e/harness.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';
import { startBenchGateway } from './gateway.ts';
import { buildLogPieces, RARE_LINES, RARE_NUMBER, RARE_TERM, SEQ_N } from './search.ts';
import { compared } from './search-targets.ts';

function statusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number | null {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

export interface BigOutputFigures {
  bytesWritten: number;
  artifactBytes: number | null;
  /** The artifact's size matches and its last bytes are the job's last bytes. */
  complete: boolean;
  rssBeforeMb: number;
  rssPeakMb: number;
  /** The kernel's high-water mark (VmHWM) after the job: over the agent's whole life. */
  hwmMb: number | null;
  seconds: number;
  error?: string;
}

/** The team needs `head` allowed and maxArtifactBytes ≥ `bytes`; the agent `--max-artifact-bytes` ≥ `bytes`. */
export async function benchBigOutput(gw: Gateway, team: string, c: Client, agentPid: number, bytes: number): Promise<BigOutputFigures> {
  const rssBefore = (statusKb(agentPid, 'VmRSS') ?? 0) / 1024;
  let peak = rssBefore;
  const sampler = setInterval(() => {
    const kb = statusKb(agentPid, 'VmRSS');
    if (kb !== null) peak = Math.max(peak, kb / 1024);
  }, 50);
  const t = performance.now();
  const out: BigOutputFigures = { bytesWritten: bytes, artifactBytes: null, complete: false, rssBeforeMb: rssBefore, rssPeakMb: peak, hwmMb: null, seconds: 0 };
  try {
    // /dev/zero: a known size and known last bytes, so completeness is checkable byte for byte at the end.
    const r = await c.callTool({ name: 'execute', arguments: { command: 'head', args: ['-c', String(bytes), '/dev/zero'], timeout_ms: 600_000 } }, undefined, {
      timeout: 900_000,
    });
    out.seconds = (performance.now() - t) / 1000;
    const s = r.structuredContent as { artifact_handle?: string; exit_code?: number; error?: { message: string } };
    if (r.isError || s.exit_code !== 0 || !s.artifact_handle) throw new Error(s.error?.message ?? JSON.stringify(r.content).slice(0, 200));
    const admin = { Authorization: `Bearer ${await gw.token({ team, scopes: ['admin'] })}` };
    const info = (await (await fetch(`${gw.url}/admin/v1/artifacts/${s.artifact_handle}`, { headers: admin })).json()) as {
      streams?: { stream: string; bytes: number }[];
    };
    out.artifactBytes = info.streams?.find((x) => x.stream === 'stdout')?.bytes ?? null;
    const tail = (await (await fetch(`${gw.url}/admin/v1/artifacts/${s.artifact_handle}/stdout?tail=4096`, { headers: admin })).json()) as {
      totalBytes?: number;
      length?: number;
      text?: string;
    };
    out.complete = out.artifactBytes === bytes && tail.totalBytes === bytes && tail.length === 4096 && tail.text === '\0'.repeat(4096);
  } catch (e) {
    out.error = (e as Error).message;
  } finally {
    clearInterval(sampler);
  }
  out.rssPeakMb = peak;
  const hwm = statusKb(agentPid, 'VmHWM');
  out.hwmMb = hwm === null ? null : hwm / 1024;
  return out;
}

/** `npm run bench`'s row of one big output: the agent's RSS against the 150 MB target, and whether the artifact is complete. */
export function bigOutputRow(b: BigOutputFigures): string[] {
  return [
    `one job writing ${(b.bytesWritten / 1e9).toFixed(0)} GB to stdout: agent RSS`,
    `${b.rssBeforeMb.toFixed(0)} → peak ${b.rssPeakMb.toFixed(0)} MB`,
    `${b.seconds.toFixed(1)} s`,
    `target < 150 MB; +${(b.rssPeakMb - b.rssBeforeMb).toFixed(0)} MB over the agent's idle RSS (the installed agent, dist/agent.mjs); artifact ${b.artifactBytes ?? '?'} bytes, ${b.complete ? 'complete' : 'NOT complete'}${b.error ? `; error: ${b.error.slice(0, 100)}` : ''}`,
  ];
}

/** `clients` MCP clients of `team` calling `execute true` back to back until stopped. */
export async function backgroundLoad(gw: Gateway, team: string, clients: number): Promise<{ stop(): Promise<{ jobs: number; errors: number; perS: number }> }> {
  const cs = await Promise.all(Array.from({ length: clients }, () => gw.mcp(team, ['execute'])));
  let running = true;
  let jobs = 0;
  let errors = 0;
  const t = performance.now();
  const loops = cs.map(async (c) => {
    while (running) {
      try {
        const r = await c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } }, undefined, { timeout: 120_000 });
        if (r.isError) errors += 1;
        else jobs += 1;
      } catch {
        errors += 1;
      }
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      const s = (performance.now() - t) / 1000;
      await Promise.all(cs.map((c) => c.close()));
      return { jobs, errors, perS: jobs / s };
    },
  };
}

export interface QueryUnderLoad {
  /** One per artifact, in the order of `sizes`. */
  artifacts: { mb: number; idle: number[]; loaded: number[] }[];
  terms: string[];
  load: { jobs: number; errors: number; perS: number };
}

/** The rare term of the build log (bench/search.ts): on RARE_LINES lines of it, wherever its size. */
const RARE_TERMS = [RARE_TERM];
/** What the standalone run's team and agent keep per stream: the largest log (--2gb) fits. */
const STANDALONE_ARTIFACT_BYTES = 2.5e9;

/** Makes an artifact of ~`bytes` of a build-like log with a real job: `cat` of the log written into the agent's workspace `root`. */
async function logArtifact(c: Client, root: string, bytes: number): Promise<{ handle: string; written: number }> {
  const name = `search-bench-${bytes}.log`;
  const fd = openSync(join(root, name), 'w');
  let written = 0;
  try {
    for (const piece of buildLogPieces(bytes / 1024 / 1024)) written += writeSync(fd, piece);
  } finally {
    closeSync(fd);
  }
  try {
    const r = await c.callTool({ name: 'execute', arguments: { command: 'cat', args: [name], timeout_ms: 600_000 } }, undefined, { timeout: 900_000 });
    const handle = (r.structuredContent as { artifact_handle?: string }).artifact_handle;
    if (r.isError || !handle) throw new Error(`the job making the artifact failed: ${JSON.stringify(r.content).slice(0, 200)}`);
    return { handle, written };
  } finally {
    rmSync(join(root, name), { force: true });
  }
}

/**
 * Times query_output for a rare term in artifacts of each of `sizes` bytes (the smallest is the
 * baseline: a call that reads little), idle and while `clients` clients run jobs, the artifacts
 * taking turns so each figure sees the same load. The team needs maxArtifactBytes ≥ the largest
 * size; the agent `--max-artifact-bytes` too.
 */
export async function benchQueryUnderLoad(
  gw: Gateway,
  team: string,
  c: Client,
  root: string,
  sizes: number[],
  clients: number,
  n: number,
): Promise<QueryUnderLoad> {
  const made: { handle: string; written: number }[] = [];
  for (const bytes of sizes) made.push(await logArtifact(c, root, bytes));
  const artifacts = sizes.map(() => ({ mb: 0, idle: [] as number[], loaded: [] as number[] }));
  const query = async (i: number) => {
    const t = performance.now();
    const q = await c.callTool({ name: 'query_output', arguments: { artifactHandle: made[i].handle, queryTerms: RARE_TERMS, contextLines: 2 } }, undefined, {
      timeout: 300_000,
    });
    if (q.isError) throw new Error(`query_output failed: ${JSON.stringify(q.content).slice(0, 200)}`);
    const found = q.structuredContent as { totalBytes: number; matchCount: number };
    // The timed search must find every line and build its excerpts, not only skip blocks.
    if (found.matchCount !== RARE_LINES)
      throw new Error(`query_output found ${found.matchCount} lines with ${JSON.stringify(RARE_TERMS)}, the log has ${RARE_LINES}`);
    // The whole log is stored: the artifact is as long as what the job wrote.
    if (found.totalBytes !== made[i].written) throw new Error(`the artifact holds ${found.totalBytes} bytes, the job wrote ${made[i].written}`);
    artifacts[i].mb = found.totalBytes / 1e6;
    return performance.now() - t;
  };
  for (let r = 0; r < n; r++) for (let i = 0; i < sizes.length; i++) artifacts[i].idle.push(await query(i));
  const load = await backgroundLoad(gw, team, clients);
  const timing = (async () => {
    for (let r = 0; r < n; r++) for (let i = 0; i < sizes.length; i++) artifacts[i].loaded.push(await query(i));
  })();
  // The load always stops, even when a query failed.
  const [outcome, figures] = await Promise.all([
    timing.then(
      () => null,
      (e: Error) => e,
    ),
    timing.catch(() => {}).then(() => load.stop()),
  ]);
  if (outcome) throw outcome;
  return { artifacts, terms: RARE_TERMS, load: figures };
}

/** A 10 kB log (the baseline: a call that reads little), 100 MB and 1 GB. */
export const QUERY_SIZES = [10_000, 100_000_000, 1_000_000_000];

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const ms = (x: number) => `${x.toFixed(1)} ms`;

/**
 * `query_output` for the one number `seq 1 SEQ_N` holds once (bench/search.ts), in the artifact of a real `seq` job,
 * `n` times on an idle gateway. The team must allow `seq`.
 */
export async function benchSeqQuery(c: Client, n: number): Promise<{ mb: number; idle: number[] }> {
  const r = await c.callTool({ name: 'execute', arguments: { command: 'seq', args: ['1', String(SEQ_N)], timeout_ms: 600_000 } }, undefined, {
    timeout: 900_000,
  });
  const handle = (r.structuredContent as { artifact_handle?: string }).artifact_handle;
  if (r.isError || !handle) throw new Error(`seq 1 ${SEQ_N} failed: ${JSON.stringify(r.content).slice(0, 200)}`);
  const idle: number[] = [];
  let mb = 0;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const q = await c.callTool({ name: 'query_output', arguments: { artifactHandle: handle, queryTerms: [RARE_NUMBER], contextLines: 2 } }, undefined, {
      timeout: 300_000,
    });
    idle.push(performance.now() - t);
    const found = q.structuredContent as { totalBytes: number; matchCount: number };
    if (q.isError || found.matchCount !== 1) throw new Error(`query_output for ${RARE_NUMBER} in seq output: ${JSON.stringify(q.content).slice(0, 200)}`);
    mb = found.totalBytes / 1e6;
  }
  return { mb, idle };
}

/**
 * `npm run bench`'s rows of `query_output` end to end, each with the previous figure (bench/RESULTS.md) and the ratio: a
 * rare term in artifacts made by real jobs (10 kB, 100 MB, 1 GB), idle and while 16 clients run jobs, the 10 kB
 * artifact the baseline; a rare number in `seq` output, idle. A failure (e.g. a timeout on a loaded machine) is a row
 * saying so.
 */
export async function queryOutputRows(gw: Gateway, team: string, c: Client, root: string, quick: boolean): Promise<string[][]> {
  const rows: string[][] = [];
  try {
    const q = await benchQueryUnderLoad(gw, team, c, root, QUERY_SIZES, 16, quick ? 2 : 5);
    const [small, ...big] = q.artifacts;
    const target = (size: number) => (size > 500 ? 'target ≤ 300 ms' : 'target ≤ 100 ms');
    const base = pct(small.idle, 50);
    rows.push(compared(`query_output, a rare term, ${small.mb.toFixed(2)} MB artifact, idle (baseline)`, base, ms, `max ${ms(Math.max(...small.idle))}`));
    for (const a of big) {
      const p = pct(a.idle, 50);
      const ok = p <= (a.mb > 500 ? 300 : 100);
      rows.push(
        compared(
          `query_output, a rare term, ${a.mb.toFixed(0)} MB artifact, idle`,
          p,
          ms,
          `${target(a.mb)}: ${ok ? 'met' : 'NOT met'}; +${ms(p - base)} over the baseline; max ${ms(Math.max(...a.idle))}`,
        ),
      );
    }
    const loadedBase = pct(small.loaded, 50);
    rows.push(
      compared(
        `query_output, a rare term, ${small.mb.toFixed(2)} MB artifact, while 16 clients run jobs (baseline)`,
        loadedBase,
        ms,
        `load ${q.load.perS.toFixed(1)} jobs/s, ${q.load.errors} errors; max ${ms(Math.max(...small.loaded))}`,
      ),
    );
    for (const a of big) {
      const p = pct(a.loaded, 50);
      rows.push(
        compared(
          `query_output, a rare term, ${a.mb.toFixed(0)} MB artifact, while 16 clients run jobs`,
          p,
          ms,
          `${target(a.mb)}: ${p <= (a.mb > 500 ? 300 : 100) ? 'met' : 'NOT met'}; ${(p / loadedBase).toFixed(1)}× the baseline under the same load`,
        ),
      );
    }
    const s = await benchSeqQuery(c, quick ? 3 : 5);
    const p = pct(s.idle, 50);
    rows.push(
      compared(
        `query_output, a rare number in seq 1 ${SEQ_N} (${s.mb.toFixed(1)} MB artifact), idle`,
        p,
        ms,
        `target ≤ 150 ms: ${p <= 150 ? 'met' : 'NOT met'}; +${ms(p - base)} over the baseline`,
      ),
    );
  } catch (e) {
    const cause = (e as Error & { cause?: Error }).cause?.message;
    rows.push(['query_output (end to end)', `failed: ${(e as Error).message.slice(0, 100)}${cause ? ` (${cause.slice(0, 100)})` : ''}`, '', '']);
  }
  return rows;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

if (import.meta.main) {
  const mb = Number(process.argv[2] ?? 1000);
  const team = 'b-out';
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
  await gw.putPolicy(team, {
    ...DEFAULT_POLICY,
    limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 17, queueWaitMs: 60_000, maxTimeoutMs: 600_000, maxArtifactBytes: STANDALONE_ARTIFACT_BYTES },
    executables: { allow: [...DEFAULT_POLICY.executables.allow, 'seq', 'head'] },
  });
  // --bundle: the agent as a package installs it (dist/agent.mjs from `npm run build`), not the TypeScript sources.
  const entry = process.argv.includes('--bundle') ? join(import.meta.dirname, '../dist/agent.mjs') : undefined;
  const agent = startAgent(gw, {
    token: await gw.token({ team, scopes: ['agent'] }),
    root,
    sandbox: 'none',
    capacity: 17,
    agentId: 'b-out',
    extraArgs: ['--max-artifact-bytes', String(STANDALONE_ARTIFACT_BYTES)],
    ...(entry ? { entry } : {}),
  });
  try {
    await agent.ready;
    const c = await gw.mcp(team, ['execute', 'artifacts:read']);
    const big = process.argv.includes('--no-big') ? null : await benchBigOutput(gw, team, c, agent.proc.pid!, mb * 1_000_000);
    if (big)
      console.log(
        `${mb} MB to stdout: agent RSS ${big.rssBeforeMb.toFixed(0)} → peak ${big.rssPeakMb.toFixed(0)} MB (VmHWM ${big.hwmMb?.toFixed(0)} MB), artifact ${big.artifactBytes} bytes, complete ${big.complete}, ${big.seconds.toFixed(1)} s${big.error ? `, error: ${big.error}` : ''}`,
      );
    if (!process.argv.includes('--no-query')) {
      // --2gb: also a 2 GB artifact (stored in parts, searched through its index).
      const sizes = process.argv.includes('--2gb') ? [...QUERY_SIZES, 2_000_000_000] : QUERY_SIZES;
      const q = await benchQueryUnderLoad(gw, team, c, root, sizes, 16, 3);
      for (const a of q.artifacts)
        console.log(
          `query_output ${JSON.stringify(q.terms)} over ${a.mb.toFixed(a.mb < 1 ? 3 : 0)} MB: idle p50 ${median(a.idle).toFixed(0)} ms, with 16 clients running jobs p50 ${median(a.loaded).toFixed(0)} ms`,
        );
      console.log(`load: ${q.load.perS.toFixed(1)} jobs/s, ${q.load.errors} errors`);
    }
    if (!process.argv.includes('--no-seq')) {
      const s = await benchSeqQuery(c, 5);
      console.log(
        `query_output ["${RARE_NUMBER}"] over ${s.mb.toFixed(1)} MB of seq 1 ${SEQ_N}: idle p50 ${median(s.idle).toFixed(0)} ms (${s.idle.map((x) => x.toFixed(0)).join(', ')})`,
      );
    }
    await c.close();
  } finally {
    await agent.stop();
    await gw.stop();
    rmSync(root, { recursive: true, force: true });
  }
}
