/**
 * `npm run bench`: speed and memory figures, each with a baseline measured in the same run.
 * Everything talks to 127.0.0.1 only: a local `wrangler dev` gateway and local agents.
 *
 *  1. bare `spawn('true')` in a Node process (the baseline)
 *  2. `execute true` end to end (MCP SDK client → workerd → DO → agent → sandbox → back) with
 *     sandbox none, gVisor cold (no warm pool), gVisor warm pool: p50/p99 and ratio to (1)
 *  3. jobs/s with 16 concurrent clients (warm-pool gVisor, and none)
 *  4. policy decision time in-process (median/p99)
 *  5. the search's targets in-process (bench/search-targets.ts; run third, before the gateway starts), and query_output
 *     for a rare term in 10 kB, 100 MB and 1 GB artifacts end to end, idle and while 16 clients run jobs (bench/output.ts)
 *  6. runtime_execute `minimal` response size in bytes
 *  7. script mode: one run_script with 20 subprocesses against 20 execute calls (bench/script.ts)
 *  8. the hot path taken apart (bench/hotpath.ts): tools/list, policy_check, execute, and the
 *     gateway's (workerd's) CPU per call — a figure that stays meaningful on a loaded machine
 *  9. gVisor sustained: 200 back-to-back calls with no pause (the pool must keep up)
 * 10. 16 clients against a bare spawn loop at the same concurrency; 64 clients: errors (want 0)
 * 11. one team at scale (bench/scale.ts): 100 simulated agents on real WebSockets, 2,000 queued jobs
 * 12. one job writing 1 GB to stdout (bench/output.ts): the agent's peak RSS, artifact complete;
 *     1 GB of random binary stdout through the live relay (bench/relay.ts): agent RSS, bytes on
 *     its socket per byte relayed, heartbeat lateness — for the agent run from its TypeScript
 *     sources (a checkout's `npx gatehouse agent`) and for the packed agent (installed, and what `npm start` runs), side by side; `execute true`
 *     (2) is also timed against both, calls alternating (bench/agent-entry.ts)
 * 13. the emulator floor (bench/emulator-floor.ts): an execute call's binding operations in local
 *     workerd with no Gatehouse code, against the gateway's own CPU per call
 * 14. the Worker's start-up CPU (bench/startup.ts): `wrangler check startup`, median of several profiles,
 *     against the 350 ms target and Cloudflare's 1 s limit (measured first, before anything else runs)
 * 15. many teams (bench/tenants.ts): 200 teams with simulated agents on their own gateway, each call's D1, R2 and
 *     Durable Object work, an idle minute, and the cost model at 1,000 teams with its targets (run last)
 * 16. CPU per job per component (bench/cpu-per-job.ts) through `npm start` and the SDK client, for the default,
 *     strict, bubblewrap and none paths beside the emulator floor, with the user's wall-clock figures (run second)
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, startAgent, type AgentProcess, type Gateway } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';
import type { SandboxReuse } from '../src/contracts/sandbox-reuse.ts';
import { benchBareSpawn, bareSpawnCpu, bareSpawnThroughput } from './executor.ts';
import { benchHotPath, cpuPerCall, healthzFloor, p50 } from './hotpath.ts';
import { benchScale, heapSummary } from './scale.ts';
import { benchEmulatorFloor } from './emulator-floor.ts';
import { benchPolicy } from './policy.ts';
import { searchRows } from './search.ts';
import { benchScriptVsExecute, median, SUBPROCESSES } from './script.ts';
import { benchBigOutput, bigOutputRow, queryOutputRows } from './output.ts';
import { benchRelay, relayRows } from './relay.ts';
import { benchAgentEntries, entryRows } from './agent-entry.ts';
import { benchStartup, startupRow } from './startup.ts';
import { benchTenants, costRows, tenantOptions, tenantRows } from './tenants.ts';
import { benchCpuPerJob, cpuRows } from './cpu-per-job.ts';

const quick = process.argv.includes('--quick');
const N = quick ? 20 : 100;
/** Calls measured after a pause each, and the pause: what a client that thinks between calls sees. */
const PAUSED_CALLS = quick ? 8 : 20;
const PAUSE_MS = 1000;
const N_COLD = quick ? 5 : 20;
/** One job's stdout for the big-output row: 1 GB (the policy schema's ceiling is 1 GiB). */
const BIG_OUTPUT_BYTES = 1_000_000_000;
/** The agents' heartbeat interval on the bench gateway. */
const HEARTBEAT_MS = 5000;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}
const f = (ms: number) => `${ms.toFixed(1)} ms`;
const rows: string[][] = [];
function row(...cells: string[]) {
  rows.push(cells);
  console.log(cells.join(' | '));
}

