/**
 * The team's script library end to end: admins push versioned scripts (admin API and the real CLI against a real
 * gateway), clients run them by name with vars through the official MCP client, a real agent runs their subprocesses,
 * and the audit log says which script and version ran. Caps and every refusal are attacked here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ROOT, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { readmeBlock } from '../cli/readme.ts';
import { SCRIPT_SOURCE_MAX_BYTES, SCRIPTS_PER_TEAM_MAX, VERSIONS_PER_SCRIPT_MAX, scriptDigest } from '../../src/contracts/scripts.ts';

const TEAM = 'lib';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;
let admin: string;

const SCRIPT_ON = { enabled: true, cpuMs: 2_000, subprocess: { maxCount: 5, maxTotalMs: 60_000 } };
const setPolicy = (script: Record<string, unknown> = {}) => gw.putPolicy(TEAM, { ...DEFAULT_POLICY, script: { ...SCRIPT_ON, ...script } });

const HELLO_V1 = "const r = await gatehouse.exec('echo', ['hello', vars.NAME]);\nreturn { said: r.stdout.trim(), frozen: Object.isFrozen(vars) };\n";
const HELLO_V2 = 'return `v2 says hi to ${vars.NAME}`;\n';

async function adminApi(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, any> }> {
  const res = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${admin}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

async function run(args: Record<string, unknown>) {
  const r = await client.callTool({ name: 'run_script', arguments: args }, undefined, { timeout: 120_000 });
  return { r, s: r.structuredContent as Record<string, any>, t: (r.content as { text: string }[])[0]?.text ?? '' };
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    const env = { ...process.env, GATEHOUSE_URL: gw.url, GATEHOUSE_ADMIN_TOKEN: admin };
    const p = spawn(process.execPath, [join(ROOT, 'bin/gatehouse.mjs'), ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => res({ code: code ?? -1, stdout, stderr }));
  });
}

beforeAll(async () => {
  gw = await startGateway();
  root = mkdtempSync(join(tmpdir(), 'gatehouse-script-lib-'));
  admin = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'lib-admin' });
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: testSandbox(), capacity: 2, agentId: 'lib-agent' });
  await agent.ready;
  client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
  await setPolicy();
}, 300_000);

afterAll(async () => {
  await client?.close();
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('the script library through the CLI', () => {
  it('pushes, lists, shows and versions a script; the same text again is no new version', async () => {
    writeFileSync(join(root, 'hello.ts'), HELLO_V1);
    const pushed = await cli(['scripts', 'push', 'hello.ts']);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stdout).toContain('pushed: hello version 1');
    expect(pushed.stdout).toContain(await scriptDigest(HELLO_V1));
    const again = await cli(['scripts', 'push', 'hello.ts', '--name', 'hello']);
    expect(again.stdout).toContain('unchanged');
    const list = await cli(['scripts', 'list']);
    expect(list.stdout).toMatch(/^NAME\s+VERSION\s+VERSIONS/m);
    expect(list.stdout).toMatch(/^hello\s+1\s+1\s/m);
    const shown = await cli(['scripts', 'show', 'hello']);
    expect(shown.stdout).toBe(HELLO_V1);
    expect(shown.stderr).toContain('hello version 1');
    const badName = await cli(['scripts', 'push', 'hello.ts', '--name', 'Hello World']);
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain('script name "Hello World" is not allowed: 1–64 characters: lower-case letters');
    const missing = await cli(['scripts', 'show', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('error (not_found): no script named "nope" in the team library (hello)');
  }, 60_000);
});

describe('run_script by name', () => {
  it('runs the newest version with vars (frozen); its subprocess runs on the agent; the audit row names script, version and digest', async () => {
    const out = await run({ name: 'hello', vars: { NAME: 'world' } });
    expect(out.r.isError, out.t).toBeFalsy();
    expect(out.s.result).toEqual({ said: 'hello world', frozen: true });
    expect(out.s.script).toEqual({ name: 'hello', origin: 'team', version: 1, sha256: await scriptDigest(HELLO_V1) });
    const audit = await adminApi('GET', '/audit?limit=50&tool=run_script');
    const row = audit.json.entries.find((e: any) => e.job_id === out.s.scriptId || e.jobId === out.s.scriptId);
    expect(row?.command).toMatchObject({ mode: 'script', script: { name: 'hello', origin: 'team', version: 1, sha256: await scriptDigest(HELLO_V1) } });
  }, 60_000);

  it('a push makes a new version; "version" picks an older one; an unknown version lists the ones there are', async () => {
    writeFileSync(join(root, 'hello.ts'), HELLO_V2);
    expect((await cli(['scripts', 'push', 'hello.ts'])).stdout).toContain('pushed: hello version 2');
    const v2 = await run({ name: 'hello', vars: { NAME: 'ann' } });
    expect(v2.s.result).toBe('v2 says hi to ann');
    expect(v2.s.script.version).toBe(2);
    const v1 = await run({ name: 'hello', version: 1, vars: { NAME: 'bob' } });
    expect(v1.s.result).toEqual({ said: 'hello bob', frozen: true });
    const v9 = await run({ name: 'hello', version: 9 });
    expect(v9.r.isError).toBe(true);
    expect(v9.t).toContain('run_script: script "hello" has no version 9 (versions: 1, 2)');
    const versions = await cli(['scripts', 'versions', 'hello']);
    expect(versions.stdout).toMatch(/^2\s+\d+\s+[0-9a-f]{16}/m);
    expect((await cli(['scripts', 'show', 'hello', '--version', '1'])).stdout).toBe(HELLO_V1);
  }, 60_000);

  it('an unknown name says what the library holds and that workspace scripts are off by policy', async () => {
    const out = await run({ name: 'x' });
    expect(out.r.isError).toBe(true);
    expect(out.t).toContain('run_script: no script named "x" (team library: hello; workspace scripts: off by policy)');
  });

  it('refuses code and name together, neither, version without name, and bad vars — saying what is allowed', async () => {
    expect((await run({ name: 'hello', code: 'return 1' })).t).toContain('pass either "code" (an inline program) or "name"');
    expect((await run({})).t).toContain('pass "code" (an inline program) or "name"');
    expect((await run({ code: 'return 1', version: 1 })).t).toContain('"version" goes with "name"');
    const badVar = await run({ name: 'hello', vars: { 'not-an-identifier': 1 } });
    expect(badVar.r.isError).toBe(true);
    expect(badVar.t).toContain('vars name "not-an-identifier" is not allowed; at most 64 vars');
    const tooMany = await run({ name: 'hello', vars: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`V${i}`, i])) });
    expect(tooMany.t).toContain('vars has 65 entries');
    const tooBig = await run({ name: 'hello', vars: { BIG: 'x'.repeat(70 * 1024) } });
    expect(tooBig.t).toMatch(/vars is \d+ bytes as JSON/);
    const badName = await run({ name: '../etc/passwd' });
    expect(badName.r.isError).toBe(true);
    expect(badName.t).toContain('a script name is 1–64 characters');
  });

  it('does not reveal the library when script mode is off', async () => {
    await gw.putPolicy(TEAM, DEFAULT_POLICY);
    const off = await run({ name: 'hello' });
    expect(off.t).toContain('Script mode is disabled in configuration (script.enabled = false)');
    expect(off.t).not.toContain('team library');
    await setPolicy();
  });
});

describe('caps of the library', () => {
  it('refuses a source over the size cap and an empty one', async () => {
    const big = await adminApi('POST', '/scripts', { name: 'big', source: 'x'.repeat(SCRIPT_SOURCE_MAX_BYTES + 1) });
    expect(big.status).toBe(413);
    expect(big.json.error.message).toContain(`a script is at most ${SCRIPT_SOURCE_MAX_BYTES} bytes`);
    const empty = await adminApi('POST', '/scripts', { name: 'empty', source: '' });
    expect(empty.status).toBe(400);
    expect(empty.json.error.message).toContain('source is empty');
    const extra = await adminApi('POST', '/scripts', { name: 'x', source: 'return 1', owner: 'me' });
    expect(extra.status).toBe(400);
  });

  it(`keeps at most ${VERSIONS_PER_SCRIPT_MAX} versions of a script, then says how to make room`, async () => {
    for (let i = 1; i <= VERSIONS_PER_SCRIPT_MAX; i++) {
      const r = await adminApi('POST', '/scripts', { name: 'many', source: `return ${i};` });
      expect(r.status).toBe(201);
    }
    const over = await adminApi('POST', '/scripts', { name: 'many', source: 'return "one too many";' });
    expect(over.status).toBe(409);
    expect(over.json.error.code).toBe('limit_reached');
    expect(over.json.error.message).toContain(
      `script "many" has ${VERSIONS_PER_SCRIPT_MAX} versions, the most a script keeps; remove old ones first (gatehouse scripts rm many --version 1)`,
    );
    const rm1 = await cli(['scripts', 'rm', 'many', '--version', '1']);
    expect(rm1.stdout).toContain('removed many version 1 (1 version)');
    expect((await adminApi('POST', '/scripts', { name: 'many', source: 'return "room again";' })).json.version.version).toBe(VERSIONS_PER_SCRIPT_MAX + 1);
    expect((await cli(['scripts', 'rm', 'many'])).stdout).toContain(`removed many (${VERSIONS_PER_SCRIPT_MAX} versions)`);
  }, 120_000);

  it(`keeps at most ${SCRIPTS_PER_TEAM_MAX} scripts per team`, async () => {
    const have = (await adminApi('GET', '/scripts')).json.scripts.length as number;
    for (let i = have; i < SCRIPTS_PER_TEAM_MAX; i++) expect((await adminApi('POST', '/scripts', { name: `s${i}`, source: 'return 0;' })).status).toBe(201);
    const over = await adminApi('POST', '/scripts', { name: 'one-more', source: 'return 0;' });
    expect(over.status).toBe(409);
    expect(over.json.error.message).toContain(`the team has ${SCRIPTS_PER_TEAM_MAX} scripts, the most a team keeps`);
    // A new version of an existing script is still taken.
    expect((await adminApi('POST', '/scripts', { name: 'hello', source: 'return 3;' })).status).toBe(201);
  }, 180_000);

  it("another team's admin sees none of it", async () => {
    const other = await gw.token({ team: 'other', scopes: ['admin'] });
    const res = await fetch(`${gw.url}/admin/v1/scripts/hello`, { headers: { Authorization: `Bearer ${other}` } });
    expect(res.status).toBe(404);
    const cross = await fetch(`${gw.url}/admin/v1/teams/${TEAM}/scripts`, { headers: { Authorization: `Bearer ${other}` } });
    expect(cross.status).toBe(404);
  });
});

describe('the CLI block of docs/script-mode.md, as written', () => {
  it('runs every line against the gateway', async () => {
    const bin = mkdtempSync(join(tmpdir(), 'gatehouse-bin-'));
    writeFileSync(join(bin, 'gatehouse'), `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, 'bin/gatehouse.mjs')}" "$@"\n`, { mode: 0o755 });
    writeFileSync(join(root, 'hello.ts'), HELLO_V2);
    for (const line of readmeBlock('scripts-cli')) {
      const r = await new Promise<{ code: number; out: string }>((res) => {
        const p = spawn('sh', ['-c', line], {
          cwd: root,
          env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, GATEHOUSE_URL: gw.url, GATEHOUSE_ADMIN_TOKEN: admin },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        p.stdout.on('data', (d) => (out += d));
        p.stderr.on('data', (d) => (out += d));
        p.on('close', (code) => res({ code: code ?? -1, out }));
      });
      expect(r.code, `${line}\n${r.out}`).toBe(0);
    }
    expect(readFileSync(join(root, 'hello-v1.ts'), 'utf8')).toBe(HELLO_V1);
    expect((await adminApi('GET', '/scripts/hello/versions')).json.versions.map((v: { version: number }) => v.version)).not.toContain(1);
    rmSync(bin, { recursive: true, force: true });
  }, 60_000);
});
