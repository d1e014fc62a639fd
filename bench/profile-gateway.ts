/**
 * A CPU profile of the gateway (`wrangler dev` → workerd) over N governed `execute true` calls
 * (sandbox none), through wrangler's DevTools inspector (bench/inspector.ts): every target it
 * lists is profiled at once (one per Worker; a Worker's Durable Objects run in its isolate, so
 * they are in its profile). Prints self time by where the code comes from (our src/…, the MCP
 * SDK, hono, zod, jose, wrangler's local D1/R2 emulation …) and the top functions, and writes each
 * profile as a `.cpuprofile` (open it in Chrome DevTools → Performance) beside the source of the
 * bundle it samples (`<target>.index.js`), so a line number in the summary can be looked up.
 *
 *   node bench/profile-gateway.ts [n=200] [--out DIR]
 */
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent } from '../test/e2e/harness.ts';
import { startBenchGateway } from './gateway.ts';
import { inspectorSession, inspectorTargets } from './inspector.ts';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; scriptId?: string };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples?: number[];
  timeDeltas?: number[];
  startTime: number;
  endTime: number;
}

/** Where a function's code comes from, for the summary. */
function origin(url: string, fn: string): string {
  if (!url) return fn === '(garbage collector)' ? 'GC' : fn === '(program)' || fn === '(idle)' ? fn : '(native/other)';
  for (const [re, name] of [
    [/@modelcontextprotocol/, 'MCP SDK'],
    [/\/hono\//, 'hono'],
    [/\/zod\//, 'zod'],
    [/\/jose\//, 'jose'],
    [/miniflare|wrangler|cloudflare-internal|workerd|d1|r2|ratelimit/i, 'wrangler/miniflare emulation'],
    [/\/src\//, 'gatehouse src'],
  ] as const)
    if (re.test(url)) return name;
  return url.replace(/^.*\/(node_modules\/[^/]+).*$/, '$1').slice(0, 60);
}

function summarise(p: Profile, calls: number): string[] {
  const self = new Map<number, number>();
  const dt = p.timeDeltas ?? [];
  (p.samples ?? []).forEach((id, i) => {
    self.set(id, (self.get(id) ?? 0) + (dt[i] ?? 0));
  });
  const byOrigin = new Map<string, number>();
  const byFn = new Map<string, number>();
  let busy = 0;
  for (const n of p.nodes) {
    const us = self.get(n.id) ?? 0;
    const o = origin(n.callFrame.url, n.callFrame.functionName);
    if (o === '(idle)') continue;
    busy += us;
    byOrigin.set(o, (byOrigin.get(o) ?? 0) + us);
    const key = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber + 1}`;
    byFn.set(key, (byFn.get(key) ?? 0) + us);
  }
  const ms = (us: number) => (us / 1000 / calls).toFixed(2);
  const out = [`busy ${ms(busy)} ms per call`, '| from | ms per call | share |', '|---|---|---|'];
  for (const [o, us] of [...byOrigin].sort((a, b) => b[1] - a[1]).slice(0, 12)) out.push(`| ${o} | ${ms(us)} | ${((100 * us) / busy).toFixed(0)} % |`);
  out.push('', 'top functions (self time, ms per call):');
  for (const [f, us] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, 25)) out.push(`  ${ms(us).padStart(6)}  ${f}`);
  return out;
}

if (import.meta.main) {
  const n = Number(process.argv[2]) || 200;
  const outDir = process.argv.includes('--out') ? process.argv[process.argv.indexOf('--out') + 1] : mkdtempSync(join(tmpdir(), 'gatehouse-profile-'));
  mkdirSync(outDir, { recursive: true });
  const gw = await startBenchGateway({ vars: { HEARTBEAT_MS: '5000' } });
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
  const agent = startAgent(gw, { token: await gw.token({ team: 'prof', scopes: ['agent'] }), root, sandbox: 'none', capacity: 4, agentId: 'prof' });
  try {
    await agent.ready;
    const c = await gw.mcp('prof', ['execute']);
    const call = async () => {
      const r = await c.callTool({ name: 'execute', arguments: { command: 'true', args: [] } });
      if (r.isError) throw new Error(`execute failed: ${JSON.stringify(r.content)}`);
    };
    for (let i = 0; i < 10; i++) await call(); // warm: isolates, caches, the agent's pools
    const targets = await inspectorTargets(gw);
    console.log(`inspector targets: ${targets.map((t) => t.title).join(', ')}`);
    const sessions = await Promise.all(targets.map(async (t) => ({ t, s: await inspectorSession(t.webSocketDebuggerUrl) })));
    for (const { t, s } of sessions) {
      await s.send('Profiler.enable');
      await s.send('Profiler.setSamplingInterval', { interval: 100 }).catch(() => {});
      await s.send('Profiler.start');
      console.log(`profiling ${t.title}`);
    }
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await call();
    const wall = performance.now() - t0;
    console.log(`${n} × execute true: ${(wall / n).toFixed(1)} ms per call (load ${loadavg()[0].toFixed(1)})`);
    for (const { t, s } of sessions) {
      const { profile } = await s.send<{ profile: Profile }>('Profiler.stop', {}, 120_000);
      const file = join(outDir, `${t.title.replace(/[^\w.-]+/g, '_')}.cpuprofile`);
      writeFileSync(file, JSON.stringify(profile));
      // The bundle wrangler built, as the isolate runs it: the summary's line numbers point into it.
      const bundle = profile.nodes.find((x) => x.callFrame.url.endsWith('index.js') && x.callFrame.scriptId)?.callFrame.scriptId;
      if (bundle) {
        await s.send('Debugger.enable');
        const { scriptSource } = await s.send<{ scriptSource: string }>('Debugger.getScriptSource', { scriptId: bundle });
        writeFileSync(file.replace(/\.cpuprofile$/, '.index.js'), scriptSource);
      }
      console.log(`\n## ${t.title} (${file})`);
      for (const l of summarise(profile, n)) console.log(l);
      s.close();
    }
    await c.close();
  } finally {
    await agent.stop();
    await gw.stop();
    rmSync(root, { recursive: true, force: true });
  }
  process.exit(0);
}