const connect = (gw: Gateway, team: string) => gw.mcp(team, ['execute', 'artifacts:read']);

/** `n` execute calls, one at a time; with `pauseMs`, each after that long idle (an AI agent thinking between calls). */
async function timeCalls(c: Client, n: number, args: Record<string, unknown>, pauseMs = 0): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
    const t = performance.now();
    const r = await c.callTool({ name: 'execute', arguments: args });
    if (r.isError) throw new Error(`execute failed: ${JSON.stringify(r.content)}`);
    out.push(performance.now() - t);
  }
  return out;
}

/** Jobs/s of `clients` concurrent MCP clients each making `perClient` calls; failed calls are counted, not thrown. */
async function throughput(gw: Gateway, team: string, clients: number, perClient: number): Promise<{ perS: number; errors: number; firstError: string }> {
  const cs = await Promise.all(Array.from({ length: clients }, () => connect(gw, team)));
  let errors = 0;
  let firstError = '';
  const t = performance.now();
  await Promise.all(
    cs.map(async (c) => {
      for (let i = 0; i < perClient; i++) {
        try {
          const r = await c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } }, undefined, { timeout: 120_000 });
          if (r.isError) throw new Error(JSON.stringify(r.content).slice(0, 200));
        } catch (e) {
          errors += 1;
          firstError ||= (e as Error).message;
        }
      }
    }),
  );
  const s = (performance.now() - t) / 1000;
  await Promise.all(cs.map((c) => c.close()));
  return { perS: (clients * perClient) / s, errors, firstError };
}

