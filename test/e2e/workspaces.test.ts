/**
 * Per-task workspaces end to end (docs/workspaces.md): real `wrangler dev`, a real agent in gVisor,
 * the official MCP SDK client. Two workspaces never see each other's files (attacks through `..`,
 * symlinks and /proc), the shared workspace stays the default, the quota stops a job with an error
 * `execute` returns, a workspace is copied from another or cloned from a git repository served on
 * 127.0.0.1 (through the agent's egress proxy, under the team's network policy), workspace_list and
 * workspace_delete show and remove them, and a workspace job waits only for the agent that holds its
 * workspace (the refusal says so). Outside CI the file skips when runsc is missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, normalize } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, requireParts, startAgent, startEgressTestAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { call } from './fleet.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

type S = Record<string, any>;
const RUNSC = requireParts({ runsc: hasCommand('runsc') });
if (!RUNSC) console.warn('workspaces.test.ts: skipped — runsc is not installed (allowed outside CI only)');
const maybe = RUNSC ? describe : describe.skip;

const TEAM = 'ws-team';
const GIT_HOST = 'git.workspaces.test';
const QUOTA = 2 * 1024 * 1024;

/** A bare repository served over git's "dumb" HTTP protocol (static files) on 127.0.0.1. */
async function gitServer(dir: string): Promise<{ port: number; server: Server; requests: string[] }> {
  const src = join(dir, 'src');
  execFileSync('git', ['init', '-q', '-b', 'main', src]);
  writeFileSync(join(src, 'README.md'), 'cloned through the egress proxy\n');
  execFileSync('git', ['-C', src, 'add', 'README.md']);
  execFileSync('git', ['-C', src, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'one']);
  execFileSync('git', ['clone', '-q', '--bare', src, join(dir, 'repo.git')]);
  execFileSync('git', ['-C', join(dir, 'repo.git'), 'update-server-info']);
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const path = normalize(join(dir, decodeURIComponent(new URL(req.url!, 'http://x').pathname)));
    if (!path.startsWith(join(dir, 'repo.git')) || !existsSync(path) || !statSync(path).isFile()) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    createReadStream(path).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, server, requests };
}

let gw: Gateway;
let client: Client;
let agent: AgentProcess;
let git: Awaited<ReturnType<typeof gitServer>>;
const dirs: string[] = [];
const tmp = (p: string) => {
  const d = mkdtempSync(join(tmpdir(), p));
  dirs.push(d);
  return d;
};
const run = (args: S, timeout = 120_000) => call(client, 'execute', args, timeout);

