/**
 * Strict input at the real boundaries (wrangler dev, the official MCP client, the admin API): the
 * inputs that used to be silently dropped — `arg` for `args`, `timeout` for `timeout_ms`,
 * `timeout_ms` on runtime_execute, a policy typo `shel` — are refused, naming the key and the
 * likely one, and change nothing. (The schemas alone: test/policy/strict-input.test.ts.)
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { startGateway, type Gateway } from '../e2e/harness.ts';

const TEAM = 'strictin';
let gw: Gateway;
let client: Client;

beforeAll(async () => {
  gw = await startGateway();
  client = await gw.mcp(TEAM, ['execute']);
}, 120_000);
afterAll(async () => {
  await client?.close();
  await gw?.stop();
});

const text = (r: Record<string, unknown>) => ((r.content as { text: string }[] | undefined) ?? []).map((c) => c.text).join('\n');
async function admin(method: string, path: string, body?: unknown) {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method, body: body === undefined ? undefined : JSON.stringify(body), headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
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
  it('runtime_execute with "timeout_ms" is an error naming "timeoutMs"', async () => {
    const r = await client.callTool({ name: 'runtime_execute', arguments: { runtime: 'python', args: ['x.py'], timeout_ms: 5 } });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('"timeout_ms" (did you mean "timeoutMs"?)');
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
