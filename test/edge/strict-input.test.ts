/**
 * Strict input at the real boundaries (wrangler dev, the official MCP client, the admin API): the
 * inputs that used to be silently dropped — `arg` for `args`, `timeout` for `timeout_ms`, a policy
 * typo `shel` — are refused, naming the key and the likely one, and change nothing. One spelling per
 * concept: each tool argument is also accepted in its other spelling (`timeout_ms`/`timeoutMs`,
 * `cwd`/`relativeCwd`), and really used — a real agent runs the jobs. (The schemas alone:
 * test/policy/strict-input.test.ts.)
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from '../e2e/harness.ts';

const TEAM = 'strictin';
let gw: Gateway;
let client: Client;
let agent: AgentProcess;
let root: string;

beforeAll(async () => {
  gw = await startGateway();
  root = mkdtempSync(join(tmpdir(), 'gatehouse-strictin-'));
  mkdirSync(join(root, 'sub'));
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: testSandbox(), capacity: 2 });
  await agent.ready;
  client = await gw.mcp(TEAM, ['execute']);
}, 120_000);
afterAll(async () => {
  await client?.close();
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('one spelling per concept: the other spelling is the same argument', () => {
  it('execute takes timeoutMs as timeout_ms and relativeCwd as cwd (the job really times out, in that directory)', async () => {
    const where = await client.callTool({ name: 'execute', arguments: { command: 'pwd', args: [], relativeCwd: 'sub' } });
    expect((where.structuredContent as { stdout: string }).stdout.trim()).toMatch(/\/sub$/);
    const slow = await client.callTool({ name: 'execute', arguments: { command: 'sleep', args: ['5'], timeoutMs: 1500 } });
    expect((slow.structuredContent as { timed_out: boolean }).timed_out).toBe(true);
  });
  it('runtime_execute takes timeout_ms, cwd and output_mode as timeoutMs, relativeCwd and outputMode', async () => {
    const r = await client.callTool({
      name: 'runtime_execute',
      arguments: {
        runtime: 'python',
        code: 'import os, time\nprint(os.getcwd(), flush=True)\ntime.sleep(5)',
        timeout_ms: 1500,
        cwd: 'sub',
        output_mode: 'summary',
      },
    });
    const s = r.structuredContent as { status: string; stdoutSummary?: string };
    expect(s.status, JSON.stringify(s)).toBe('timeout');
    expect(s.stdoutSummary).toMatch(/\/sub/);
  });
  it('policy_check takes exactly the arguments of the execute call it checks (stdin, placement, approval id)', async () => {
    const r = await client.callTool({
      name: 'policy_check',
      arguments: { command: 'git', args: ['status'], stdin: 'x', timeoutMs: 1000, background: true, labels: ['a'] },
    });
    expect(r.isError).toBeFalsy();
    expect((r.structuredContent as { decision: string }).decision).toBe('allow');
  });
  it("the advertised schemas name each tool's own spelling only", async () => {
    const tools = (await client.listTools()).tools;
    const keys = (n: string) => Object.keys(tools.find((t) => t.name === n)!.inputSchema.properties ?? {});
    expect(keys('execute')).toContain('timeout_ms');
    expect(keys('execute')).not.toContain('timeoutMs');
    expect(keys('runtime_execute')).toContain('timeoutMs');
    expect(keys('runtime_execute')).not.toContain('timeout_ms');
  });
});

const text = (r: Record<string, unknown>) => ((r.content as { text: string }[] | undefined) ?? []).map((c) => c.text).join('\n');
async function admin(method: string, path: string, body?: unknown) {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
  });
  return { status: r.status, json: (await r.json()) as Record<string, any> };
}

describe('unknown tool arguments are refused through MCP, before anything runs', () => {
  it('execute {"command":"ls","arg":["-l"]} is an error naming "args", not a run of `ls`', async () => {
    const r = await client.callTool({ name: 'execute', arguments: { command: 'ls', arg: ['-l'] } });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('unknown key "arg" (did you mean "args"?)');
    expect(text(r)).toContain('valid keys: command, args');
  });
  it('execute with "timeout" is an error naming "timeout_ms"', async () => {
    const r = await client.callTool({ name: 'execute', arguments: { command: 'sleep', args: ['100'], timeout: 5 } });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('"timeout" (did you mean "timeout_ms"?)');
  });
  it('both spellings of one argument in a call are an error naming both', async () => {
    const r = await client.callTool({ name: 'runtime_execute', arguments: { runtime: 'python', args: ['x.py'], timeout_ms: 500, timeoutMs: 600 } });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('"timeout_ms" and "timeoutMs" are the same argument; give one');
  });
  it('no audit row and no job come from a refused call', async () => {
    const before = await admin('GET', '/audit?limit=50');
    await client.callTool({ name: 'execute', arguments: { command: 'ls', arg: ['-l'] } });
    const after = await admin('GET', '/audit?limit=50');
    expect(after.status).toBe(200);
    expect(JSON.stringify(after.json)).toBe(JSON.stringify(before.json));
    // Control: a call that parses (and is denied by the policy) does leave a row.
    await client.callTool({ name: 'execute', arguments: { command: 'curl', args: ['http://127.0.0.1'] } });
    expect(JSON.stringify((await admin('GET', '/audit?limit=50')).json)).not.toBe(JSON.stringify(before.json));
  });
});

describe('a policy with an unknown key is refused, not stored', () => {
  it('"shel" → 400 naming its path and "shell"; the version does not move', async () => {
    const before = await admin('GET', '/policy');
    const r = await admin('PUT', '/policy', { ...DEFAULT_POLICY, shel: { enabled: true } });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain('unknown key "shel" (did you mean "shell"?)');
    const after = await admin('GET', '/policy');
    expect(after.json.version).toBe(before.json.version);
  });
  it('a nested typo names its path', async () => {
    const r = await admin('PUT', '/policy', { ...DEFAULT_POLICY, git: { repositoryProgram: 'disable' } });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain('git');
    expect(r.json.error.message).toContain('did you mean "repositoryPrograms"?');
  });
});