maybe('per-task workspaces through the gateway', () => {
  let root: string;
  let stateDir: string;
  beforeAll(async () => {
    git = await gitServer(tmp('gatehouse-ws-git-'));
    root = tmp('gatehouse-ws-root-');
    stateDir = tmp('gatehouse-ws-state-');
    writeFileSync(join(root, 'shared.txt'), 'the shared workspace\n');
    execFileSync('chmod', ['0777', root]);
    gw = await startGateway();
    await gw.putPolicy(TEAM, {
      ...DEFAULT_POLICY,
      executables: { allow: [...DEFAULT_POLICY.executables.allow, 'sh', 'ln', 'head', 'find', 'grep', 'echo', 'pwd', 'true', 'ls', 'cat'] },
      shell: { enabled: true, allow: ['/.*/'] },
      sandbox: { minimum: 'gvisor', reuse: { jobs: 20, seconds: 600 } },
      limits: { ...DEFAULT_POLICY.limits, queueWaitMs: 1500 },
      network: { mode: 'allowlist', allow: [{ host: GIT_HOST, ports: [80], privateAddresses: true }] },
      workspaces: { quotaBytes: QUOTA, idleHours: 24 },
      script: { enabled: true, cpuMs: 2_000, subprocess: { maxCount: 5, maxTotalMs: 60_000 } },
    });
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    agent = await startEgressTestAgent(gw, TEAM, {
      root,
      capacity: 2,
      agentId: 'ws-gvisor',
      extraArgs: ['--state-dir', stateDir],
      testHosts: { [GIT_HOST]: git.port },
    });
    await agent.ready;
  }, 300_000);

  afterAll(async () => {
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    await new Promise((r) => git?.server.close(r));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it('two workspaces are separate directories; a job in one cannot reach the other through .., symlinks or /proc', async () => {
    const a = await run({ command: 'echo secret-of-a > secret && pwd && ls -a', workspace: 'task-a' });
    expect(a.r.isError, `${a.t}\n${agent.logs()}`).toBeFalsy();
    expect(a.s.exit_code).toBe(0);
    const b = await run({ command: 'ls -a; cat secret', workspace: 'task-b' });
    expect(b.s.stdout).not.toContain('secret');
    expect(b.s.exit_code).not.toBe(0);
    const hostA = join(stateDir, 'workspaces', 'task-a');
    expect(existsSync(join(hostA, 'secret'))).toBe(true);
    const attacks = [
      'cat ../task-a/secret',
      'cat /workspace/../task-a/secret',
      `cat ${hostA}/secret`,
      `ln -s ${hostA}/secret l1; cat l1`,
      'ln -s ../task-a l2; cat l2/secret',
      `cat /proc/1/root${hostA}/secret`,
      `cat /proc/self/root${hostA}/secret`,
      `find / -name secret -xdev 2>/dev/null | head`,
      'grep -h task-a /proc/self/mountinfo /proc/mounts',
    ];
    for (const cmd of attacks) {
      const r = await run({ command: cmd, workspace: 'task-b' });
      expect(r.s.stdout ?? '', cmd).not.toContain('secret-of-a');
      expect(r.s.stdout ?? '', cmd).not.toContain('task-a/secret');
    }
    // A cwd through a symlink that leads out of the workspace is refused by the agent (realpath on the host).
    await run({ command: 'ln', args: ['-s', '/', 'out'], workspace: 'task-b' });
    const out = await run({ command: 'ls', args: [], cwd: 'out', workspace: 'task-b' });
    expect(out.r.isError).toBe(true);
    expect(out.t).toMatch(/outside the workspace/);
    // The default stays the shared directory, at its path, with none of the workspaces' files.
    const shared = await run({ command: 'cat shared.txt; ls -a' });
    expect(shared.s.stdout).toContain('the shared workspace');
    expect(shared.s.stdout).not.toContain('secret');
  }, 300_000);

  it('a job that fills its workspace past the quota fails with workspace_quota, which execute returns', async () => {
    const r = await run({ command: 'head -c 5000000 /dev/zero > big; echo wrote', workspace: 'task-full' });
    expect(r.r.isError, r.t).toBe(true);
    expect((r.s.error as S | undefined)?.code, r.t).toBe('workspace_quota');
    expect(r.t).toContain('workspaces.quotaBytes');
    // Full now: the next job there is refused before it runs, with the same code.
    const next = await run({ command: 'true', workspace: 'task-full' });
    expect(next.r.isError).toBe(true);
    expect((next.s.error as S | undefined)?.code ?? next.t).toMatch(/workspace_quota/);
  }, 300_000);

  it('a new workspace copied from another has its files; changing the copy leaves the original alone', async () => {
    const c = await run({ command: 'cat secret; echo changed > secret', workspace: 'task-c', workspace_source: { copyFrom: 'task-a' } });
    expect(c.s.stdout, c.t).toContain('secret-of-a');
    const a = await run({ command: 'cat secret', workspace: 'task-a' });
    expect(a.s.stdout).toContain('secret-of-a');
    const missing = await run({ command: 'true', workspace: 'task-x', workspace_source: { copyFrom: 'nope' } });
    expect(missing.r.isError).toBe(true);
    expect(missing.t).toMatch(/"nope" to copy from does not exist/);
  }, 300_000);

  it('a new workspace cloned from git over the egress proxy, allowed by the team network policy', async () => {
    const url = `http://${GIT_HOST}/repo.git`;
    const r = await run({ command: 'cat README.md', workspace: 'task-git', workspace_source: { git: url, ref: 'main' } }, 240_000);
    expect(r.s.exit_code, `${r.t}\n${agent.logs()}`).toBe(0);
    expect(r.s.stdout).toContain('cloned through the egress proxy');
    expect(git.requests.some((q) => q.includes('/repo.git/info/refs'))).toBe(true);
    const again = await run({ command: 'cat README.md', workspace: 'task-git', workspace_source: { git: 'http://elsewhere.invalid/x.git' } });
    expect(again.s.stdout).toContain('cloned through the egress proxy');
    const denied = await run({ command: 'true', workspace: 'task-git2', workspace_source: { git: 'http://not-allowed.test/x.git' } }, 240_000);
    expect(denied.r.isError, denied.t).toBe(true);
    expect((denied.s.error as S | undefined)?.code).toBe('workspace_error');
  }, 300_000);

  it("run_script's subprocesses run in the workspace the call names", async () => {
    const code = "await gatehouse.exec('echo from-a-script > made-by-script');\nconst r = await gatehouse.exec('ls', ['-a']);\nreturn r.stdout;";
    const r = await call(client, 'run_script', { code, workspace: 'task-script' }, 120_000);
    expect(r.r.isError, `${r.t}\n${agent.logs()}`).toBeFalsy();
    expect(String(r.s.result)).toContain('made-by-script');
    expect(existsSync(join(stateDir, 'workspaces', 'task-script', 'made-by-script'))).toBe(true);
    expect(existsSync(join(root, 'made-by-script'))).toBe(false);
    const back = await run({ command: 'cat made-by-script', workspace: 'task-script' });
    expect(back.s.stdout).toContain('from-a-script');
  }, 300_000);

  it('rejects a workspace id that is not allowed, saying what is', async () => {
    const r = await run({ command: 'true', workspace: '../etc' });
    expect(r.r.isError).toBe(true);
    expect(r.t).toMatch(/lowercase letters, digits/);
  });

  it('workspace_list shows size, last use and agent; workspace_delete removes the workspace and its files', async () => {
    const list = await call(client, 'workspace_list', {});
    const ws = (list.s.workspaces as S[]).map((w) => w.id);
    expect(ws).toEqual(expect.arrayContaining(['task-a', 'task-b', 'task-c']));
    const a = (list.s.workspaces as S[]).find((w) => w.id === 'task-a')!;
    expect(a).toMatchObject({ agent_id: 'ws-gvisor', quota_bytes: QUOTA, agent_connected: true });
    expect(a.bytes).toBeGreaterThan(0);
    const del = await call(client, 'workspace_delete', { workspace: 'task-a' });
    expect(del.r.isError, del.t).toBeFalsy();
    const after = await call(client, 'workspace_list', {});
    expect((after.s.workspaces as S[]).map((w) => w.id)).not.toContain('task-a');
    const again = await run({ command: 'ls -a', workspace: 'task-a' });
    expect(again.s.stdout).not.toContain('secret');
    const gone = await call(client, 'workspace_delete', { workspace: 'never-made' });
    expect(gone.r.isError).toBe(true);
  }, 300_000);

  it('a workspace job waits only for the agent that holds its workspace, and the refusal says so', async () => {
    await agent.stop();
    const r = await run({ command: 'true', workspace: 'task-b' });
    expect(r.r.isError).toBe(true);
    expect(r.t).toMatch(/workspace "task-b" is held by executor agent "ws-gvisor", which is not connected/);
  }, 120_000);
});

maybe('an agent that cannot hold workspaces never gets a workspace job', () => {
  let gw2: Gateway;
  let c: Client;
  let bw: AgentProcess;
  beforeAll(async () => {
    gw2 = await startGateway();
    await gw2.putPolicy('ws-bwrap', { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, queueWaitMs: 1000 } });
    c = await gw2.mcp('ws-bwrap', ['execute']);
    bw = startAgent(gw2, {
      token: await gw2.token({ team: 'ws-bwrap', scopes: ['agent'] }),
      root: tmp('gatehouse-ws-bw-'),
      sandbox: 'bwrap',
      agentId: 'ws-bwrap',
    });
    await bw.ready;
  }, 300_000);
  afterAll(async () => {
    await c?.close();
    await bw?.stop();
    await gw2?.stop();
  }, 60_000);

  it('refuses at placement with the reason, audited; the same call without a workspace runs', async () => {
    const r = await call(c, 'execute', { command: 'true', workspace: 'w1' });
    expect(r.r.isError).toBe(true);
    expect(r.t).toMatch(/no connected executor agent can hold workspaces: ws-bwrap \(bwrap: its sandbox cannot mount one\)/);
    // The refusal is audited: the call's row says why.
    const admin = await gw2.token({ team: 'ws-bwrap', scopes: ['admin'] });
    const audit = await fetch(`${gw2.url}/admin/v1/audit?tool=execute&decision=failed&limit=10`, { headers: { Authorization: `Bearer ${admin}` } });
    const rows = ((await audit.json()) as S).entries as S[];
    expect(rows[0], JSON.stringify(rows)).toMatchObject({ tool: 'execute', decision: 'failed', exitStatus: 'refused' });
    expect(rows[0].reason).toMatch(/no_agent: workspace "w1" cannot be created: no connected executor agent can hold workspaces: ws-bwrap/);
    const plain = await call(c, 'execute', { command: 'true' });
    expect(plain.s.exit_code, plain.t).toBe(0);
  }, 120_000);
});
