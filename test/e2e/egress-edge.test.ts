/**
 * Governed network egress at the edge, end to end through the real gateway (`wrangler dev`) and
 * the official MCP client: policy_check shows the grant a command gets, the grant travels in the
 * job's spec, an `egress.ask` becomes an approval that an admin approves or denies (or that expires)
 * and is answered with `egress.answer`, an `egress.log` is stored and shown in job_status, the admin
 * API's job, the audit page's list and `gatehouse jobs show`.
 *
 * The agents here are scripted over the agent WebSocket (the protocol a real agent speaks, sent by
 * hand): what is tested is the edge's side, and the attacks need messages a real agent never sends —
 * another agent's and another team's agent's asks and logs about a job, and oversized logs. The
 * agent's proxy is tested with real sandboxes by the agent side's tests (docs/network.md).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'undici';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startGateway, type Gateway } from './harness.ts';
import { call as callTool } from './fleet.ts';
import { until } from '../support/until.ts';
import { runCli } from '../support/cli.ts';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { aria, goTo } from '../support/dashboard-page.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';
import { EGRESS_ASK_WAIT_MS, type EgressConnection } from '../../src/contracts/network.ts';
import { presetEntries } from '../../src/policy/network-presets.ts';

type S = Record<string, any>;

const TEAM = 'egress-edge';
const OTHER = 'egress-other';
/** Generous: a loaded machine runs wrangler dev slowly; never a timing assertion. */
const WAIT_MS = 60_000;
/** Each test's own limit: several waits of WAIT_MS at most. */
const TEST_MS = 240_000;
const POLICY = {
  ...DEFAULT_POLICY,
  executables: { allow: [...DEFAULT_POLICY.executables.allow, 'npm'] },
  sandbox: { minimum: 'bwrap' },
  limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 8 },
  network: { mode: 'allowlist', allow: [{ host: 'intranet.example.org', methods: ['GET'] }], unlisted: 'ask' },
  rules: [
    { pattern: ['npm', 'ci'], decision: 'allow', network: { mode: 'allowlist', presets: ['package-registries'] } },
    { pattern: ['node'], decision: 'allow', network: { mode: 'off' } },
  ],
};

/** An agent spoken by hand: hello, heartbeats listing the jobs it holds, and whatever the test sends. */
class ScriptedAgent {
  readonly got: S[] = [];
  readonly holds = new Set<string>();
  private timer: ReturnType<typeof setInterval> | null = null;
  readonly id: string;
  private readonly ws: WebSocket;
  private constructor(id: string, ws: WebSocket) {
    this.id = id;
    this.ws = ws;
  }