async function main() {
  console.log(`Gatehouse benchmark (${quick ? 'quick' : 'full'}; loopback only)\n`);
  const bare = await benchBareSpawn(N);
  const bareP50 = pct(bare, 50);
  row('measure', 'p50', 'p99', 'ratio p50 / bare spawn');
  row("bare spawn('true') in the agent process", f(bareP50), f(pct(bare, 99)), '1.0×');
  // Before the gateway and agents start: a profile taken beside them would count their load.
  row(...startupRow(await benchStartup(quick ? 5 : 7)));
  // CPU per job per component through npm start (bench/cpu-per-job.ts), before this bench's own gateway loads the host.
  for (const r of cpuRows(await benchCpuPerJob(quick))) row(...r);
  // The search at module level, before any MCP client: it holds this process's event loop for seconds at a time.
  for (const r of await searchRows(quick ? 3 : 5)) row(...r);

  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: String(HEARTBEAT_MS) } });
  const agents: AgentProcess[] = [];
  const roots: string[] = [];
  // The sandbox-none agent is the one users install: the bundle `npm run build` writes (an agent run
  // from its TypeScript sources idles ~40 MB higher: the sources and the type stripper).
  execFileSync(process.execPath, [join(import.meta.dirname, '../scripts/build-dist.ts')], { stdio: 'ignore' });
  const launch = async (team: string, sandbox: 'none' | 'gvisor', extra: string[] = [], reuse?: SandboxReuse, entry?: string) => {
    const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
    roots.push(root);
    await gw.putPolicy(team, {
      ...DEFAULT_POLICY,
      limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 16, queueWaitMs: 60_000, maxTimeoutMs: 600_000, maxArtifactBytes: BIG_OUTPUT_BYTES },
      executables: { allow: [...DEFAULT_POLICY.executables.allow, 'seq', 'head'] },
      // Single-use unless the row asks for reuse (the default policy reuses).
      sandbox: { minimum: 'none' as const, ...(reuse ? { reuse } : {}) },
    });
    const a = startAgent(gw, {
      token: await gw.token({ team, scopes: ['agent'] }),
      root,
      sandbox,
      capacity: 16,
      agentId: `bench-${team}`,
      extraArgs: extra,
      entry,
    });
    agents.push(a);
    await a.ready;
    return a;
  };
  try {
    const noneAgent = await launch(
      'b-none',
      'none',
      ['--max-artifact-bytes', String(BIG_OUTPUT_BYTES)],
      undefined,
      join(import.meta.dirname, '../dist/agent.mjs'),
    );
    const none = await connect(gw, 'b-none');
    await timeCalls(none, 5, { command: 'true', args: [] }); // warm-up
    const tNone = await timeCalls(none, N, { command: 'true', args: [] });
    row(
      'execute true, sandbox none (end to end; packed agent, dist/agent.mjs)',
      f(pct(tNone, 50)),
      f(pct(tNone, 99)),
      `${(pct(tNone, 50) / bareP50).toFixed(1)}× (+${f(pct(tNone, 50) - bareP50)})`,
    );
    const tNonePaused = await timeCalls(none, PAUSED_CALLS, { command: 'true', args: [] }, PAUSE_MS);
    row(
      `  the same, each call after a ${PAUSE_MS / 1000} s pause (${PAUSED_CALLS} calls)`,
      f(pct(tNonePaused, 50)),
      f(pct(tNonePaused, 99)),
      `+${f(pct(tNonePaused, 50) - pct(tNone, 50))} over back to back (bench/RESULTS.md, "After an idle moment")`,
    );
    // The agent both ways: from its TypeScript sources (a checkout's `npx gatehouse agent`) and packed (installed, `npm start`).
    for (const r of entryRows(await benchAgentEntries(gw, N))) row(...r);

    // The hot path taken apart, and the gateway's CPU per call (robust to other processes' load).
    const hp = await benchHotPath(none, quick ? 15 : 50);
    row('  tools/list (auth + MCP server, no storage; wall time includes the client)', f(p50(hp.toolsList)), f(pct(hp.toolsList, 99)), '');
    row('  policy_check (auth+policy version query, policy cache, audit row)', f(p50(hp.policyCheck)), f(pct(hp.policyCheck, 99)), '');
    row(
      '  execute true (+ DO submit+follow, agent)',
      f(p50(hp.execute)),
      f(pct(hp.execute, 99)),
      `+${f(p50(hp.execute) - bareP50)} over bare spawn (target ≤ +10 ms)`,
    );
    const port = Number(new URL(gw.url).port);
    const nCpu = quick ? 20 : 100;
    const cpu = await cpuPerCall(nCpu, () => timeCalls(none, 1, { command: 'true', args: [] }), port, noneAgent.proc.pid);
    const bareCpu = await bareSpawnCpu(nCpu);
    if (cpu.gateway !== null) row('  gateway (workerd) CPU per execute call', f(cpu.gateway), '', 'the Worker, the DO and the local D1/R2 emulation');
    if (cpu.devProxy !== null)
      row(
        "  wrangler dev's local proxy (workerd) CPU per execute call",
        f(cpu.devProxy),
        '',
        'forwards every request and WebSocket locally; no such hop when deployed',
      );
    if (cpu.agent !== null)
      row('  agent CPU per execute call (with its child processes)', f(cpu.agent), '', `bare spawn('true'): ${f(bareCpu)} with the child`);
    row('  MCP client (SDK v1) CPU per execute call', f(cpu.client), '', '');
    const cpuList = await cpuPerCall(quick ? 10 : 30, () => none.listTools(), port);
    row(
      '  tools/list CPU per call: gateway / MCP client',
      cpuList.gateway !== null ? f(cpuList.gateway) : '?',
      f(cpuList.client),
      'the SDK v1 client compiles every output schema on listTools',
    );
    const floor = await healthzFloor(gw.url, quick ? 30 : 100);
    row(
      '  GET /healthz through wrangler dev (no Gatehouse work)',
      f(p50(floor)),
      f(pct(floor, 99)),
      "the local per-request floor: wrangler's proxy + workerd in development mode",
    );
    // The same binding operations as an execute call, with no Gatehouse code (a second wrangler dev): the emulator's share.
    const emu = await benchEmulatorFloor(quick ? 50 : 200).catch((e: Error) => {
      console.log(`emulator floor not measured: ${e.message}`);
      return null;
    });
    const path = emu?.ops.find((x) => x.op === 'path');
    const stmt = emu?.ops.find((x) => x.op === 'do-sql-50');
    const rpc = emu?.ops.find((x) => x.op === 'do-rpc');
    if (path?.cpu != null) {
      row(
        "  emulator floor: an execute call's binding operations alone (bench/floor, no Gatehouse code); columns: wall p50, workerd CPU",
        f(path.wallP50),
        f(path.cpu),
        `${cpu.gateway !== null ? `gateway CPU − floor = ${f(cpu.gateway - path.cpu)} of Gatehouse's own code per call; ` : ''}` +
          `a DO SQLite statement ${stmt?.cpu != null && rpc?.cpu != null ? `${(((stmt.cpu - rpc.cpu) / 50) * 1000).toFixed(0)} µs` : '?'}`,
      );
    }

    let warmClient: Client | null = null;
    let reuseClient: Client | null = null;
    // A gVisor agent that does not start (e.g. its warm pool too slow to come up on a loaded machine) is
    // reported, and the bench goes on with the rows that do not need it.
    if (hasCommand('runsc')) {
      try {
        await launch('b-cold', 'gvisor', ['--warm', '0']);
        const cold = await connect(gw, 'b-cold');
        await timeCalls(cold, 2, { command: 'true', args: [] });
        const tCold = await timeCalls(cold, N_COLD, { command: 'true', args: [] });
        row('execute true, gVisor cold (runsc run per job)', f(pct(tCold, 50)), f(pct(tCold, 99)), `${(pct(tCold, 50) / bareP50).toFixed(1)}×`);
        await cold.close();

        await launch('b-warm', 'gvisor', ['--warm', '4']);
        warmClient = await connect(gw, 'b-warm');
        await timeCalls(warmClient, 5, { command: 'true', args: [] });
        const tWarm: number[] = [];
        // Paced like an interactive client, so the pool refills between calls (its steady state).
        for (let i = 0; i < N; i++) {
          tWarm.push(...(await timeCalls(warmClient, 1, { command: 'true', args: [] })));
          await new Promise((r) => setTimeout(r, 150));
        }
        row('execute true, gVisor single-use, warm pool, paced 150 ms', f(pct(tWarm, 50)), f(pct(tWarm, 99)), `${(pct(tWarm, 50) / bareP50).toFixed(1)}×`);
        // Sustained: no pause, so the single-use pool drains and the refill rate decides (the `strict` preset's path).
        const tSus = await timeCalls(warmClient, quick ? 40 : 200, { command: 'true', args: [] });
        row(`execute true, gVisor single-use (strict), warm pool, ${tSus.length} back-to-back`, f(pct(tSus, 50)), f(pct(tSus, 99)), 'target p50 ≤ 100 ms');

        // What a team gets without asking: the default policy's sandbox reuse (one sandbox serves up to 50 of its jobs).
        await launch('b-reuse', 'gvisor', ['--warm', '1'], DEFAULT_POLICY.sandbox.reuse);
        reuseClient = await connect(gw, 'b-reuse');
        await timeCalls(reuseClient, 5, { command: 'true', args: [] });
        const tReuse = await timeCalls(reuseClient, quick ? 40 : 200, { command: 'true', args: [] });
        row(
          `execute true, gVisor, default policy (sandbox reuse), ${tReuse.length} back-to-back`,
          f(pct(tReuse, 50)),
          f(pct(tReuse, 99)),
          `${(pct(tReuse, 50) / pct(tSus, 50)).toFixed(2)}× single-use; target p50 ≤ 45 ms, p99 ≤ 100 ms`,
        );
        const tReusePaused = await timeCalls(reuseClient, PAUSED_CALLS, { command: 'true', args: [] }, PAUSE_MS);
        row(
          `  the same, each call after a ${PAUSE_MS / 1000} s pause (${PAUSED_CALLS} calls)`,
          f(pct(tReusePaused, 50)),
          f(pct(tReusePaused, 99)),
          `+${f(pct(tReusePaused, 50) - pct(tReuse, 50))} over back to back`,
        );
      } catch (e) {
        warmClient = null;
        reuseClient = null;
        row('execute true, gVisor', `failed: ${(e as Error).message.split('\n')[0].slice(0, 100)}`, '', '');
      }
    } else {
      row('execute true, gVisor', 'skipped: runsc not installed', '', '');
    }

    const per = quick ? 5 : 20;
    const bareTp = await bareSpawnThroughput(16, per * 4);
    row('bare spawn loop, 16 concurrent', `${bareTp.toFixed(1)} jobs/s`, '', 'baseline');
    const tpNone = await throughput(gw, 'b-none', 16, per);
    row(
      'throughput, 16 concurrent clients, sandbox none',
      `${tpNone.perS.toFixed(1)} jobs/s`,
      `${tpNone.errors} errors`,
      `${((100 * tpNone.perS) / bareTp).toFixed(0)} % of bare; ${emu ? `${((100 * tpNone.perS) / emu.pathPerS).toFixed(0)} % of the emulator floor path's ${emu.pathPerS.toFixed(1)} calls/s with 16 in flight` : 'emulator floor not measured'} (target ≥ 80 %)`,
    );
    if (warmClient) {
      const tpWarm = await throughput(gw, 'b-warm', 16, per);
      row('throughput, 16 concurrent clients, gVisor single-use, warm pool', `${tpWarm.perS.toFixed(1)} jobs/s`, `${tpWarm.errors} errors`, '');
    }
    if (reuseClient) {
      const tpReuse = await throughput(gw, 'b-reuse', 16, per);
      row(
        'throughput, 16 concurrent clients, gVisor, default policy',
        `${tpReuse.perS.toFixed(1)} jobs/s`,
        `${tpReuse.errors} errors`,
        `${((100 * tpReuse.perS) / bareTp).toFixed(0)} % of bare; target ≥ 35 jobs/s`,
      );
      const tpReuse64 = await throughput(gw, 'b-reuse', 64, quick ? 2 : 5);
      row(
        '64 concurrent clients, gVisor, default policy',
        `${tpReuse64.perS.toFixed(1)} jobs/s`,
        `${tpReuse64.errors} errors`,
        `target 0 errors${tpReuse64.firstError ? `; first: ${tpReuse64.firstError.slice(0, 120)}` : ''}`,
      );
    }
    const tp64 = await throughput(gw, 'b-none', 64, quick ? 2 : 5);
    row(
      '64 concurrent clients, sandbox none',
      `${tp64.perS.toFixed(1)} jobs/s`,
      `${tp64.errors} errors`,
      `target 0 errors${tp64.firstError ? `; first: ${tp64.firstError.slice(0, 120)}` : ''}`,
    );

    const pol = await benchPolicy(quick ? 2_000 : 20_000);
    row('policy decision (in-process, default policy)', `${pol.medianUs.toFixed(1)} µs`, `${pol.p99Us.toFixed(1)} µs`, '');

    // query_output end to end (the search's module-level targets ran first, before the gateway).
    for (const r of await queryOutputRows(gw, 'b-none', none, roots[0], quick)) row(...r);

    // One job writing 1 GB to stdout: the agent streams it to a spool file and uploads it, so its memory stays flat.
    row(...bigOutputRow(await benchBigOutput(gw, 'b-none', none, noneAgent.proc.pid!, BIG_OUTPUT_BYTES)));

    // The live relay under 1 GB of random binary, for the agent from its sources and packed (as installed and as npm start runs it).
    for (const entry of ['sources', 'packed'] as const)
      for (const r of relayRows(await benchRelay(gw, entry, quick ? 200_000_000 : BIG_OUTPUT_BYTES, HEARTBEAT_MS))) row(...r);

    const sc = await benchScriptVsExecute(gw, 'b-none', none, quick ? 3 : 10);
    row(
      `${SUBPROCESSES} × true: one run_script vs ${SUBPROCESSES} execute calls (sandbox none, median)`,
      f(median(sc.script)),
      f(median(sc.calls)),
      `execute / script = ${(median(sc.calls) / median(sc.script)).toFixed(2)}×`,
    );

    const minimal = await none.callTool({ name: 'runtime_execute', arguments: { runtime: 'python', code: 'print("hello")' } });
    row('runtime_execute minimal: structuredContent size', `${JSON.stringify(minimal.structuredContent).length} bytes`, '', 'target ≤ 300 bytes');
    await none.close();
    await warmClient?.close();

    const sc2 = await benchScale(gw, { agents: 100, jobs: quick ? 300 : 2000 }).catch((e: Error) => {
      row('one team: 100 simulated agents', `failed: ${e.message.slice(0, 100)}`, '', '');
      return null;
    });
    if (sc2)
      row(
        `one team: ${sc2.agents} simulated agents, ${sc2.jobs} queued jobs`,
        `${sc2.dispatchPerS.toFixed(0)} jobs/s dispatched from the full queue`,
        `queue→start p99 ${f(sc2.queueToStartP99)} (from the agents' arrival)`,
        `p50 ${f(sc2.queueToStartP50)}; ${heapSummary(sc2)}; workerd RSS +${sc2.gatewayRssGrowthMb?.toFixed(0) ?? '?'} MB; ${sc2.errors} errors`,
      );
    if (sc2)
      row(
        `  submitting them: background execute calls, 16 clients`,
        `${sc2.submitPerS.toFixed(1)} jobs/s`,
        `call p50 ${f(sc2.submitCallP50)}`,
        `${emu ? `${((100 * sc2.submitPerS) / emu.pathPerS).toFixed(0)} % of the emulator floor path's ${emu.pathPerS.toFixed(1)} calls/s with 16 in flight; ` : ''}target ≥ 3× 29 jobs/s`,
      );
  } finally {
    for (const a of agents) await a.stop();
    await gw.stop();
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  }
  // Many teams, on a gateway of their own (it reads the gateway's call lines and its stores from a fresh state).
  try {
    const t = await benchTenants(tenantOptions(quick));
    for (const r of [...tenantRows(t), ...costRows(t)]) row(...r);
  } catch (e) {
    row('many teams (bench/tenants.ts)', `failed: ${(e as Error).message.slice(0, 100)}`, '', '');
  }
  console.log('\nMarkdown:\n');
  console.log(rows.map((r, i) => `| ${r.join(' | ')} |${i === 0 ? `\n|${r.map(() => '---').join('|')}|` : ''}`).join('\n'));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
