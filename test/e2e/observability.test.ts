/**
 * What an operator sees of a real gateway and agent: the one JSON line each MCP tool call and
 * admin API call leaves in the Worker's log (read from `wrangler dev`'s output), `/readyz` over the
 * real D1, R2 and Durable Object namespace (and a misconfigured gateway's answer), and the agent's
 * `--metrics-port` scraped before and after a job. Analytics Engine writes are dropped by
 * `wrangler dev`; their data points are tested through a stand-in binding in
 * test/platform/metrics.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { connectMcp, freePort, ROOT, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import type { CallLine } from '../../src/edge/call-log.ts';

const TEAM = 'obs';
const SANDBOX = testSandbox();
let gw: Gateway;
let broken: Gateway;
let agent: AgentProcess;
let client: Client;
let root: string;
let clientToken: string;
let agentToken: string;
let adminToken: string;
let metricsPort: number;

beforeAll(async () => {
  // `info`: wrangler dev prints the Worker's console.info lines, where the call lines go.
  [gw, broken] = await Promise.all([startGateway({ logLevel: 'info' }), startGateway({ vars: { MAX_BODY_BYTES: '1mb' } })]);
  root = mkdtempSync(join(tmpdir(), 'gatehouse-obs-'));
  clientToken = await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'], subject: 'obs-client' });
  agentToken = await gw.token({ team: TEAM, scopes: ['agent'] });
  adminToken = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'obs-admin' });
  metricsPort = await freePort();
  agent = startAgent(gw, { token: agentToken, root, sandbox: SANDBOX, agentId: 'obs-agent', extraArgs: ['--metrics-port', String(metricsPort)] });
  await agent.ready;
  client = await connectMcp(gw.mcpUrl, clientToken);
});

afterAll(async () => {
  await client?.close();
  await agent?.stop();
  await Promise.all([gw?.stop(), broken?.stop()]);
  if (root) rmSync(root, { recursive: true, force: true });
});

/**
 * The gateway's call lines so far. The Worker logs each as an object (Workers Logs indexes its
 * fields); `wrangler dev` prints it the way Node's util.inspect does — unquoted keys, single-quoted
 * strings — which is turned back into the object here.
 */
function callLines(): CallLine[] {
  return [...gw.logs().matchAll(/\{\s*event: 'call',[^}]*\}/g)].map((m) => {
    const json = m[0]
      .replace(/([{,]\s*)(\w+):/g, '$1"$2":')
      .replace(/'((?:[^'\\]|\\.)*)'/g, (_all, text: string) => JSON.stringify(text.replace(/\\(.)/g, '$1')));
    return JSON.parse(json) as CallLine;
  });
}