  /** `running`: the jobs it says it holds (a reconnect). */
  static async connect(gw: Gateway, team: string, id: string, running: string[] = []): Promise<ScriptedAgent> {
    const token = await gw.token({ team, scopes: ['agent'], subject: `agent-${id}` });
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/agent/v1/connect`, { headers: { Authorization: `Bearer ${token}` } });
    const a = new ScriptedAgent(id, ws);
    for (const j of running) a.holds.add(j);
    ws.addEventListener('message', (e) => {
      if (typeof e.data !== 'string') return;
      const m = JSON.parse(e.data) as S;
      a.got.push(m);
      if (m.type === 'job.start') a.holds.add(m.spec.jobId);
      if (m.type === 'welcome') a.timer = setInterval(() => a.send({ type: 'heartbeat', running: [...a.holds] }), m.heartbeatMs);
    });
    ws.addEventListener('error', () => {});
    await new Promise<void>((res, rej) => {
      ws.addEventListener('open', () => res());
      ws.addEventListener('close', (e) => rej(new Error(`agent ${id} closed: ${e.code} ${e.reason}`)));
    });
    a.send({ type: 'hello', v: PROTOCOL_VERSION, agentId: id, version: 'scripted', capacity: 8, sandbox: 'bwrap', runtimes: [], labels: [], running });
    await a.next((m) => m.type === 'welcome');
    return a;
  }

  send(m: unknown): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m));
  }

  next(f: (m: S) => boolean, ms = WAIT_MS, what = 'a message'): Promise<S> {
    return until(async () => this.got.find(f), ms, `${what} on agent ${this.id}`);
  }

  /** The job's end as an agent reports it (no artifacts uploaded). */
  exit(jobId: string): void {
    const empty = { bytes: 0, lines: 0, artifactTruncated: false };
    this.send({
      type: 'job.exit',
      jobId,
      state: 'exited',
      exitCode: 0,
      signal: null,
      timedOut: false,
      durationMs: 5,
      stdout: '',
      stderr: '',
      stdoutTruncated: false,
      stderrTruncated: false,
      streams: { stdout: empty, stderr: empty },
      artifactsUploaded: false,
    });
    this.holds.delete(jobId);
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.ws.close(1000, 'done');
  }
}

/** A tool call with its structured result as loose JSON. */
async function call(c: Client, name: string, args: S) {
  const r = await callTool(c, name, args);
  return { ...r, s: r.s as S };
}

let gw: Gateway;
let client: Client;
let a: ScriptedAgent;
let b: ScriptedAgent;
let stranger: ScriptedAgent;
/** A job whose ask nobody decides: started first, its expiry is checked last. */
let slowJob: string;
/** The job whose connections were logged (the dashboard shows them). */
let loggedJob: string;

// In the page (puppeteer serializes these callbacks); the test tsconfig has no DOM lib.
declare const document: any;

async function admin(team: string, method: string, path: string): Promise<{ status: number; json: S }> {
  const token = await gw.token({ team, scopes: ['admin'], subject: 'egress-admin' });
  const r = await fetch(`${gw.url}/admin/v1${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
  return { status: r.status, json: (await r.json()) as S };
}

/** A background job on `agent`: its id once the agent got its `job.start`. */
async function startJob(c: Client, agent: ScriptedAgent, command: string): Promise<{ jobId: string; spec: S }> {
  const r = await call(c, 'execute', { command, background: true, agent: agent.id });
  expect(r.r.isError, r.t).toBeFalsy();
  const jobId = r.s.job_id as string;
  const start = await agent.next((m) => m.type === 'job.start' && m.spec.jobId === jobId, WAIT_MS, `job.start of ${jobId}`);
  return { jobId, spec: start.spec as S };
}

/** The pending egress approval whose summary names `jobId` and `host`. */
function pendingApproval(jobId: string, host: string): Promise<S> {
  return until(
    async () =>
      ((await admin(TEAM, 'GET', '/approvals?status=pending')).json.approvals as S[]).find(
        (x) => x.tool === 'egress' && x.summary.includes(jobId) && x.summary.includes(host),
      ),
    WAIT_MS,
    `the approval for ${host}`,
  );
}

const SHOTS = fileURLToPath(new URL('../screenshots', import.meta.url));

const conn = (o: Partial<EgressConnection>): EgressConnection => ({
  host: 'registry.npmjs.org',
  port: 443,
  address: '104.16.0.35',
  method: 'CONNECT',
  decision: 'allowed',
  reason: 'rules[0].network preset package-registries',
  bytesUp: 1200,
  bytesDown: 48_000,
  startedAt: new Date().toISOString(),
  ms: 40,
  ...o,
});

describe('network egress at the edge', () => {
  beforeAll(async () => {
    // 5 s heartbeats: an agent away is lost after 15 s, time enough for a decision to come while it is away.
    gw = await startGateway({ vars: { HEARTBEAT_MS: '5000' } });
    await gw.putPolicy(TEAM, POLICY);
    await gw.putPolicy(OTHER, { ...POLICY, sandbox: { minimum: 'none' } });
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    a = await ScriptedAgent.connect(gw, TEAM, 'scripted-a');
    b = await ScriptedAgent.connect(gw, TEAM, 'scripted-b');
    stranger = await ScriptedAgent.connect(gw, OTHER, 'scripted-other');
    // The ask nobody decides goes first: its EGRESS_ASK_WAIT_MS runs while the other tests do.
    slowJob = (await startJob(client, a, 'echo slow')).jobId;
    a.send({ type: 'egress.ask', jobId: slowJob, askId: 'slow-1', host: 'nobody-decides.example.org', port: 443 });
    await pendingApproval(slowJob, 'nobody-decides.example.org');
  }, 300_000);

  afterAll(async () => {
    for (const x of [a, b, stranger]) x?.close();
    await client?.close();
    await gw?.stop();
  });

  it(
    'policy_check shows the network each command would get and the policy key that decides it',
    async () => {
      const npm = await call(client, 'policy_check', { command: 'npm', args: ['ci'] });
      expect(npm.s.network).toMatchObject({ mode: 'allowlist', source: 'rules[0].network', presets: ['package-registries'], unlisted: 'deny' });
      expect(npm.s.network.hosts).toContain('registry.npmjs.org GET HEAD');
      expect(npm.s.network.hosts).toContain('files.pythonhosted.org GET HEAD');
      expect(npm.s.network.sandbox_note).toBeUndefined();
      expect(npm.t).toContain('network: allowlist (rules[0].network)');
      const node = await call(client, 'policy_check', { command: 'node', args: ['build.js'] });
      expect(node.s.network).toMatchObject({ mode: 'off', source: 'rules[1].network', hosts: [] });
      expect(node.t).toContain('network: off (rules[1].network): the job gets no network');
      const echo = await call(client, 'policy_check', { command: 'echo', args: ['hi'] });
      expect(echo.s.network).toMatchObject({ mode: 'allowlist', source: 'network', unlisted: 'ask', hosts: ['intranet.example.org GET'] });
      // A team whose jobs may go to sandbox "none" agents is told that they cannot enforce it.
      const other = await gw.mcp(OTHER, ['execute']);
      const weak = await call(other, 'policy_check', { command: 'npm', args: ['ci'] });
      expect(weak.s.network.sandbox_note).toContain('sandbox gvisor or bwrap');
      await other.close();
      const denied = await call(client, 'policy_check', { command: 'wget', args: ['x'] });
      expect(denied.s.decision).toBe('deny');
      expect(denied.s.network).toBeUndefined();
    },
    TEST_MS,
  );

  it(
    "puts the command's grant, presets expanded, in the job spec the agent gets",
    async () => {
      const { spec } = await startJob(client, a, 'npm ci');
      expect(spec.network).toEqual({
        mode: 'allowlist',
        allow: presetEntries('package-registries'),
        unlisted: 'deny',
        maxBytesUp: 64 << 20,
        maxBytesDown: 1 << 30,
        source: 'rules[0].network',
      });
      a.exit(spec.jobId);
      const off = await startJob(client, a, 'node build.js');
      expect(off.spec.network).toMatchObject({ mode: 'off', allow: [], source: 'rules[1].network' });
      a.exit(off.jobId);
    },
    TEST_MS,
  );

  it(
    'an answer decided while the agent was away reaches it when it asks again after reconnecting',
    async () => {
      const away = await ScriptedAgent.connect(gw, TEAM, 'scripted-away');
      const { jobId } = await startJob(client, away, 'echo away');
      away.send({ type: 'egress.ask', jobId, askId: 'away-1', host: 'away.example.org', port: 443 });
      const ap = await pendingApproval(jobId, 'away.example.org');
      away.close();
      expect((await admin(TEAM, 'POST', `/approvals/${ap.id}/approve`)).status).toBe(200);
      // The edge takes the decision (its alarm reads D1 every second) while no socket of the agent is there to tell.
      await until(async () => (await admin(TEAM, 'GET', `/approvals/${ap.id}`)).json.approval.status === 'used', WAIT_MS, 'the decision taken');
      const back = await ScriptedAgent.connect(gw, TEAM, 'scripted-away', [jobId]);
      try {
        // Nothing arrives unasked; the same ask again (what the agent's proxy sends after a reconnect) is answered.
        expect(back.got.some((m) => m.type === 'egress.answer')).toBe(false);
        back.send({ type: 'egress.ask', jobId, askId: 'away-1', host: 'away.example.org', port: 443 });
        const answer = await back.next((m) => m.type === 'egress.answer' && m.askId === 'away-1');
        expect(answer).toEqual({ type: 'egress.answer', jobId, askId: 'away-1', decision: 'allow', by: `approval ${ap.id} (approved by egress-admin)` });
        expect((await call(client, 'job_status', { job_id: jobId })).s.state).toBe('running');
        back.exit(jobId);
      } finally {
        back.close();
      }
    },
    TEST_MS,
  );

  it(
    'an ask becomes an approval; approved, the agent is told allow',
    async () => {
      const { jobId } = await startJob(client, a, 'echo approve-me');
      a.send({ type: 'egress.ask', jobId, askId: 'ask-1', host: 'files.example.org', port: 443 });
      const ap = await pendingApproval(jobId, 'files.example.org');
      expect(ap.summary).toBe(`job ${jobId} wants to connect to files.example.org:443; command: echo approve-me`);
      expect(a.got.some((m) => m.type === 'egress.answer' && m.askId === 'ask-1')).toBe(false);
      const r = await admin(TEAM, 'POST', `/approvals/${ap.id}/approve`);
      expect(r.status).toBe(200);
      const answer = await a.next((m) => m.type === 'egress.answer' && m.askId === 'ask-1');
      expect(answer).toEqual({ type: 'egress.answer', jobId, askId: 'ask-1', decision: 'allow', by: `approval ${ap.id} (approved by egress-admin)` });
      expect((await admin(TEAM, 'GET', `/approvals/${ap.id}`)).json.approval).toMatchObject({ status: 'used', job_id: jobId });
      a.exit(jobId);
    },
    TEST_MS,
  );

  it(
    'an ask denied by an admin is answered deny',
    async () => {
      const { jobId } = await startJob(client, a, 'echo deny-me');
      a.send({ type: 'egress.ask', jobId, askId: 'ask-2', host: 'paste.example.org', port: 443, method: 'POST' });
      const ap = await pendingApproval(jobId, 'paste.example.org');
      expect(ap.summary).toContain('paste.example.org:443 (POST)');
      expect((await admin(TEAM, 'POST', `/approvals/${ap.id}/deny`)).status).toBe(200);
      const answer = await a.next((m) => m.type === 'egress.answer' && m.askId === 'ask-2');
      expect(answer).toMatchObject({ jobId, decision: 'deny', by: `approval ${ap.id} (denied by egress-admin)` });
      a.exit(jobId);
    },
    TEST_MS,
  );

  it(
    "stores the job's connections and shows them in job_status, the job's admin view, the audit list and the CLI",
    async () => {
      const { jobId } = await startJob(client, a, 'npm ci');
      loggedJob = jobId;
      a.send({
        type: 'egress.log',
        jobId,
        connections: [
          conn({ credential: 'NPM_TOKEN' }),
          conn({ host: 'evil.example', port: 443, address: undefined, decision: 'refused', reason: 'not in rules[0].network.allow', bytesUp: 0, bytesDown: 0 }),
        ],
      });
      a.exit(jobId);
      const status = await until(
        async () => {
          const r = await call(client, 'job_status', { job_id: jobId });
          return r.s.state === 'exited' && r.s.network?.connections?.length === 2 ? r : null;
        },
        WAIT_MS,
        "the job's connections in job_status",
      );
      expect(status.s.network).toMatchObject({
        mode: 'allowlist',
        source: 'rules[0].network',
        allowed: 1,
        refused: 1,
        dropped: 0,
        bytes_up: 1200,
        bytes_down: 48_000,
      });
      expect(status.s.network.connections[1]).toMatchObject({
        host: 'evil.example',
        port: 443,
        address: null,
        decision: 'refused',
        reason: 'not in rules[0].network.allow',
      });
      const job = await admin(TEAM, 'GET', `/jobs/${jobId}`);
      expect(job.json.job.network.connections.map((c: S) => c.host)).toEqual(['registry.npmjs.org', 'evil.example']);
      const refused = await admin(TEAM, 'GET', '/audit/egress?refused=1');
      expect(refused.json.connections.find((c: S) => c.job_id === jobId)).toMatchObject({ host: 'evil.example', reason: 'not in rules[0].network.allow' });
      const cli = await runCli(gw.url, await gw.token({ team: TEAM, scopes: ['admin'] }), ['jobs', 'show', jobId]);
      expect(cli.code, cli.stderr).toBe(0);
      expect(cli.stdout).toContain('network:  allowlist (rules[0].network): 1 allowed, 1 refused');
      expect(cli.stdout).toMatch(/evil\.example:443\s+CONNECT\s+refused/);
    },
    TEST_MS,
  );

  it.skipIf(!HAVE_CHROMIUM)(
    "the dashboard's job page and audit page list the job's connections (Chromium)",
    async () => {
      requireChromium('the egress dashboard test');
      const profile = mkdtempSync(join(tmpdir(), 'gatehouse-chromium-'));
      const browser = await launchChromium(profile);
      try {
        const page = await browser.newPage();
        await page.goto(`${gw.url}/dashboard`);
        await page.waitForSelector(aria('Admin token'));
        await page.keyboard.type(await gw.token({ team: TEAM, scopes: ['admin'], subject: 'egress-admin' }));
        await page.keyboard.press('Enter');
        await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Overview', { timeout: 15_000 });
        await goTo(page, `#/jobs/${loggedJob}`, 'Job');
        await page.waitForSelector('caption ::-p-text(Connections of this job)', { timeout: 15_000 });
        const section: string = await page.$eval('section.network', (e: any) => e.innerText);
        expect(section).toContain('rules[0].network');
        expect(section).toContain('1 allowed, 1 refused');
        expect(section).toMatch(/evil\.example:443[\s\S]*refused[\s\S]*not in rules\[0\]\.network\.allow/);
        await goTo(page, '#/audit', 'Audit log');
        await page.waitForSelector('tr[data-egress-decision="refused"]', { timeout: 15_000 });
        const row: string = await page.$eval('tr[data-egress-decision="refused"]', (e: any) => e.innerText);
        expect(row).toContain('evil.example:443');
        expect(row).toContain(loggedJob);
        // The allowed connection names the credential the proxy added; the refused one none.
        const used: string = await page.$eval('tr[data-egress-decision="allowed"] td[data-credential]', (e: any) => e.innerText);
        expect(used).toBe('NPM_TOKEN');
        expect(await page.$eval('tr[data-egress-decision="refused"] td[data-credential]', (e: any) => e.innerText)).toBe('');
        expect(await page.$$eval('table th', (ths: any[]) => ths.map((t) => t.innerText))).toContain('Credential');
        mkdirSync(SHOTS, { recursive: true });
        await page.screenshot({ path: join(SHOTS, 'audit-egress-credential.png'), fullPage: true });
      } finally {
        await browser.close();
        rmSync(profile, { recursive: true, force: true });
      }
    },
    TEST_MS,
  );

  it(
    "attack: another agent of the team, and another team's agent, cannot ask or log for a job that is not theirs",
    async () => {
      const { jobId } = await startJob(client, a, 'echo victim');
      const own = await startJob(client, b, 'node own.js');
      b.send({ type: 'egress.log', jobId, connections: [conn({ host: 'forged-by-b.example', reason: 'forged' })] });
      b.send({ type: 'egress.ask', jobId, askId: 'forged-b', host: 'forged-by-b.example', port: 443 });
      // Messages of one socket are handled in order: b's answer about its own job means the forged ones were handled.
      b.send({ type: 'egress.ask', jobId: own.jobId, askId: 'sync-b', host: 'x.example.org', port: 443 });
      expect(await b.next((m) => m.type === 'egress.answer' && m.askId === 'sync-b')).toMatchObject({
        decision: 'deny',
        by: 'policy: rules[1].network.mode is "off"',
      });
      const otherClient = await gw.mcp(OTHER, ['execute']);
      const theirs = await startJob(otherClient, stranger, 'node theirs.js');
      stranger.send({ type: 'egress.log', jobId, connections: [conn({ host: 'forged-by-other-team.example', reason: 'forged' })] });
      stranger.send({ type: 'egress.ask', jobId, askId: 'forged-o', host: 'forged-by-other-team.example', port: 443 });
      stranger.send({ type: 'egress.ask', jobId: theirs.jobId, askId: 'sync-o', host: 'x.example.org', port: 443 });
      await stranger.next((m) => m.type === 'egress.answer' && m.askId === 'sync-o');
      await otherClient.close();
      a.exit(jobId);
      const status = await until(
        async () => {
          const r = await call(client, 'job_status', { job_id: jobId });
          return r.s.state === 'exited' ? r : null;
        },
        WAIT_MS,
        'the victim job to end',
      );
      expect(status.s.network?.connections ?? []).toEqual([]);
      const approvals = (await admin(TEAM, 'GET', '/approvals')).json.approvals as S[];
      expect(approvals.filter((x) => x.summary.includes('forged'))).toEqual([]);
      expect(a.got.concat(b.got, stranger.got).filter((m) => m.type === 'egress.answer' && String(m.askId).startsWith('forged'))).toEqual([]);
      expect(((await admin(OTHER, 'GET', '/audit/egress')).json.connections as S[]).length).toBe(0);
    },
    TEST_MS,
  );

  it(
    "attack: the job's own agent cannot store an oversized log (over 50 connections, or a field over its limit)",
    async () => {
      const { jobId } = await startJob(client, a, 'npm ci');
      a.send({ type: 'egress.log', jobId, connections: Array.from({ length: 51 }, (_, i) => conn({ host: `h${i}.example.org` })) });
      a.send({ type: 'egress.log', jobId, connections: [conn({ host: 'long-reason.example', reason: 'x'.repeat(200_000) })] });
      a.send({ type: 'egress.log', jobId, connections: [conn({ host: 'negative.example', bytesUp: -5 })] });
      a.send({ type: 'egress.ask', jobId, askId: 'sync-a', host: 'x.example.org', port: 443 });
      expect(await a.next((m) => m.type === 'egress.answer' && m.askId === 'sync-a')).toMatchObject({
        decision: 'deny',
        by: 'policy: rules[0].network.unlisted is "deny"',
      });
      a.exit(jobId);
      const status = await until(
        async () => {
          const r = await call(client, 'job_status', { job_id: jobId });
          return r.s.state === 'exited' && r.s.network ? r : null;
        },
        WAIT_MS,
        'the job to end',
      );
      expect(status.s.network.connections).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'an ask no one decides is answered deny when EGRESS_ASK_WAIT_MS has passed',
    async () => {
      const answer = await a.next((m) => m.type === 'egress.answer' && m.askId === 'slow-1', EGRESS_ASK_WAIT_MS + 120_000, 'the expiry of the undecided ask');
      expect(answer).toMatchObject({ jobId: slowJob, decision: 'deny' });
      expect(answer.by).toMatch(/^expired: no decision within 120 s \(approval ap_/);
      a.exit(slowJob);
    },
    EGRESS_ASK_WAIT_MS + 180_000,
  );
});
