/**
 * Script mode end to end: run_script through the official MCP client against real `wrangler dev`
 * (workerd with the Worker Loader, local D1/R2/DO) and a real agent (bubblewrap, so this file
 * does not depend on runsc). Escapes of a script sandbox must fail; subprocesses get the
 * subprocess API's shapes and messages; each subprocess has its own audit row linked to the script.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { connect as tcpConnect, createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { ROOT, startAgent, startGateway, type AgentProcess, type Gateway, testSandbox } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { startOpaServer, type OpaServer } from '../support/opa-server.ts';
import { batchOfScripts } from '../support/script-batch.ts';

const SANDBOX = testSandbox();

const TEAM = 'scr';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;
let opa: OpaServer;

const SCRIPT_ON = { enabled: true, cpuMs: 2_000, subprocess: { maxCount: 25, maxTotalMs: 120_000 } };
const setPolicy = (patch: Record<string, unknown>) => gw.putPolicy(TEAM, { ...DEFAULT_POLICY, script: SCRIPT_ON, ...patch });

async function run(code: string, extra: Record<string, unknown> = {}) {
  const r = await client.callTool({ name: 'run_script', arguments: { code, ...extra } }, undefined, { timeout: 120_000 });
  return { r, s: r.structuredContent as Record<string, any>, t: (r.content as { text: string }[])[0]?.text ?? '' };
}

async function auditRows(): Promise<Array<Record<string, any>>> {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  const res = await fetch(`${gw.url}/admin/v1/audit?limit=200&tool=run_script`, { headers: { Authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { entries: Array<Record<string, any>> }).entries;
}

beforeAll(async () => {
  opa = await startOpaServer();
  gw = await startGateway();
  root = mkdtempSync(join(tmpdir(), 'gatehouse-script-'));
  mkdirSync(join(root, 'sub'));
  writeFileSync(join(root, 'report.txt'), 'ok 1\nFAIL test_two\nok 3\nFAIL test_four\n');
  writeFileSync(join(root, 'Makefile'), 'build:\n\techo building\ntest:\n\tcat report.txt\n\tfalse\n');
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: SANDBOX, capacity: 4, agentId: 'script-agent' });
  await agent.ready;
  client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
  await setPolicy({});
}, 120_000);

afterAll(async () => {
  await client?.close();
  await agent?.stop();
  await gw?.stop();
  await opa?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('run_script basics', () => {
  it('is off unless the team policy enables it', async () => {
    await gw.putPolicy(TEAM, DEFAULT_POLICY);
    const off = await run('return 1');
    expect(off.r.isError).toBe(true);
    expect(off.t).toContain('Script mode is disabled in configuration (script.enabled = false)');
    expect(off.s.status).toBe('denied');
    await setPolicy({});
  });

  it('returns the top-level return value as JSON and keeps console lines with their prefixes in the artifact', async () => {
    const out = await run(
      'console.log("hello", vars.name); console.warn("careful"); console.error("bad"); console.info("fyi"); console.debug("dbg");\n' +
        'await sleep(5);\nreturn { signals: 42, healthy: true, name: vars.name };',
      { vars: { name: 'world' }, outputMode: 'summary' },
    );
    expect(out.r.isError).toBeFalsy();
    expect(out.s.status).toBe('success');
    expect(out.s.result).toEqual({ signals: 42, healthy: true, name: 'world' });
    expect(out.s.stdoutSummary).toContain('hello world\n[warn] careful\n[error] bad\n[info] fyi\n[debug] dbg');
    const q = await client.callTool({
      name: 'query_output',
      arguments: { artifactHandle: out.s.artifactHandle, queryTerms: ['warn', 'signals'], contextLines: 0 },
    });
    const excerpts = (q.structuredContent as { excerpts: { content: string }[] }).excerpts.map((e) => e.content).join('\n');
    expect(excerpts).toContain('[warn] careful');
    expect(excerpts).toContain('"signals": 42');
  });

  it('runs TypeScript with its types stripped, and a module with export default', async () => {
    const ts = await run('interface R { n: number }\nconst r: R = { n: 2 as number };\nreturn r.n * 21;');
    expect(ts.s.status).toBe('success');
    expect(ts.s.result).toBe(42);
    const mod = await run('export default async function main() { return ["a", "b"]; }');
    expect(mod.s.result).toEqual(['a', 'b']);
  });

  it('refuses code over 51200 bytes before running it', async () => {
    const big = await run(`return 1; // ${'x'.repeat(51_200)}`);
    expect(big.r.isError).toBe(true);
    expect(big.t).toContain('Code size exceeds limit (51200 bytes)');
  });

  it('reports script errors as Sandbox error without host paths or stack frames', async () => {
    const out = await run('function f() { throw new Error("boom at the edge"); }\nf();');
    expect(out.r.isError).toBe(true);
    expect(out.s.error?.message).toBe('Sandbox error: boom at the edge');
    expect(out.t).not.toMatch(/\/work\/|node_modules|file:\/\/|\n\s+at /);
    const syntax = await run('return {');
    expect(syntax.s.error?.message).toMatch(/^Sandbox error: SyntaxError: /);
  });

  it('caps console output at 10 MB with [output truncated] and the return value at 10 MB', async () => {
    const out = await run('const line = "y".repeat(1024 * 1024); for (let i = 0; i < 12; i++) console.log(line); return "done";');
    expect(out.s.status).toBe('success');
    expect(out.s.consoleTruncated).toBe(true);
    const q = await client.callTool({
      name: 'query_output',
      arguments: { artifactHandle: out.s.artifactHandle, queryTerms: ['[output truncated]'], contextLines: 0 },
    });
    expect((q.structuredContent as { matchCount: number }).matchCount).toBe(1);
    // Both at their caps in one script: the isolate's report still crosses one RPC return.
    const both = await run('const line = "w".repeat(1000); for (let i = 0; i < 10_400; i++) console.log(line); return "v".repeat(10 * 1024 * 1024 - 2);');
    expect(both.s.status).toBe('success');
    expect(both.s.result.length).toBe(10 * 1024 * 1024 - 2);
    expect(both.s.consoleTruncated).toBe(false);
    const ret = await run('return "z".repeat(11 * 1024 * 1024);');
    expect(ret.s.error?.message).toBe('Sandbox error: Return value exceeds limit (10485760 bytes)');
  });

  it('times out a script that waits too long with Sandbox error: Execution timeout', async () => {
    const out = await run('await sleep(10_000); return 1;', { timeout_ms: 500 });
    expect(out.s.status).toBe('timeout');
    expect(out.s.error?.message).toBe('Sandbox error: Execution timeout');
  });

  it('caps each sleep() at 30 s and keeps vars frozen', async () => {
    const out = await run(
      '"use strict"; let frozen; try { vars.x = 2; frozen = false; } catch { frozen = true; } const t = Date.now(); await sleep(600_000); return { frozen, slept: Date.now() - t };',
      { vars: { x: 1 }, timeout_ms: 100_000 },
    );
    expect(out.s.status).toBe('success');
    expect(out.s.result.frozen).toBe(true);
    expect(out.s.result.slept).toBeGreaterThanOrEqual(29_000);
    expect(out.s.result.slept).toBeLessThan(60_000);
  }, 120_000);

  it('needs a token with the execute scope', async () => {
    const readOnly = await gw.mcp(TEAM, ['artifacts:read']);
    try {
      const r = await readOnly.callTool({ name: 'run_script', arguments: { code: 'return 1' } });
      expect(r.isError).toBe(true);
      expect(r.structuredContent).toMatchObject({ error: { code: 'insufficient_scope' } });
      expect((r.content as { text: string }[])[0].text).toContain('insufficient_scope: the tool "run_script" needs a token with scope "execute"');
    } finally {
      await readOnly.close();
    }
  });

  it('outputMode intent returns only the console lines matching queryTerms', async () => {
    const out = await run('console.log("ok one"); console.error("FAIL two"); console.log("ok three"); return 1;', {
      outputMode: 'intent',
      queryTerms: ['FAIL'],
      contextLines: 0,
    });
    expect(out.r.isError, out.t).toBeFalsy();
    expect(out.s.result).toBe(1);
    expect(out.s.excerpts.map((e: { content: string }) => e.content)).toEqual(['[error] FAIL two']);
    expect(out.s.stdoutSummary).toBeUndefined();
    const none = await run('return 1', { outputMode: 'intent' });
    expect(none.r.isError).toBe(true);
    expect(none.t).toContain('outputMode "intent" returns only console lines matching queryTerms');
  });

  it('without timeout_ms the policy default wall time applies (120 s unless the policy says otherwise)', async () => {
    expect(DEFAULT_POLICY.script).toMatchObject({ enabled: false, defaultTimeoutMs: 120_000, maxTimeoutMs: 120_000 });
    await setPolicy({ script: { ...SCRIPT_ON, defaultTimeoutMs: 800 } });
    const out = await run('await sleep(20_000); return 1;');
    expect(out.s.status).toBe('timeout');
    expect(out.s.error?.message).toBe('Sandbox error: Execution timeout');
    expect(out.s.durationMs).toBeLessThan(15_000);
    await setPolicy({});
  });

  it('refuses a timeout above the policy maximum', async () => {
    const out = await run('return 1', { timeout_ms: 500_000 });
    expect(out.r.isError).toBe(true);
    expect(out.t).toContain('Requested timeout (500000ms) exceeds maximum (120000ms)');
  });
});

describe('the docs/script-mode.md example', () => {
  it('builds, tests and greps the failures in one call', async () => {
    const readme = readFileSync(join(ROOT, 'docs/script-mode.md'), 'utf8');
    const code = /```js\n\/\/ run_script[^\n]*\n([\s\S]*?)```/.exec(readme)![1];
    const out = await run(code, { outputMode: 'summary' });
    expect(out.r.isError, out.t).toBeFalsy();
    expect(out.s.result).toEqual({ stage: 'test', passed: false, failures: ['FAIL test_two', 'FAIL test_four'] });
    expect(out.s.stdoutSummary).toContain('tests exited 2');
    expect(out.s.subprocesses.count).toBe(2);
  });
});

describe('escapes fail', () => {
  it('has no process, no code generation, no constructor escape', async () => {
    const out = await run(`
      const tries = {};
      const attempt = async (name, f) => { try { tries[name] = { ok: true, value: String(await f()) }; } catch (e) { tries[name] = { ok: false, error: e.name + ': ' + e.message }; } };
      await attempt('ctor', () => console.log.constructor('return process')());
      await attempt('this', () => this.constructor);
      await attempt('eval', () => eval('1 + 1'));
      await attempt('Function', () => new Function('return 1')());
      await attempt('asyncFunction', () => (async () => {}).constructor('return 1')());
      await attempt('fetch', () => fetch('http://127.0.0.1:1/'));
      await attempt('WebSocket', () => new WebSocket('ws://127.0.0.1:1/'));
      await attempt('process', () => process.env);
      await attempt('importFs', async () => { const fs = await import('node:fs'); return JSON.stringify(fs.readdirSync('/')); });
      await attempt('importEnv', async () => { const m = await import('cloudflare:workers'); return JSON.stringify(Object.keys(m.env)); });
      await attempt('sockets', async () => { const m = await import('cloudflare:sockets'); const s = m.connect('127.0.0.1:1'); await s.opened; return 'connected'; });
      await attempt('importChildProcess', async () => { const cp = await import('node:child_process'); return cp.execSync('id'); });
      await attempt('freezeGatehouse', () => { gatehouse.exec = () => 'mine'; return gatehouse.exec === undefined; });
      await attempt('globalCtor', () => globalThis.constructor.constructor('return process')());
      await attempt('injectedExecCtor', () => gatehouse.exec.constructor('return process')());
      await attempt('sleepCtor', () => sleep.constructor('return process')());
      await attempt('commandCtor', () => Deno.Command.constructor('return process')());
      await attempt('varsCtor', () => vars.constructor.constructor('return process')());
      await attempt('generatorCtor', () => Object.getPrototypeOf(function* () {}).constructor('yield 1')().next().value);
      await attempt('functionThis', () => { const t = (function () { return this; })(); if (t === undefined) throw new TypeError('this is undefined'); return Object.keys(t); });
      await attempt('wasm', () => WebAssembly.Module);
      return tries;`);
    expect(out.s.status).toBe('success');
    const t = out.s.result as Record<string, { ok: boolean; value?: string; error?: string }>;
    expect(t.ctor.ok).toBe(false);
    expect(t.ctor.error).toMatch(/EvalError: Code generation from strings disallowed/);
    expect(t.eval.error).toMatch(/EvalError/);
    expect(t.Function.error).toMatch(/EvalError/);
    expect(t.asyncFunction.error).toMatch(/EvalError/);
    // `this` at the top of a script body is undefined (strict module code): nothing to climb.
    expect(t.this.ok).toBe(false);
    expect(t.fetch.ok).toBe(false);
    expect(t.WebSocket.ok).toBe(false);
    expect(t.process.ok).toBe(false);
    // Modules an import() can reach are the isolate's own: a virtual file system, an empty env, no sockets, no processes.
    if (t.importFs.ok) expect(JSON.parse(t.importFs.value!)).not.toContain('work');
    expect(t.importEnv.value).toBe('[]');
    expect(t.sockets.ok).toBe(false);
    expect(t.importChildProcess.ok).toBe(false);
    expect(t.freezeGatehouse.ok).toBe(false);
    // The constructors of what the isolate injects (and of the global) are the isolate's own Function: code generation is off.
    for (const k of ['globalCtor', 'injectedExecCtor', 'sleepCtor', 'commandCtor', 'varsCtor', 'generatorCtor']) expect(t[k].error, k).toMatch(/^EvalError: /);
    expect(t.functionThis.ok).toBe(false);
    expect(t.wasm.error).toMatch(/^ReferenceError: /);
  });

  it("has no network at all: fetch, WebSocket, sockets and the gateway itself are unreachable from a live listener's point of view", async () => {
    // A live listener on loopback: a refused port would fail any client, so only a listener that
    // would have answered shows the isolate has no way out.
    let connections = 0;
    const listener: TcpServer = createTcpServer((sock) => {
      connections += 1;
      sock.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok');
    });
    await new Promise<void>((res) => listener.listen(0, '127.0.0.1', res));
    const port = (listener.address() as { port: number }).port;
    try {
      await new Promise<void>((res, rej) => {
        const c = tcpConnect(port, '127.0.0.1', () => {
          c.end();
          res();
        });
        c.once('error', rej);
      });
      await new Promise((r) => setTimeout(r, 100));
      expect(connections).toBe(1); // the listener is live and counts
      connections = 0;
      const out = await run(`
        const url = 'http://127.0.0.1:${port}/';
        const tries = {};
        const attempt = async (name, f) => {
          try { tries[name] = 'reached: ' + String(await Promise.race([f(), sleep(3000).then(() => { throw new Error('no answer in 3 s'); })])); }
          catch (e) { tries[name] = 'refused: ' + (e && e.name) + ': ' + (e && e.message); }
        };
        await attempt('fetch', async () => (await fetch(url)).status);
        await attempt('fetchFromPrototype', async () => {
          for (let p = globalThis; p; p = Object.getPrototypeOf(p)) {
            const d = Object.getOwnPropertyDescriptor(p, 'fetch');
            if (d && typeof d.value === 'function') return (await d.value.call(globalThis, url)).status;
          }
          throw new Error('no fetch on the global object or its prototypes');
        });
        await attempt('gateway', async () => (await fetch(${JSON.stringify(gw.url)} + '/mcp')).status);
        await attempt('websocket', () => new Promise((res, rej) => {
          const ws = new WebSocket('ws://127.0.0.1:${port}/');
          ws.addEventListener('open', () => res('open'));
          ws.addEventListener('error', () => rej(new Error('websocket error')));
          ws.addEventListener('close', () => rej(new Error('websocket closed')));
        }));
        await attempt('sockets', async () => { const m = await import('cloudflare:sockets'); const s = m.connect({ hostname: '127.0.0.1', port: ${port} }); await s.opened; return 'opened'; });
        await attempt('nodeNet', async () => { const net = await import('node:net'); return new Promise((res, rej) => { const c = net.connect(${port}, '127.0.0.1', () => res('connected')); c.on('error', rej); }); });
        await attempt('nodeHttp', async () => { const http = await import('node:http'); return new Promise((res, rej) => { http.get(url, (r) => res(r.statusCode)).on('error', rej); }); });
        return tries;`);
      expect(out.s.status, out.t).toBe('success');
      const tries = out.s.result as Record<string, string>;
      expect(Object.keys(tries).sort()).toEqual(['fetch', 'fetchFromPrototype', 'gateway', 'nodeHttp', 'nodeNet', 'sockets', 'websocket']);
      for (const [name, what] of Object.entries(tries)) expect(what, name).toMatch(/^refused: /);
      await new Promise((r) => setTimeout(r, 300));
      expect(connections).toBe(0);
    } finally {
      await new Promise((r) => listener.close(r));
    }
  });

  it('a script that rewrites the built-ins its runner uses cannot break the limits or the gateway', async () => {
    // The runner's own checks run inside the script's isolate, after the script: the host must
    // not trust the report it gets back.
    const garbage = await run('JSON.stringify = () => "{not json"; return 1;');
    expect(garbage.s.status).toBe('failure');
    expect(garbage.s.error?.message).toMatch(/^Sandbox error: /);
    const bigReturn = await run('TextEncoder.prototype.encode = function () { return new Uint8Array(0); }; return "r".repeat(11 * 1024 * 1024);');
    expect(bigReturn.s.error?.message).toBe('Sandbox error: Return value exceeds limit (10485760 bytes)');
    expect(bigReturn.s.result).toBeUndefined();
    const bigConsole = await run(
      'TextEncoder.prototype.encode = function () { return new Uint8Array(0); }; const l = "c".repeat(1024 * 1024); for (let i = 0; i < 12; i++) console.log(l); return "done";',
    );
    expect(bigConsole.s.status).toBe('success');
    expect(bigConsole.s.consoleTruncated).toBe(true);
    expect(bigConsole.s.outputBytes).toBeLessThanOrEqual(10 * 1024 * 1024 + 64);
    const rows = (await auditRows()).filter((r) => r.parentJobId === null);
    for (const id of [garbage.s.scriptId, bigReturn.s.scriptId, bigConsole.s.scriptId])
      expect(
        rows.some((r) => r.jobId === id),
        id,
      ).toBe(true);
    expect((await run('return 8')).s.result).toBe(8);
  });

  it('has the safe built-ins and none of the host-ish globals the script runner blocks', async () => {
    const out = await run(`
      const allowed = ['JSON', 'Math', 'Date', 'Array', 'Map', 'Set', 'Promise', 'Object', 'String', 'Number', 'Boolean', 'RegExp', 'Error',
        'TypeError', 'RangeError', 'SyntaxError', 'URIError', 'parseInt', 'parseFloat', 'isNaN', 'isFinite', 'encodeURIComponent',
        'decodeURIComponent', 'encodeURI', 'decodeURI', 'setTimeout', 'clearTimeout', 'TextDecoder', 'TextEncoder',
        'console', 'sleep', 'vars', 'gatehouse', 'Deno', 'child_process', 'queryOutput'];
      const blocked = ['require', 'module', 'exports', 'process', 'Buffer', 'fs', 'path', 'net', 'http', 'fetch', 'SharedArrayBuffer',
        'WebAssembly', 'global', '__dirname', '__filename', 'WebSocket', 'EventSource', 'XMLHttpRequest', 'connect', 'caches', 'navigator', 'LOADER', 'env'];
      return { missing: allowed.filter((n) => globalThis[n] === undefined), present: blocked.filter((n) => globalThis[n] !== undefined) };`);
    expect(out.s.result).toEqual({ missing: [], present: [] });
  });

  it('prototype pollution does not reach the next script', async () => {
    const first = await run('Object.prototype.polluted = "yes"; Array.prototype.push = () => 0; globalThis.leak = 1; return [].polluted;');
    expect(first.s.result).toBe('yes');
    const second = await run('const a = []; a.push(1); return { polluted: ({}).polluted ?? null, leak: typeof leak, len: a.length };');
    expect(second.s.result).toEqual({ polluted: null, leak: 'undefined', len: 1 });
  });

  it('two concurrent scripts cannot see each other', async () => {
    const a = run('globalThis.secretA = "alpha"; await sleep(800); return typeof secretB;');
    const b = run('globalThis.secretB = "beta"; await sleep(800); return typeof secretA;');
    const [ra, rb] = await Promise.all([a, b]);
    expect(ra.s.result).toBe('undefined');
    expect(rb.s.result).toBe('undefined');
  });

  it('while(true){} is stopped by the CPU limit with a Sandbox error, and the gateway keeps serving', async () => {
    await setPolicy({ script: { ...SCRIPT_ON, cpuMs: 200 } });
    const out = await run('while (true) {}');
    expect(out.r.isError).toBe(true);
    expect(out.s.error?.message).toMatch(/^Sandbox error: CPU limit exceeded/);
    const caught = await run('for (;;) { try { while (true) {} } catch (e) { } }');
    expect(caught.s.error?.message).toMatch(/^Sandbox error: CPU limit exceeded/);
    const recursion = await run('function f() { Promise.resolve().then(f); } f(); await sleep(50000); return 1;', { timeout_ms: 60_000 });
    expect(recursion.s.error?.message).toMatch(/^Sandbox error: CPU limit exceeded|^Sandbox error: Execution timeout/);
    expect((await run('return 7')).s.result).toBe(7);
    await setPolicy({});
  });
});

describe('subprocesses', () => {
  it('without a subprocess section a script may not start anything', async () => {
    await setPolicy({ script: { enabled: true } });
    const out = await run('try { await new Deno.Command("ls").output(); } catch (e) { return e.message; }');
    expect(out.s.result).toBe('subprocess: internal error — no subprocess config available');
    await setPolicy({});
  });

  it('Deno.Command, child_process.exec and gatehouse.exec return the documented shapes', async () => {
    await setPolicy({ shell: { enabled: true, allow: ['/^grep -c FAIL report\\.txt$/'] } });
    const out = await run(`
      const d = await new Deno.Command('cat', { args: ['report.txt'] }).output();
      const c = await child_process.exec('grep -c FAIL report.txt');
      const b = await child_process.exec('grep -c FAIL report.txt', { encoding: 'buffer' });
      const g = await gatehouse.exec('ls', ['-a']);
      const sync = (() => { try { new Deno.Command('ls').outputSync(); } catch (e) { return String(e); } })();
      const spawn = (() => { try { new Deno.Command('ls').spawn(); } catch (e) { return String(e); } })();
      const typeErrs = [];
      for (const f of [() => new Deno.Command(1), () => new Deno.Command('ls', { args: 'x' }), () => child_process.exec(1)]) {
        try { await f(); } catch (e) { typeErrs.push(e.name + ': ' + e.message); }
      }
      return {
        d: { code: d.code, success: d.success, signal: d.signal, isBytes: d.stdout instanceof Uint8Array, text: new TextDecoder().decode(d.stdout), errBytes: d.stderr instanceof Uint8Array },
        c, bIsBytes: b.stdout instanceof Uint8Array,
        g: { keys: Object.keys(g).sort(), exit: g.exit_code, hasReport: g.stdout.includes('report.txt') },
        sync, spawn, typeErrs,
      };`);
    expect(out.r.isError, out.t).toBeFalsy();
    const r = out.s.result;
    expect(r.d).toEqual({ code: 0, success: true, signal: null, isBytes: true, text: 'ok 1\nFAIL test_two\nok 3\nFAIL test_four\n', errBytes: true });
    expect(r.c).toEqual({ code: 0, success: true, stdout: '2\n', stderr: '' });
    expect(r.bIsBytes).toBe(true);
    expect(r.g.exit).toBe(0);
    expect(r.g.hasReport).toBe(true);
    expect(r.g.keys).toEqual(
      expect.arrayContaining(['stdout', 'stderr', 'exit_code', 'timed_out', 'stdout_truncated', 'stderr_truncated', 'elapsed_ms', 'job_id', 'artifact_handle']),
    );
    expect(r.sync).toBe('Error: Deno.Command.outputSync() is not supported; use output() instead');
    expect(r.spawn).toBe('Error: Deno.Command.spawn() is not yet supported; use output() instead');
    expect(r.typeErrs).toEqual([
      'TypeError: Deno.Command: command must be a string',
      'TypeError: Deno.Command: args must be an array',
      'TypeError: child_process.exec: command must be a string',
    ]);
    expect(out.s.subprocesses.count).toBe(4);
  });

  it('gatehouse.exec takes cwd, env, stdin and timeoutMs like execute', async () => {
    const out = await run(`
      const piped = await gatehouse.exec('cat', [], { stdin: 'piped in' });
      const inSub = await gatehouse.exec('pwd', [], { cwd: 'sub' });
      const tz = await gatehouse.exec('date', ['+%Z'], { env: { TZ: 'UTC' } });
      const slow = await gatehouse.exec('sleep', ['30'], { timeoutMs: 500 });
      return { piped: piped.stdout, sub: inSub.stdout.trim().endsWith('/sub'), tz: tz.stdout, slow: { timedOut: slow.timed_out, exit: slow.exit_code } };`);
    expect(out.r.isError, out.t).toBeFalsy();
    expect(out.s.result).toEqual({ piped: 'piped in', sub: true, tz: 'UTC\n', slow: { timedOut: true, exit: null } });
  });

  it('denied subprocesses fail with the documented messages; the shell-string rules decide child_process.exec', async () => {
    await setPolicy({});
    const out = await run(`
      const msgs = [];
      for (const f of [() => new Deno.Command('curl', { args: ['http://127.0.0.1:1'] }).output(), () => child_process.exec('ls; id')]) {
        try { await f(); msgs.push('ran'); } catch (e) { msgs.push(e.message + ' | ' + e.reason); }
      }
      return msgs;`);
    const [curl, shell] = out.s.result as string[];
    expect(curl).toMatch(
      /^subprocess\.command_output denied by policy: 'curl' is not allowed \| executable: Executable "curl" is not in the allowed executables list/,
    );
    expect(shell).toMatch(/^subprocess\.exec denied by policy: 'ls; id' is not allowed \| shell: /);
  });

  it('OPA decides with the subprocess input document; an unreachable evaluator is a policy error', async () => {
    opa.set('mcp/subprocess', { decide: (input) => ({ allow: (input as { args: string[] }).args[0] !== '-R' }) });
    await setPolicy({ opa: { mode: 'any', evaluators: [{ url: opa.url, policyPath: 'mcp/subprocess' }], timeoutMs: 2_000 } });
    const before = opa.requests.length;
    const out = await run(`
      const ok = await new Deno.Command('ls', { args: ['-a'], cwd: 'sub' }).output();
      let denied; try { await new Deno.Command('ls', { args: ['-R'] }).output(); } catch (e) { denied = e.message; }
      return { ok: ok.code, denied };`);
    expect(out.s.result).toEqual({ ok: 0, denied: "subprocess.command_output denied by policy: 'ls' is not allowed" });
    const inputs = opa.requests.slice(before).map((q) => q.input as Record<string, unknown>);
    expect(inputs[0]).toMatchObject({ operation: 'command_output', command: 'ls', args: ['-a'], cwd: 'sub' });
    expect(inputs[0]).not.toHaveProperty('env');
    expect(inputs[1]).not.toHaveProperty('cwd');

    await setPolicy({ opa: { mode: 'any', evaluators: [{ url: 'http://127.0.0.1:1', policyPath: 'mcp/subprocess' }], timeoutMs: 1_000 } });
    const broken = await run('try { await new Deno.Command("ls").output(); } catch (e) { return e.message; }');
    expect(broken.s.result).toMatch(/^subprocess\.command_output: policy error: OPA request failed/);
    await setPolicy({});
  });

  it('child_process.exec is always a shell string: with shell strings off even a simple one is denied (gatehouse.exec without args is decided like execute)', async () => {
    await setPolicy({});
    const out = await run(`
      let cp; try { await child_process.exec('echo hi'); cp = 'ran'; } catch (e) { cp = e.message + ' | ' + e.reason; }
      const g = await gatehouse.exec('echo hi');
      return { cp, g: g.stdout };`);
    expect(out.s.result.cp).toMatch(/^subprocess\.exec denied by policy: 'echo hi' is not allowed \| shell: /);
    expect(out.s.result.g).toBe('hi\n');
  });

  it('child_process.exec gives OPA the exec input document: /bin/sh, ["-c", string], env only when given', async () => {
    opa.set('mcp/subprocess', { decide: (input) => ({ allow: !(input as { args: string[] }).args.join(' ').includes('forbidden') }) });
    await setPolicy({
      shell: { enabled: true, allow: [] },
      opa: { mode: 'any', evaluators: [{ url: opa.url, policyPath: 'mcp/subprocess' }], timeoutMs: 2_000 },
    });
    const before = opa.requests.length;
    const out = await run(`
      const simple = await child_process.exec('echo hello', { env: { LANG: 'C' } });
      const piped = await child_process.exec('echo hello | tr a-z A-Z');
      let denied; try { await child_process.exec('echo forbidden'); } catch (e) { denied = e.message; }
      return { simple: simple.stdout, piped: piped.stdout, denied };`);
    expect(out.s.result).toEqual({ simple: 'hello\n', piped: 'HELLO\n', denied: "subprocess.exec denied by policy: 'echo forbidden' is not allowed" });
    const inputs = opa.requests.slice(before).map((q) => q.input as Record<string, unknown>);
    expect(inputs).toHaveLength(3);
    expect(inputs[0]).toMatchObject({ operation: 'exec', command: '/bin/sh', args: ['-c', 'echo hello'], env: { LANG: 'C' }, tool: 'run_script' });
    expect(inputs[0]).not.toHaveProperty('cwd');
    expect(inputs[1]).toMatchObject({ operation: 'exec', command: '/bin/sh', args: ['-c', 'echo hello | tr a-z A-Z'] });
    expect(inputs[1]).not.toHaveProperty('env');
    expect(inputs[2]).toMatchObject({ operation: 'exec', command: '/bin/sh', args: ['-c', 'echo forbidden'] });
    await setPolicy({});
  });

  it('a subprocess that cannot start fails with "subprocess: failed to execute"', async () => {
    await setPolicy({ executables: { allow: [...DEFAULT_POLICY.executables.allow, 'no-such-tool-xyz'] } });
    const out = await run(`
      try { await new Deno.Command('no-such-tool-xyz', { args: ['x'] }).output(); return 'ran'; } catch (e) { return e.message; }`);
    expect(out.s.result).toMatch(/^subprocess: failed to execute 'no-such-tool-xyz': \S/);
    await setPolicy({});
  });

  it("a subprocess passes the cwd and env stages like execute, and never sees the agent's environment", async () => {
    await setPolicy({ executables: { allow: [...DEFAULT_POLICY.executables.allow, 'printenv'] } });
    const out = await run(`
      const msgs = {};
      const attempt = async (name, f) => { try { msgs[name] = 'ran: ' + (await f()); } catch (e) { msgs[name] = e.message + ' | ' + e.reason; } };
      await attempt('traversal', async () => (await new Deno.Command('ls', { cwd: '../..' }).output()).code);
      await attempt('absolute', async () => (await new Deno.Command('ls', { cwd: '/etc' }).output()).code);
      await attempt('preload', async () => (await new Deno.Command('ls', { env: { LD_PRELOAD: '/tmp/x.so' } }).output()).code);
      await attempt('unlisted', async () => (await new Deno.Command('ls', { env: { SECRET_THING: '1' } }).output()).code);
      await attempt('lang', async () => new TextDecoder().decode((await new Deno.Command('printenv', { args: ['LANG'], env: { LANG: 'C.UTF-8' } }).output()).stdout));
      await attempt('sub', async () => new TextDecoder().decode((await new Deno.Command('ls', { cwd: 'sub', args: ['-a'] }).output()).stdout).split('\\n').filter(Boolean).join(','));
      const all = new TextDecoder().decode((await new Deno.Command('printenv').output()).stdout);
      return { msgs, envNames: all.split('\\n').filter(Boolean).map((l) => l.split('=')[0]), agentToken: all.includes('GATEHOUSE_AGENT_TOKEN') };`);
    expect(out.r.isError, out.t).toBeFalsy();
    const r = out.s.result;
    expect(r.msgs.traversal).toMatch(/^subprocess\.command_output denied by policy: 'ls' is not allowed \| cwd: /);
    expect(r.msgs.absolute).toMatch(/^subprocess\.command_output denied by policy: 'ls' is not allowed \| cwd: /);
    expect(r.msgs.preload).toMatch(
      /^subprocess\.command_output denied by policy: 'ls' is not allowed \| env: Environment variable "LD_PRELOAD" is not allowed/,
    );
    expect(r.msgs.unlisted).toMatch(
      /^subprocess\.command_output denied by policy: 'ls' is not allowed \| env: Environment variable "SECRET_THING" is not in the allowed list/,
    );
    expect(r.msgs.lang).toBe('ran: C.UTF-8\n');
    expect(r.msgs.sub).toBe('ran: .,..');
    expect(r.agentToken).toBe(false);
    expect(r.envNames).not.toContain('GATEHOUSE_AGENT_TOKEN');
    expect(r.envNames).toContain('PATH');
    await setPolicy({});
  });

  it('a script that times out has its running subprocess killed', async () => {
    const sleeping = () =>
      execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
        .split('\n')
        .some((l) => /^(\S*\/)?sleep 43$/.test(l.trim()));
    const started = Date.now();
    const pending = run('await gatehouse.exec("sleep", ["43"], { timeoutMs: 60000 }); return "finished";', { timeout_ms: 4_000 });
    let seen = false;
    while (!seen && Date.now() - started < 20_000) {
      seen = sleeping();
      if (!seen) await new Promise((r) => setTimeout(r, 200));
    }
    expect(seen).toBe(true);
    const out = await pending;
    expect(out.s.status).toBe('timeout');
    expect(out.s.error?.message).toBe('Sandbox error: Execution timeout');
    const t1 = Date.now();
    while (sleeping() && Date.now() - t1 < 15_000) await new Promise((r) => setTimeout(r, 200));
    expect(sleeping()).toBe(false);
    expect(Date.now() - started).toBeLessThan(40_000);
  }, 60_000);

  it('nothing a script left running starts a subprocess after it ended (returned or timed out)', async () => {
    // A timer armed before returning, and a loop still awaiting when the wall timeout hits: the
    // isolate is not stopped by either. Two things refuse what they ask for afterwards — the
    // platform ends the host stub with the call, and the host refuses once the script has ended —
    // so this fails only if both are gone.
    const returned = await run('setTimeout(() => { gatehouse.exec("touch", ["late-after-return"]).catch(() => {}); }, 300); return "bye";');
    expect(returned.s.result).toBe('bye');
    const timedOut = await run('let i = 0; for (;;) { await gatehouse.exec("touch", ["late-loop-" + i]); i++; await sleep(200); }', { timeout_ms: 1_500 });
    expect(timedOut.s.status).toBe('timeout');
    const touchedAtEnd = readdirSync(root).filter((f) => f.startsWith('late-loop-')).length;
    expect(touchedAtEnd).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(existsSync(join(root, 'late-after-return'))).toBe(false);
    expect(readdirSync(root).filter((f) => f.startsWith('late-loop-')).length).toBe(touchedAtEnd);
    const rows = await auditRows();
    const afterEnd = rows.filter((r) => r.parentJobId === returned.s.scriptId);
    expect(afterEnd).toEqual([]);
  }, 60_000);

  it("a subprocess's output in the script is the capped inline copy, the whole of it in its artifact; a timed-out one has code -1", async () => {
    await setPolicy({ limits: { ...DEFAULT_POLICY.limits, inlineOutputBytes: 1_000, defaultTimeoutMs: 1_000 } });
    const out = await run(`
      const g = await gatehouse.exec('seq', ['1', '5000']);
      const d = await new Deno.Command('seq', { args: ['1', '5000'] }).output();
      const hits = await gatehouse.queryOutput(g.artifact_handle, ['4999'], { contextLines: 0 });
      const slow = await new Deno.Command('sleep', { args: ['5'] }).output();
      return { inline: g.stdout.length, truncated: g.stdout_truncated, bytes: d.stdout.byteLength, hits: hits.excerpts.map((e) => e.content), slow: { code: slow.code, success: slow.success, signal: slow.signal } };`);
    expect(out.r.isError, out.t).toBeFalsy();
    const r = out.s.result;
    expect(r.inline).toBeLessThanOrEqual(1_000);
    expect(r.truncated).toBe(true);
    expect(r.bytes).toBeLessThanOrEqual(1_000);
    expect(r.hits).toEqual(['4999']);
    expect(r.slow).toEqual({ code: -1, success: false, signal: null });
    await setPolicy({});
  }, 60_000);

  it('policy rules decide subprocesses too: a run_script-only deny rule, and an ask rule that a script cannot wait for', async () => {
    await setPolicy({
      rules: [
        { pattern: ['git', 'push'], decision: 'ask', reason: 'pushes need a person' },
        { pattern: ['rm'], decision: 'deny', reason: 'scripts do not delete', tools: ['run_script'] },
      ],
    });
    writeFileSync(join(root, 'keep-me.txt'), 'x');
    const out = await run(`
      const msgs = {};
      const attempt = async (name, f) => { try { msgs[name] = 'ran: ' + (await f()); } catch (e) { msgs[name] = e.message + ' | ' + (e.reason ?? e.code); } };
      await attempt('rm', async () => (await new Deno.Command('rm', { args: ['keep-me.txt'] }).output()).code);
      await attempt('push', async () => (await new Deno.Command('git', { args: ['push', 'origin', 'main'] }).output()).code);
      return msgs;`);
    const m = out.s.result as Record<string, string>;
    expect(m.rm).toBe("subprocess.command_output denied by policy: 'rm' is not allowed | rules: Denied by rule 2: scripts do not delete");
    expect(m.push).toMatch(
      /^subprocess\.command_output denied by policy: 'git' is not allowed \| rules: Approval required by rule 1: pushes need a person\. A script's subprocess cannot wait for a person's approval/,
    );
    expect(existsSync(join(root, 'keep-me.txt'))).toBe(true);
    // The deny rule names run_script only: the same command through execute is decided by the rest of the policy.
    const viaExecute = await client.callTool({ name: 'policy_check', arguments: { command: 'rm', args: ['keep-me.txt'] } });
    expect((viaExecute.structuredContent as { allowed: boolean }).allowed).toBe(true);
    await setPolicy({});
  });

  it('caps the number of subprocesses per script', async () => {
    await setPolicy({ script: { ...SCRIPT_ON, subprocess: { maxCount: 2, maxTotalMs: 120_000 } } });
    const out = await run(
      'const r = []; for (let i = 0; i < 3; i++) { try { await gatehouse.exec("true", []); r.push("ran"); } catch (e) { r.push(e.message); } } return r;',
    );
    expect(out.s.result).toEqual(['ran', 'ran', 'subprocess: limit reached — a script may start at most 2 subprocesses (script.subprocess.maxCount)']);
    await setPolicy({});
  });

  it('caps the total subprocess time per script', async () => {
    await setPolicy({ script: { ...SCRIPT_ON, subprocess: { maxCount: 25, maxTotalMs: 1_000 } } });
    const out = await run(`
      const first = await gatehouse.exec('sleep', ['5']);
      let second; try { await gatehouse.exec('true', []); second = 'ran'; } catch (e) { second = e.message; }
      return { timedOut: first.timed_out, second };`);
    expect(out.s.result.timedOut).toBe(true);
    expect(out.s.result.second).toMatch(
      /^subprocess: limit reached — this script's subprocesses already ran \d+ ms of the 1000 ms allowed \(script\.subprocess\.maxTotalMs\)$/,
    );
    await setPolicy({});
  });

  it('queryOutput needs the artifacts:read scope, like query_output', async () => {
    const execOnly = await gw.mcp(TEAM, ['execute']);
    const r = await execOnly.callTool(
      {
        name: 'run_script',
        arguments: {
          code: `
      const g = await gatehouse.exec('ls', []);
      try { await gatehouse.queryOutput(g.artifact_handle, ['report']); return 'read'; } catch (e) { return e.message; }`,
        },
      },
      undefined,
      { timeout: 60_000 },
    );
    await execOnly.close();
    expect((r.structuredContent as { result: string }).result).toMatch(/^queryOutput: insufficient_scope/);
    const withScope = await run(
      `const g = await gatehouse.exec('ls', []); return (await gatehouse.queryOutput(g.artifact_handle, ['report'], { contextLines: 0 })).excerpts.map((e) => e.content);`,
    );
    expect(withScope.s.result).toEqual(['report.txt']);
  });

  it("queryOutput reads only its own team's artifacts", async () => {
    const OTHER = 'scr-other';
    await gw.putPolicy(OTHER, { ...DEFAULT_POLICY, script: SCRIPT_ON });
    const other = await gw.mcp(OTHER, ['execute', 'artifacts:read']);
    let handle: string;
    try {
      const r = await other.callTool({ name: 'run_script', arguments: { code: 'console.log("other team secret"); return 1;' } });
      handle = (r.structuredContent as { artifactHandle: string }).artifactHandle;
      expect(handle).toBeTruthy();
      const own = await other.callTool({
        name: 'run_script',
        arguments: { code: `return (await queryOutput(${JSON.stringify(handle)}, ['secret'], { contextLines: 0 })).excerpts.map((e) => e.content);` },
      });
      expect((own.structuredContent as { result: unknown }).result).toEqual(['other team secret']);
    } finally {
      await other.close();
    }
    const out = await run(`try { return await queryOutput(${JSON.stringify(handle)}, ['secret']); } catch (e) { return e.message; }`);
    expect(out.s.result).toBe(`queryOutput: artifact "${handle}" not found (it may have expired)`);
  });

  it('writes one audit row per subprocess, linked to the script row', async () => {
    const out = await run(
      'const a = await gatehouse.exec("ls", []); const b = await gatehouse.exec("echo", ["hi"]); try { await gatehouse.exec("curl", []); } catch {} return [a, b].map((r) => ({ job: r.job_id, artifact: r.artifact_handle }));',
    );
    const rows = await auditRows();
    const scriptRow = rows.find((r) => r.jobId === out.s.scriptId && r.parentJobId === null);
    expect(scriptRow).toBeDefined();
    expect(scriptRow!.exitStatus).toBe('success');
    expect(JSON.stringify(scriptRow!.command)).not.toContain('gatehouse.exec');
    expect(scriptRow!.command).toMatchObject({ mode: 'script', codeBytes: expect.any(Number), codeSha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const children = rows.filter((r) => r.parentJobId === out.s.scriptId);
    expect(children.map((c) => c.decision).sort()).toEqual(['allowed', 'allowed', 'denied']);
    // Each subprocess is its own job with its own artifact, and its row names that job.
    const ran = out.s.result as Array<{ job: string; artifact: string }>;
    expect(new Set(ran.map((r) => r.job)).size).toBe(2);
    expect(new Set(ran.map((r) => r.artifact)).size).toBe(2);
    expect(ran.every((r) => r.job !== out.s.scriptId && r.artifact && r.artifact !== out.s.artifactHandle)).toBe(true);
    expect(
      children
        .filter((c) => c.decision === 'allowed')
        .map((c) => c.jobId)
        .sort(),
    ).toEqual(ran.map((r) => r.job).sort());
  });

  it('a 2026-07-28 client runs scripts, and closing the call kills its running subprocess', async () => {
    const c = new ClientV2({ name: 'script-2026', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await c.connect(
      new TransportV2(new URL(gw.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${await gw.token({ team: TEAM, scopes: ['execute'] })}` } } }),
    );
    try {
      const ok = await c.callTool(
        { name: 'run_script', arguments: { code: 'const r = await gatehouse.exec("ls", []); return r.exit_code;' } },
        { timeout: 60_000 },
      );
      expect((ok.structuredContent as { result: number }).result).toBe(0);

      const ctl = new AbortController();
      const pending = c.callTool(
        { name: 'run_script', arguments: { code: 'await gatehouse.exec("sleep", ["47"], { timeoutMs: 60000 }); return "finished";' } },
        { timeout: 60_000, signal: ctl.signal },
      );
      pending.catch(() => undefined);
      // The subprocess really runs (the agent's sandbox is a process on this host)…
      const sleeping = () =>
        execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
          .split('\n')
          .some((l) => /^(\S*\/)?sleep 47$/.test(l.trim()));
      const t0 = Date.now();
      while (!sleeping() && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 200));
      expect(sleeping()).toBe(true);
      const scriptRowsBefore = (await auditRows()).filter((r) => r.parentJobId === null).length;
      ctl.abort();
      await expect(pending).rejects.toThrow();
      // …and closing the call kills it, long before its 47 s are up; the script's row says cancelled.
      const t1 = Date.now();
      while (sleeping() && Date.now() - t1 < 15_000) await new Promise((r) => setTimeout(r, 200));
      expect(sleeping()).toBe(false);
      let cancelled: Record<string, any> | undefined;
      while (!cancelled && Date.now() - t1 < 15_000) {
        const rows = (await auditRows()).filter((r) => r.parentJobId === null);
        if (rows.length > scriptRowsBefore) cancelled = rows.find((r) => r.exitStatus === 'cancelled');
        if (!cancelled) await new Promise((r) => setTimeout(r, 300));
      }
      expect(cancelled?.reason).toMatch(/^Sandbox error: Execution cancelled by the client/);
    } finally {
      await c.close();
    }
  }, 60_000);

  it('sends progress per subprocess on one increasing counter', async () => {
    const progress: Array<{ progress: number; message?: string }> = [];
    const r = await client.callTool(
      { name: 'run_script', arguments: { code: 'await gatehouse.exec("true", []); await gatehouse.exec("ls", []); return 1;' } },
      undefined,
      { timeout: 60_000, onprogress: (p) => progress.push(p) },
    );
    expect((r.structuredContent as { result: number }).result).toBe(1);
    expect(progress.some((p) => p.message?.startsWith('#1 true'))).toBe(true);
    expect(progress.some((p) => p.message?.startsWith('#2 ls'))).toBe(true);
    for (let i = 1; i < progress.length; i++) expect(progress[i].progress).toBeGreaterThan(progress[i - 1].progress);
  });
});

describe('Dynamic Workers in flight per request (4 in a Worker request)', () => {
  it('a JSON-RPC batch of five run_script calls runs four at once and refuses the fifth clearly', async () => {
    const answers = await batchOfScripts(gw, TEAM, 5);
    const ran = answers.filter((a) => !a.result.isError);
    const refused = answers.filter((a) => a.result.isError);
    // The batch's calls run concurrently (each sleeps 1.5 s): four isolates in flight, the fifth refused.
    expect(ran).toHaveLength(4);
    for (const a of ran) expect(a.result.structuredContent.result).toBe(a.id);
    expect(refused).toHaveLength(1);
    expect(refused[0].result.structuredContent.error).toEqual({
      code: 'limit_reached',
      message:
        'Error: too many scripts in one request: Cloudflare allows 4 Dynamic Workers in flight per Worker request and this request already runs 4 run_script calls; send this call in its own request (or at most 4 run_script calls per JSON-RPC batch)',
    });
    // Each request has its own four: the refused call runs when sent on its own.
    const again = await run(`return ${refused[0].id}`);
    expect(again.s.result).toBe(refused[0].id);
  });
});