/** Waits for the line `pick` finds (a line is written as the call's answer goes out). */
async function lineOf(pick: (l: CallLine) => boolean): Promise<CallLine> {
  const until = Date.now() + 10_000;
  for (;;) {
    const found = callLines().filter(pick);
    if (found.length === 1) return found[0];
    if (found.length > 1) throw new Error(`${found.length} lines for one call:\n${JSON.stringify(found, null, 1)}`);
    if (Date.now() > until) throw new Error(`no such call line in:\n${gw.logs()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function scrape(path = '/metrics'): Promise<{ status: number; body: string }> {
  const r = await fetch(`http://127.0.0.1:${metricsPort}${path}`);
  return { status: r.status, body: await r.text() };
}

const sample = (text: string, series: string): number => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (!line) throw new Error(`no ${series} in:\n${text}`);
  return Number(line.slice(series.length + 1));
};

describe('call log', () => {
  it('an allowed execute leaves one line: who, the decision and its stage, the job, agent, sandbox, outcome and latency', async () => {
    const r = await client.callTool({ name: 'execute', arguments: { command: 'printf', args: ['%s%s\\n', 'ARG-PART-ONE', 'ARG-PART-TWO'] } });
    const s = r.structuredContent as { job_id: string; exit_code: number; stdout: string };
    expect(s.stdout).toBe('ARG-PART-ONEARG-PART-TWO\n');
    const line = await lineOf((l) => l.jobId === s.job_id);
    expect(line).toEqual({
      event: 'call',
      surface: 'mcp',
      team: TEAM,
      subject: 'obs-client',
      tokenId: expect.any(String),
      tool: 'execute',
      decision: 'allowed',
      stage: 'policy',
      jobId: s.job_id,
      agent: 'obs-agent',
      sandbox: SANDBOX,
      latencyMs: expect.any(Number),
      outcome: 'exited',
      exitCode: 0,
      d1Queries: expect.any(Number),
      d1RowsRead: expect.any(Number),
      d1RowsWritten: expect.any(Number),
      r2ClassA: expect.any(Number),
      r2ClassB: expect.any(Number),
    });
    expect(line.latencyMs).toBeGreaterThan(0);
  });

  it('a denied call names the stage that denied it, and no argument reaches the log', async () => {
    const r = await client.callTool({ name: 'execute', arguments: { command: 'curl', args: ['https://example.com/?q=DENIED-ARG-VALUE'] } });
    expect(r.isError).toBe(true);
    const line = await lineOf((l) => l.tool === 'execute' && l.decision === 'denied');
    expect(line).toMatchObject({ decision: 'denied', stage: 'executable', outcome: 'policy_denied', jobId: null, agent: null });
    expect(gw.logs()).not.toContain('DENIED-ARG-VALUE');
  });

  it('a call that decides nothing says so; arguments the SDK refuses still leave a line', async () => {
    await client.callTool({ name: 'job_list', arguments: { limit: 1 } });
    expect(await lineOf((l) => l.tool === 'job_list')).toMatchObject({ decision: null, stage: null, outcome: 'ok' });
    await client.callTool({ name: 'job_status', arguments: { job_id: 42 } });
    expect(await lineOf((l) => l.tool === 'job_status')).toMatchObject({ decision: null, outcome: 'invalid_argument' });
  });

  it('an admin API call leaves a line with its route pattern and status', async () => {
    const r = await fetch(`${gw.url}/admin/v1/tokens/no-such-jti-value`, { method: 'DELETE', headers: { Authorization: `Bearer ${adminToken}` } });
    expect(r.status).toBe(404);
    const line = await lineOf((l) => l.surface === 'admin' && l.tool === 'DELETE /tokens/:jti');
    expect(line).toMatchObject({ team: TEAM, subject: 'obs-admin', status: 404, decision: 'failed', outcome: 'not_found' });
    // The call lines never hold the path's values (wrangler's own request log, not the Worker's, prints the URL).
    expect(JSON.stringify(callLines())).not.toContain('no-such-jti-value');
  });

  it('never holds a token or what a job printed', () => {
    const text = callLines()
      .map((l) => JSON.stringify(l))
      .join('\n');
    expect(text).not.toContain('ARG-PART');
    for (const t of [clientToken, agentToken, adminToken]) {
      expect(gw.logs()).not.toContain(t);
      expect(gw.logs()).not.toContain(t.split('.')[2]);
    }
  });
});

describe("the dashboard's health section", () => {
  it("GET /admin/v1/overview carries the team object's own counters and the last job's timing", async () => {
    const r = await fetch(`${gw.url}/admin/v1/overview`, { headers: { Authorization: `Bearer ${adminToken}` } });
    expect(r.status).toBe(200);
    const { dispatcher } = (await r.json()) as { dispatcher: { queued: number; running: number; lastJob: Record<string, number> | null } };
    expect(dispatcher).toEqual({
      queued: 0,
      running: 0,
      lastJob: { endedAt: expect.any(Number), durationMs: expect.any(Number), queueWaitMs: expect.any(Number) },
      // Its wake-ups since it last started (agent messages and alarms: an idle team's stay still).
      wakes: { since: expect.any(Number), messages: expect.any(Number), alarms: expect.any(Number) },
    });
  });
});

describe('/readyz', () => {
  it('answers 200 with each check timed, without a token, and the same answer again within its cache period', async () => {
    const r = await fetch(`${gw.url}/readyz`);
    expect(r.status).toBe(200);
    expect(r.headers.get('Cache-Control')).toBe('no-store');
    const body = (await r.json()) as { ok: boolean; checks: Record<string, { ok: boolean; ms: number }> };
    expect(body).toEqual({
      ok: true,
      checks: { d1: { ok: true, ms: expect.any(Number) }, r2: { ok: true, ms: expect.any(Number) }, do: { ok: true, ms: expect.any(Number) } },
    });
    expect(await (await fetch(`${gw.url}/readyz`)).json()).toEqual(body);
    // Liveness stays the cheap answer.
    expect(await (await fetch(`${gw.url}/healthz`)).json()).toMatchObject({ ok: true });
  });

  it('is 503 with the config error while the gateway is misconfigured; /healthz stays up', async () => {
    const r = await fetch(`${broken.url}/readyz`);
    expect(r.status).toBe(503);
    const body = (await r.json()) as { ok: boolean; error: { code: string; message: string } };
    expect(body.ok).toBe(false);
    expect(body.error.code).toBe('config_error');
    expect(body.error.message).toMatch(/MAX_BODY_BYTES/);
    expect((await fetch(`${broken.url}/healthz`)).status).toBe(200);
  });
});

describe('agent --metrics-port', () => {
  it('serves /healthz and /metrics on 127.0.0.1, and a job moves the counters', async () => {
    expect(agent.logs()).toContain(`metrics: http://127.0.0.1:${metricsPort}/metrics`);
    expect(await scrape('/healthz')).toMatchObject({ status: 200 });
    const before = (await scrape()).body;
    expect(sample(before, 'gatehouse_agent_connected')).toBe(1);
    const r = await client.callTool({ name: 'execute', arguments: { command: 'true' } });
    expect((r.structuredContent as { exit_code: number }).exit_code).toBe(0);
    const after = (await scrape()).body;
    expect(sample(after, 'gatehouse_agent_jobs_started_total')).toBe(sample(before, 'gatehouse_agent_jobs_started_total') + 1);
    expect(sample(after, `gatehouse_agent_sandbox_starts_total{sandbox="${SANDBOX}"}`)).toBe(
      sample(before, `gatehouse_agent_sandbox_starts_total{sandbox="${SANDBOX}"}`) + 1,
    );
    expect(sample(after, `gatehouse_agent_sandbox_failures_total{sandbox="${SANDBOX}"}`)).toBe(0);
    expect(sample(after, 'gatehouse_agent_jobs_ended_total{state="exited"}')).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'gatehouse_agent_jobs_running')).toBe(0);
    expect(sample(after, 'gatehouse_agent_reconnects_total')).toBe(0);
  });

  /** Runs `gatehouse agent` with `args` until it exits: its status and output. */
  const runAgent = (args: string[]) =>
    new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = spawn(process.execPath, [join(ROOT, 'executor/main.ts'), '--url', gw.url, '--root', root, ...args], {
        cwd: ROOT,
        env: { ...process.env, GATEHOUSE_AGENT_TOKEN: agentToken },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      p.stdout.on('data', (d) => (out += d));
      p.stderr.on('data', (d) => (out += d));
      p.on('exit', (code) => resolve({ code, out }));
    });

  it('refuses a bad port value by name, and a port in use', async () => {
    const bad = await runAgent(['--sandbox', SANDBOX, '--allow-no-isolation', '--metrics-port', '70000']);
    expect(bad.code).toBe(2);
    expect(bad.out).toContain('error: --metrics-port must be between 1 and 65535, got 70000 (a TCP port on 127.0.0.1)');
    const taken = await runAgent(['--sandbox', SANDBOX, '--allow-no-isolation', '--id', 'obs-second', '--metrics-port', String(metricsPort)]);
    expect(taken.code).toBe(1);
    expect(taken.out).toContain(`cannot serve metrics on 127.0.0.1:${metricsPort} (--metrics-port)`);
    expect(taken.out).toContain('EADDRINUSE');
  });
});
