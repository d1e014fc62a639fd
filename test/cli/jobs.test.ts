/**
 * `gatehouse agents` and `gatehouse jobs list|show|kill` as an operator runs them, against a real
 * gateway and a real agent: the agent appears with its sandbox and load, a job run through MCP is
 * listed and shown with its exit, a running job is killed from the CLI (the MCP caller sees it
 * cancelled), another team's job is "not found", `--json` prints the gateway's rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ROOT, startAgent, startGateway, type AgentProcess, type Gateway, testSandbox } from '../e2e/harness.ts';
import { readmeBlock } from './readme.ts';
import { runCli, type CliRun } from '../support/cli.ts';
import { until as waitUntil } from '../support/until.ts';

// The CLI is under test here, not isolation: bubblewrap when present, else no sandbox.
const SANDBOX = testSandbox();

let gw: Gateway;
let agent: AgentProcess;
let root: string;
let adminToken: string;

/** The agent's log lines about one job. */
const jobLines = (logs: string, id: string) => logs.split('\n').filter((l) => l.includes(id));

function cli(args: string[], token = adminToken): Promise<CliRun> {
  return runCli(gw.url, token, args);
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'gatehouse-cli-jobs-'));
  gw = await startGateway();
  adminToken = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'ops' });
  agent = startAgent(gw, {
    token: await gw.token({ team: 'acme', scopes: ['agent'], subject: 'cli-agent' }),
    root,
    sandbox: SANDBOX,
    capacity: 2,
    agentId: 'cli-agent',
    extraArgs: ['--label', 'linux-x64', '--label', 'ci'],
  });
  await agent.ready;
}, 180_000);

