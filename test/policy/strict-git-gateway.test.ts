/**
 * The whole path of strict's git: an MCP client calls `execute git add` through `wrangler dev`,
 * the team's policy is the strict preset (set through the admin API), a real agent runs the job
 * in the real sandbox. A workspace filter payload must not run; under the open preset it does.
 * (The payload-by-payload differential is git-repository-programs.test.ts.)
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasCommand, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from '../e2e/harness.ts';

const skip = !hasCommand('git') && process.env.CI !== 'true';
if (skip) console.warn('skipping: git is not installed (allowed outside CI only)');
const SANDBOX = testSandbox();
const TEAM = 'strictgit';

describe.skipIf(skip)('strict preset through the gateway: a workspace git filter does not run', () => {
  let gw: Gateway;
  let agent: AgentProcess;
  let client: Client;
  let root: string;

  beforeAll(async () => {
    gw = await startGateway();
    root = mkdtempSync(join(tmpdir(), 'gatehouse-strictgit-'));
    agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: SANDBOX, capacity: 2, agentId: 'strictgit-agent' });
    await agent.ready;
    client = await gw.mcp(TEAM, ['execute']);
  }, 180_000);
  afterAll(async () => {
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  async function preset(name: string) {
    const token = await gw.token({ team: TEAM, scopes: ['admin'] });
    const r = await fetch(`${gw.url}/admin/v1/policy/presets/${name}`, { method: 'PUT', headers: { Authorization: `Bearer ${token}` } });
    expect(r.status, await r.clone().text()).toBe(200);
  }
  /** A repository in the agent's workspace whose own config names a clean filter that writes MARKER. */
  function repo(dir: string): string {
    const host = join(root, dir);
    mkdirSync(host);
    const inside = `${SANDBOX === 'none' ? root : '/workspace'}/${dir}`;
    execFileSync(
      'sh',
      [
        '-ec',
        [
          'git init -q . && git config user.email a@x.invalid && git config user.name a && echo one > f && git add f && git commit -qm 1',
          `echo '* filter=x' > .gitattributes && git config filter.x.clean "touch ${inside}/MARKER; cat" && echo two >> f`,
        ].join(' && '),
      ],
      { cwd: host, stdio: 'pipe', env: { PATH: process.env.PATH, HOME: host, GIT_CONFIG_NOSYSTEM: '1' } },
    );
    return host;
  }
  async function gitAdd(dir: string) {
    const r = await client.callTool({ name: 'execute', arguments: { command: 'git add f', cwd: dir } }, undefined, { timeout: 60_000 });
    return r.structuredContent as { exit_code: number | null; stderr: string };
  }

  it('open: the filter runs (the payload is real)', async () => {
    await preset('open');
    const host = repo('open');
    const r = await gitAdd('open');
    expect(r.exit_code, r.stderr).toBe(0);
    expect(existsSync(join(host, 'MARKER'))).toBe(true);
  });

  it('strict: git add succeeds and the filter does not run', async () => {
    await preset('strict');
    const host = repo('strict');
    const r = await gitAdd('strict');
    expect(r.exit_code, r.stderr).toBe(0);
    expect(existsSync(join(host, 'MARKER'))).toBe(false);
    // The file was staged by git itself (unfiltered).
    expect(
      execFileSync('git', ['diff', '--cached', '--name-only'], { cwd: host, env: { PATH: process.env.PATH, HOME: host, GIT_CONFIG_NOSYSTEM: '1' } }).toString(),
    ).toContain('f');
  });
});
