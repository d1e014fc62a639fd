/**
 * Workspaces in the admin API and the CLI (docs/workspaces.md) against real `wrangler dev` and a real agent in gVisor:
 * `GET /admin/v1/workspaces` lists what jobs made (agent, size, created, last used); `DELETE /admin/v1/workspaces/:id`
 * removes the workspace and its files on the agent and leaves an `admin.workspace_delete` audit row;
 * `gatehouse workspaces list|rm` do the same from the CLI. Attacked: a non-admin token, another team's admin,
 * an id that reads as a path, a workspace whose agent is gone. Outside CI the file skips when runsc is missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, requireParts, ROOT, startEgressTestAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { call } from './fleet.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

type S = Record<string, any>;
const RUNSC = requireParts({ runsc: hasCommand('runsc') });
if (!RUNSC) console.warn('workspaces-admin.test.ts: skipped — runsc is not installed (allowed outside CI only)');
const maybe = RUNSC ? describe : describe.skip;

const TEAM = 'wsadmin-team';
const QUOTA = 64 * 1024 * 1024;
let gw: Gateway;
let client: Client;
let agent: AgentProcess;
let admin: string;
let stateDir: string;
const dirs: string[] = [];

async function adminApi(method: string, path: string, token = admin): Promise<{ status: number; json: S }> {
  const r = await fetch(`${gw.url}/admin/v1${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
  return { status: r.status, json: (await r.json()) as S };
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    const env = { ...process.env, GATEHOUSE_URL: gw.url, GATEHOUSE_ADMIN_TOKEN: admin };
    const p = spawn(process.execPath, [join(ROOT, 'bin/gatehouse.mjs'), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => res({ code: code ?? -1, stdout, stderr }));
  });
}

const make = async (id: string, command: string) => {
  const r = await call(client, 'execute', { command, workspace: id }, 120_000);
  expect(r.s.exit_code, `${r.t}\n${agent.logs()}`).toBe(0);
};

maybe('workspaces in the admin API and the CLI', () => {
  beforeAll(async () => {
    const root = mkdtempSync(join(tmpdir(), 'gatehouse-wsadmin-root-'));
    stateDir = mkdtempSync(join(tmpdir(), 'gatehouse-wsadmin-state-'));
    dirs.push(root, stateDir);
    gw = await startGateway();
    await gw.putPolicy(TEAM, {
      ...DEFAULT_POLICY,
      executables: { allow: [...DEFAULT_POLICY.executables.allow, 'sh', 'head', 'echo', 'true'] },
      shell: { enabled: true, allow: ['/.*/'] },
      sandbox: { minimum: 'gvisor', reuse: { jobs: 20, seconds: 600 } },
      workspaces: { quotaBytes: QUOTA, idleHours: 24 },
    });
    admin = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'ws-admin' });
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    agent = await startEgressTestAgent(gw, TEAM, { root, capacity: 2, agentId: 'wsadmin-gvisor', extraArgs: ['--state-dir', stateDir] });
    await agent.ready;
    await make('build-1', 'head -c 3000000 /dev/zero > big');
    await make('build-2', 'echo small > f');
    await make('keep-me', 'echo kept > f');
  }, 300_000);

  afterAll(async () => {
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it('GET /admin/v1/workspaces lists each workspace with its agent, size, quota, created and last used', async () => {
    const r = await adminApi('GET', '/workspaces');
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    const byId = new Map((r.json.workspaces as S[]).map((w) => [w.id, w]));
    expect([...byId.keys()].sort()).toEqual(['build-1', 'build-2', 'keep-me']);
    const b1 = byId.get('build-1')!;
    expect(b1).toMatchObject({ agent_id: 'wsadmin-gvisor', quota_bytes: QUOTA, agent_connected: true });
    expect(b1.bytes).toBeGreaterThanOrEqual(3_000_000);
    expect(b1.last_used_at).toBeGreaterThanOrEqual(b1.created_at);
    expect(b1.expires_at).toBeGreaterThan(b1.last_used_at);
    // The explicit team path answers the same.
    expect((await adminApi('GET', `/teams/${TEAM}/workspaces`)).json.workspaces).toHaveLength(3);
  });

  it('refuses a token without the admin scope and hides the team from another team’s admin', async () => {
    const member = await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'] });
    expect((await adminApi('GET', '/workspaces', member)).status).toBe(403);
    expect((await adminApi('DELETE', '/workspaces/keep-me', member)).status).toBe(403);
    const other = await gw.token({ team: 'wsadmin-other', scopes: ['admin'] });
    expect((await adminApi('GET', '/workspaces', other)).json.workspaces).toEqual([]);
    const del = await adminApi('DELETE', '/workspaces/keep-me', other);
    expect(del.status).toBe(404);
    expect((await adminApi('GET', `/teams/${TEAM}/workspaces`, other)).status).toBe(404);
    expect(existsSync(join(stateDir, 'workspaces', 'keep-me', 'f'))).toBe(true);
  });

  it('rejects an id that reads as a path or is unknown, saying what is allowed', async () => {
    const bad = await adminApi('DELETE', '/workspaces/..%2Fetc');
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/lowercase letters, digits/);
    const upper = await adminApi('DELETE', '/workspaces/Keep-Me');
    expect(upper.status).toBe(400);
    const none = await adminApi('DELETE', '/workspaces/never-made');
    expect(none.status).toBe(404);
    expect(none.json.error.message).toContain('no workspace "never-made"');
  });

  it('DELETE /admin/v1/workspaces/:id removes the workspace and its files on the agent, audited', async () => {
    expect(existsSync(join(stateDir, 'workspaces', 'build-2', 'f'))).toBe(true);
    const r = await adminApi('DELETE', '/workspaces/build-2');
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    expect(r.json).toMatchObject({ workspace: 'build-2', agent_id: 'wsadmin-gvisor', deleted: true });
    const ids = ((await adminApi('GET', '/workspaces')).json.workspaces as S[]).map((w) => w.id);
    expect(ids).not.toContain('build-2');
    await expect.poll(() => existsSync(join(stateDir, 'workspaces', 'build-2')), { timeout: 30_000 }).toBe(false);
    const audit = await adminApi('GET', '/audit?tool=admin.workspace_delete&limit=50');
    const rows = audit.json.entries as S[];
    expect(rows.find((e) => e.command?.workspace === 'build-2')).toMatchObject({ decision: 'allowed', subject: 'ws-admin' });
    expect(rows.find((e) => e.command?.workspace === 'never-made')?.decision).toBe('failed');
  });

  it('gatehouse workspaces list prints a table with id, agent, human-readable size and last use; rm deletes', async () => {
    const list = await cli(['workspaces', 'list']);
    expect(list.code, list.stderr).toBe(0);
    const [head, ...rows] = list.stdout.trim().split('\n');
    expect(head).toMatch(/^ID\s+AGENT\s+SIZE\s+QUOTA\s+LAST USED\s+CREATED/);
    const b1 = rows.find((l) => l.startsWith('build-1'))!;
    expect(b1).toMatch(/^build-1\s+wsadmin-gvisor\s+2\.\d MiB\s+64\.0 MiB\s+\d{4}-\d\d-\d\dT/);
    expect(rows.map((l) => l.split(/\s+/)[0]).sort()).toEqual(['build-1', 'keep-me']);
    const json = await cli(['workspaces', 'list', '--json']);
    expect(JSON.parse(json.stdout).workspaces).toHaveLength(2);

    const rm = await cli(['workspaces', 'rm', 'build-1']);
    expect(rm.code, rm.stderr).toBe(0);
    expect(rm.stdout).toContain('deleted workspace build-1 on agent wsadmin-gvisor');
    expect((await cli(['workspaces', 'list'])).stdout).not.toContain('build-1');
    await expect.poll(() => existsSync(join(stateDir, 'workspaces', 'build-1')), { timeout: 30_000 }).toBe(false);

    const again = await cli(['workspaces', 'rm', 'build-1']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('no workspace "build-1"');
    const bad = await cli(['workspaces', 'rm', '../etc']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/lowercase letters, digits/);
    const unknown = await cli(['workspaces', 'frob']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('allowed: list, rm');
  });

  it('a workspace whose agent is not connected is not forgotten: the delete is refused with 409 and says why', async () => {
    await agent.stop();
    await expect.poll(async () => ((await adminApi('GET', '/workspaces')).json.workspaces as S[])[0]?.agent_connected, { timeout: 30_000 }).toBe(false);
    const r = await adminApi('DELETE', '/workspaces/keep-me');
    expect(r.status).toBe(409);
    expect(r.json.error.message).toMatch(/not connected/);
    expect(((await adminApi('GET', '/workspaces')).json.workspaces as S[]).map((w) => w.id)).toEqual(['keep-me']);
    expect(existsSync(join(stateDir, 'workspaces', 'keep-me', 'f'))).toBe(true);
  });
});