afterAll(async () => {
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('gatehouse agents', () => {
  it('lists the connected agent with its sandbox, load, labels and runtimes', async () => {
    const r = await cli(['agents']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ID\s+STATE\s+SANDBOX\s+LOAD\s+LAST HEARTBEAT\s+LABELS\s+RUNTIMES/);
    expect(r.stdout).toMatch(new RegExp(`cli-agent\\s+connected\\s+${SANDBOX}\\s+0/2\\s+\\d{4}-\\d\\d-\\d\\dT\\S+Z\\s+linux-x64,ci\\s+\\S*shell`));
    const j = JSON.parse((await cli(['agents', '--json'])).stdout) as { agents: { agent_id: string; capacity: number }[] };
    expect(j.agents).toEqual([expect.objectContaining({ agent_id: 'cli-agent', capacity: 2 })]);
    // Another team sees no agents of acme.
    const other = await cli(['agents', '--json'], await gw.token({ team: 'globex', scopes: ['admin'] }));
    expect(JSON.parse(other.stdout)).toEqual({ agents: [] });
  });
});

describe('gatehouse jobs', () => {
  it('pages through the jobs with the cursor it prints (a job cursor is a 16-digit number)', async () => {
    const c = await gw.mcp('acme', ['execute']);
    const ids: string[] = [];
    for (const word of ['one', 'two', 'three']) {
      const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: [word] } });
      ids.push((r.structuredContent as { job_id: string }).job_id);
    }
    await c.close();
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 3; page++) {
      const r = await cli(['jobs', 'list', '--limit', '1', ...(cursor ? ['--cursor', cursor] : [])]);
      expect(r.code, r.stderr).toBe(0);
      seen.push(...ids.filter((id) => r.stdout.includes(id)));
      cursor = /next page: gatehouse jobs list --cursor (\S+)/.exec(r.stderr)?.[1] ?? null;
      if (page < 2) expect(cursor, r.stderr).toMatch(/^\d{16}$/);
    }
    // Newest first, one per page, none twice.
    expect(seen).toEqual([...ids].reverse());
    const bad = await cli(['jobs', 'list', '--cursor', '99999999999999999']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('cursor is not valid');
  });

  it('lists and shows a finished job with its exit', async () => {
    const c = await gw.mcp('acme', ['execute']);
    const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['listed'] } });
    await c.close();
    const id = (r.structuredContent as { job_id: string }).job_id;

    const list = await cli(['jobs', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+exited\\s+execute\\s+test-acme\\s+\\S+Z\\s+\\S+\\s+0\\s+echo listed$`, 'm'));
    const json = JSON.parse((await cli(['jobs', 'list', '--json', '--limit', '5'])).stdout) as { jobs: { job_id: string }[]; next_cursor: unknown };
    expect(json.jobs.map((j) => j.job_id)).toContain(id);
    expect(json).toHaveProperty('next_cursor');

    const show = await cli(['jobs', 'show', id]);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toMatch(new RegExp(`^job: +${id}$`, 'm'));
    // What ran, from the job's call (its audit row): never "-" for a job that ran a command.
    expect(show.stdout).toMatch(/^command: +echo listed$/m);
    expect(show.stdout).toMatch(/^state: +exited$/m);
    expect(show.stdout).toMatch(/^agent: +cli-agent$/m);
    expect(show.stdout).toMatch(/^exit: +0$/m);
    // Which span is which: the process's run time and start → result recorded are labelled apart.
    expect(show.stdout).toMatch(/^duration: +\d+(ms|\.\ds) +\(the process ran \(measured by the agent\)\)$/m);
    expect(show.stdout).toMatch(/^recorded: +\d+(ms|\.\ds) +\(from started to the result recorded \(includes sending the output\)\)$/m);

    // --json: the gateway's answers, whole.
    const shown = JSON.parse((await cli(['jobs', 'show', id, '--json'])).stdout) as { job: { job_id: string; state: string; exit_code: number } };
    expect(shown.job).toMatchObject({ job_id: id, state: 'exited', exit_code: 0 });
    // Killing a job that already ended changes nothing and says so.
    const late = await cli(['jobs', 'kill', id, '--json']);
    expect(late.code, late.stderr).toBe(0);
    expect(JSON.parse(late.stdout)).toEqual({ job_id: id, state: 'exited' });
    // The agent logged exactly one line for the job: its id, state with exit code, duration.
    expect(jobLines(agent.logs(), id)).toEqual([expect.stringMatching(new RegExp(`info job ${id} exited 0 in \\d+ ms \\(argv\\)$`))]);

    // Another team's admin: "not found", never the job.
    const other = await cli(['jobs', 'show', id], await gw.token({ team: 'globex', scopes: ['admin'] }));
    expect(other.code).toBe(1);
    expect(other.stderr.trim()).toBe(`error (not_found): job "${id}" not found`);
    const bad = await cli(['jobs', 'list', '--limit', '900']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--limit "900" must be an integer from 1 to 200');
  });

  it('kills a running job; the MCP caller gets it cancelled', async () => {
    const c = await gw.mcp('acme', ['execute']);
    const call = c.callTool({ name: 'execute', arguments: { command: 'sleep', args: ['60'], timeout_ms: 90_000 } }, undefined, { timeout: 120_000 });
    let id = '';
    const until = Date.now() + 30_000;
    while (!id) {
      const running = JSON.parse((await cli(['jobs', 'list', '--state', 'running', '--json'])).stdout) as { jobs: { job_id: string }[] };
      id = running.jobs[0]?.job_id ?? '';
      if (!id && Date.now() > until) throw new Error('the sleep job never showed up as running');
      if (!id) await new Promise((r) => setTimeout(r, 250));
    }
    const k = await cli(['jobs', 'kill', id]);
    expect(k.code, k.stderr).toBe(0);
    expect(k.stdout).toMatch(new RegExp(`^kill sent to job ${id} \\(state: `));
    const r = await call;
    await c.close();
    expect((r.structuredContent as { state: string }).state).toBe('cancelled');
    expect((await cli(['jobs', 'show', id])).stdout).toMatch(/^state: +cancelled$/m);
    // One line for the killed job too, with who killed it.
    await waitUntil(async () => jobLines(agent.logs(), id).length > 0, 15_000, "the killed job's log line");
    expect(jobLines(agent.logs(), id)).toEqual([
      expect.stringMatching(new RegExp(`info job ${id} cancelled.* in \\d+ ms \\(argv; killed by ops \\(admin API\\)\\)$`)),
    ]);
  }, 120_000);

  it("gatehouse agent --json logs one JSON object per line; a job's line carries its id, state and duration", async () => {
    const jsonAgent = startAgent(gw, {
      token: await gw.token({ team: 'jsonlog', scopes: ['agent'], subject: 'json-agent' }),
      root,
      sandbox: SANDBOX,
      agentId: 'json-agent',
      extraArgs: ['--json'],
    });
    try {
      await jsonAgent.ready;
      const c = await gw.mcp('jsonlog', ['execute']);
      const r = await c.callTool({ name: 'execute', arguments: { command: 'false', args: [] } });
      await c.close();
      const id = (r.structuredContent as { job_id: string }).job_id;
      await waitUntil(async () => jobLines(jsonAgent.logs(), id).length > 0, 15_000, "the job's log line");
      const lines = jsonAgent
        .logs()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.every((l) => typeof l.time === 'string' && ['info', 'warn', 'error'].includes(String(l.level)) && typeof l.msg === 'string')).toBe(true);
      const mine = lines.filter((l) => String(l.msg).includes(id));
      expect(mine).toEqual([
        expect.objectContaining({ level: 'info', job: id, state: 'exited', exitCode: 1, signal: null, durationMs: expect.any(Number), mode: 'argv' }),
      ]);
    } finally {
      await jsonAgent.stop();
    }
  }, 120_000);
});

describe('gatehouse audit', () => {
  it('tail --tool takes an admin action and lists every audited tool; egress lists the connections', async () => {
    const help = await cli(['audit', '--help']);
    for (const t of ['execute', 'admin.job_kill', 'admin.member_remove', 'admin.policy_set']) expect(help.stdout).toContain(t);
    // The kill above left an admin.job_kill row.
    const kills = await cli(['audit', 'tail', '--tool', 'admin.job_kill']);
    expect(kills.code, kills.stderr).toBe(0);
    expect(kills.stdout).toMatch(/allowed\s+admin\.job_kill\s+ops/);
    const bad = await cli(['audit', 'tail', '--tool', 'admin.nothing']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--tool "admin.nothing" is no audited tool; allowed: execute,');
    expect(bad.stderr).toContain('admin.member_remove');
    const egress = await cli(['audit', 'egress', '--json', '--limit', '5']);
    expect(egress.code, egress.stderr).toBe(0);
    expect(JSON.parse(egress.stdout)).toEqual({ connections: [] });
    const none = await cli(['audit', 'egress', '--refused']);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stderr.trim()).toBe('no refused connections');
    expect((await cli(['audit', 'egress', '--limit', '0'])).stderr).toContain('--limit "0" must be an integer from 1 to 200');
  });
});

describe('README', () => {
  it('runs the agents and jobs lines of the README as written', async () => {
    const c = await gw.mcp('acme', ['execute']);
    const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['readme'] } });
    await c.close();
    const env = {
      ...process.env,
      PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      GATEHOUSE_URL: gw.url,
      GATEHOUSE_ADMIN_TOKEN: adminToken,
      JOB_ID: (r.structuredContent as { job_id: string }).job_id,
    };
    const lines = readmeBlock('cli-ops');
    expect(lines).toHaveLength(4);
    const outs: string[] = [];
    for (const line of lines) {
      try {
        outs.push((await promisify(execFile)('/bin/sh', ['-ec', line], { cwd: ROOT, env })).stdout);
      } catch (e) {
        const x = e as { stdout?: string; stderr?: string; message: string };
        throw new Error(`README line failed: ${line}\n${x.message}\n${x.stdout ?? ''}${x.stderr ?? ''}`);
      }
    }
    expect(outs[0]).toContain('cli-agent');
    expect(outs[2]).toMatch(new RegExp(`^job: +${env.JOB_ID}$`, 'm'));
    expect(outs[3]).toContain(`kill sent to job ${env.JOB_ID}`);
  }, 120_000);
});
