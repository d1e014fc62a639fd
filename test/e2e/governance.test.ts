/**
 * Governance end to end: team policy decisions through MCP, runtime_execute (args and code mode,
 * output modes, the 500-char line cap), audit rows, concurrency limit, OPA through the gateway,
 * and who may change policy. Real `wrangler dev`, a real agent (bubblewrap here so this file
 * does not depend on runsc; gVisor is covered by agent.test.ts), the official MCP client.
 * The OPA server is a small OPA-compatible loopback server written for the tests (no `opa`
 * binary is installable here).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, startAgent, startGateway, type AgentProcess, type Gateway, testSandbox } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { startOpaServer, type OpaServer } from '../support/opa-server.ts';

const SANDBOX = testSandbox();

const TEAM = 'gov';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;
let opa: OpaServer;

const text = (r: Record<string, unknown>) => (r.content as { text: string }[])[0]?.text ?? '';

async function admin(method: string, path: string, body?: unknown, scopes = ['admin']) {
  const token = await gw.token({ team: TEAM, scopes });
  return fetch(`${gw.url}/admin/v1${path}`, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
  });
}
const setPolicy = (patch: Record<string, unknown>) => gw.putPolicy(TEAM, { ...DEFAULT_POLICY, ...patch });
async function call(name: string, args: Record<string, unknown>) {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
  return { r, s: r.structuredContent as Record<string, any>, t: text(r) };
}

beforeAll(async () => {
  opa = await startOpaServer();
  gw = await startGateway();
  root = mkdtempSync(join(tmpdir(), 'gatehouse-gov-'));
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: SANDBOX, capacity: 4, agentId: 'gov-agent' });
  await agent.ready;
  client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
}, 120_000);

afterAll(async () => {
  await client?.close();
  await agent?.stop();
  await gw?.stop();
  await opa?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('default policy through MCP', () => {
  it('allows a common tool and denies shell strings with an actionable reason', async () => {
    const ok = await call('execute', { command: 'ls', args: ['-a'] });
    expect(ok.r.isError).toBeFalsy();
    const denied = await call('execute', { command: 'ls; rm -rf /' });
    expect(denied.r.isError).toBe(true);
    expect(denied.t).toContain('shell.enabled = false');
  });

  it('denies known escapes as tool errors, not transport errors', async () => {
    for (const args of [
      ['find', '.', '-exec', 'sh', '-c', 'id', ';'],
      ['git', '-c', 'core.pager=sh', 'log'],
      ['tar', '--checkpoint-action=exec=sh', '-cf', 'x.tar', '.'],
      ['python3', '-c', 'print(1)'],
    ]) {
      const r = await call('execute', { command: args[0], args: args.slice(1) });
      expect(r.r.isError, args.join(' ')).toBe(true);
      expect(r.t).toMatch(/policy denied/);
    }
  });

  it('reports the reference messages for runtime, executable, cwd and timeout stages', async () => {
    expect((await call('runtime_execute', { runtime: 'shell', args: ['-c', 'true'] })).t).toContain('Runtime "shell" is not in the allowed runtimes list');
    expect((await call('runtime_execute', { runtime: 'python', executable: 'node', args: ['x'] })).t).toContain(
      'Executable "node" is not compatible with runtime "python"',
    );
    expect((await call('execute', { command: 'curl', args: ['http://127.0.0.1'] })).t).toContain('Executable "curl" is not in the allowed executables list');
    expect((await call('execute', { command: 'ls', args: [], cwd: '../..' })).t).toContain(
      'Relative CWD "../.." contains path traversal or absolute path components',
    );
    expect((await call('execute', { command: 'ls', args: [], env: { LD_PRELOAD: '/tmp/x.so' } })).t).toMatch(/LD_PRELOAD/);
  });

  it('clamps a timeout above the maximum and says so', async () => {
    const r = await call('execute', { command: 'true', args: [], timeout_ms: 10_000_000 });
    expect(r.r.isError).toBeFalsy();
    expect(r.t).toMatch(/clamp/i);
  });

  it('policy_check explains a decision without running anything', async () => {
    const r = await call('policy_check', { command: 'find', args: ['.', '-exec', 'id', ';'] });
    expect(r.s).toMatchObject({ allowed: false, stage: 'arguments' });
    const ok = await call('policy_check', { command: 'git', args: ['status'] });
    expect(ok.s).toMatchObject({ allowed: true });
  });
});

describe('runtime_execute', () => {
  const py = hasCommand('python3');
  const cc = hasCommand('cc');
  it.skipIf(!py && process.env.CI !== 'true')('minimal mode is small and carries an artifact handle', async () => {
    const r = await call('runtime_execute', { runtime: 'python', code: 'for i in range(1000):\n    print("row", i)\n' });
    expect(r.r.isError).toBeFalsy();
    expect(r.s).toMatchObject({ status: 'success', exitCode: 0, outputLines: 1000 });
    expect(r.s.artifactHandle).toMatch(/^art_/);
    expect(r.s.stdoutSummary).toBeUndefined();
    expect(JSON.stringify(r.s).length).toBeLessThanOrEqual(300);
    const q = await call('query_output', { artifactHandle: r.s.artifactHandle, queryTerms: ['row 500'], contextLines: 0 });
    expect(q.s.excerpts[0]).toMatchObject({ lineStart: 501, lineEnd: 501, content: 'row 500', source: 'stdout' });
  });

  it.skipIf(!py && process.env.CI !== 'true')('summary gives head and tail with every line capped at 500 chars; intent only matching lines', async () => {
    const code = 'print("x" * 2000)\nfor i in range(300):\n    print("line", i)\nprint("FATAL: boom")\n';
    const s = await call('runtime_execute', { runtime: 'python', code, outputMode: 'summary', maxResponseLines: 10 });
    const lines = String(s.s.stdoutSummary).split('\n');
    expect(lines[0]).toBe('x'.repeat(500) + ' [truncated]');
    expect(lines).toContain('FATAL: boom');
    expect(lines).not.toContain('line 150');
    const i = await call('runtime_execute', { runtime: 'python', code, outputMode: 'intent', queryTerms: ['FATAL'], contextLines: 0 });
    expect(i.s.stdoutSummary).toBeUndefined();
    expect(i.s.excerpts).toEqual([{ lineStart: 302, lineEnd: 302, content: 'FATAL: boom', source: 'stdout' }]);
  });

  it.skipIf(!py && process.env.CI !== 'true')('a runtime error is a failure of the run phase', async () => {
    const r = await call('runtime_execute', { runtime: 'python', code: 'raise SystemExit(4)\n' });
    expect(r.s).toMatchObject({ status: 'failure', exitCode: 4 });
    expect(r.s.phase ?? 'run').toBe('run');
  });

  it.skipIf(!cc && process.env.CI !== 'true')('a compile error is reported as such (phase build), distinct from a runtime error', async () => {
    const bad = await call('runtime_execute', { runtime: 'c', code: 'int main( { return 0; }\n', outputMode: 'summary' });
    expect(bad.s).toMatchObject({ status: 'failure', phase: 'build' });
    expect(String(bad.s.stderrSummary)).toMatch(/error/);
    const good = await call('runtime_execute', {
      runtime: 'c',
      code: '#include <stdio.h>\nint main(void){puts("hi from c");return 2;}\n',
      outputMode: 'summary',
    });
    expect(good.s).toMatchObject({ status: 'failure', exitCode: 2, phase: 'run' });
    expect(String(good.s.stdoutSummary)).toContain('hi from c');
  });

  it('list_runtimes shows what the team may use and what the agent has', async () => {
    const r = await call('list_runtimes', {});
    const python = (r.s.runtimes as { name: string; allowed: boolean; agents: { version: string }[] }[]).find((x) => x.name === 'python')!;
    expect(python.allowed).toBe(true);
    if (py) expect(python.agents[0].version).toMatch(/\d+\.\d+/);
  });
});

describe('policy administration', () => {
  it('refuses a policy change from a non-admin token', async () => {
    const r = await admin('PUT', '/policy', DEFAULT_POLICY, ['execute']);
    expect(r.status).toBe(403);
  });

  it('refuses an invalid policy with the failing path', async () => {
    const r = await admin('PUT', '/policy', { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: -5 } });
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('limits.maxTimeoutMs');
  });

  it('enforces the team concurrency limit with a clear error after the queue wait', async () => {
    await setPolicy({ shell: { enabled: false, allow: [] }, limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 1, queueWaitMs: 300 } });
    const slow = call('execute', { command: 'sleep', args: ['3'] });
    await new Promise((r) => setTimeout(r, 800));
    const second = await call('execute', { command: 'true', args: [] });
    expect(second.r.isError).toBe(true);
    expect(second.t).toContain('Concurrency limit reached (1/1 active jobs)');
    expect((await slow).s.exit_code).toBe(0);
    await setPolicy({});
  });

  it('asks OPA evaluators and fails closed (mode any / all)', async () => {
    opa.set('gate/allow', { allow: true });
    opa.set('gate/deny', { allow: false });
    opa.set('gate/broken', { status: 500 });
    const evaluators = (paths: string[]) => paths.map((p) => ({ url: opa.url, policyPath: p }));
    await setPolicy({ opa: { mode: 'any', evaluators: evaluators(['gate/deny', 'gate/allow']), timeoutMs: 2000 } });
    expect((await call('execute', { command: 'true', args: [] })).r.isError).toBeFalsy();
    const input = opa.requests.at(-1)!.input as Record<string, unknown>;
    expect(input).toMatchObject({ operation: 'command_output', command: 'true', args: [], team: TEAM });
    await setPolicy({ opa: { mode: 'all', evaluators: evaluators(['gate/allow', 'gate/deny']), timeoutMs: 2000 } });
    expect((await call('execute', { command: 'true', args: [] })).r.isError).toBe(true);
    await setPolicy({ opa: { mode: 'any', evaluators: evaluators(['gate/broken']), timeoutMs: 2000 } });
    const broken = await call('execute', { command: 'true', args: [] });
    expect(broken.r.isError).toBe(true);
    expect(broken.t).toContain('OPA returned HTTP 500');
    await setPolicy({});
  });

  it('writes one audit row per call, allowed and denied, with secrets redacted', async () => {
    await call('execute', { command: 'echo', args: ['audited'], env: { LANG: 'C.UTF-8' } });
    await call('execute', { command: 'curl', args: ['--header', 'Authorization: Bearer sk-live-abcdef0123456789'] });
    const r = await admin('GET', '/audit?limit=5');
    expect(r.status).toBe(200);
    const { entries } = (await r.json()) as { entries: Record<string, unknown>[] };
    const json = JSON.stringify(entries);
    expect(json).not.toContain('sk-live-abcdef0123456789');
    const denied = entries.find((e) => e.decision === 'denied' && JSON.stringify(e).includes('curl'))!;
    expect(denied).toBeTruthy();
    expect(String(denied.reason)).toContain('not in the allowed executables list');
    const allowed = entries.find((e) => e.decision === 'allowed' && JSON.stringify(e).includes('audited'))!;
    expect(allowed).toMatchObject({ tool: 'execute' });
    expect(JSON.stringify(allowed)).toMatch(/exit 0/);
    const deniedOnly = (await (await admin('GET', '/audit?decision=denied&limit=50')).json()) as { entries: { decision: string }[] };
    expect(deniedOnly.entries.every((e) => e.decision === 'denied')).toBe(true);
  });
});
