/**
 * Agent tokens hold what their grant says (src/contracts/agent-grant.ts), end to end: the real
 * gateway (`wrangler dev`), real agent processes (`node executor/main.ts`) and, for what a hostile
 * token holder sends that the real agent never would, a hand-made socket. An agent whose `hello`
 * claims a sandbox, a label or an agent id its token does not grant is closed with 4403 and
 * audited, and gets none of the team's jobs; a token without a grant still connects as before.
 * The gVisor claim by a real agent needs runsc (skipped outside CI when it is missing).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rawAgent as rawAgentOf } from '../support/raw-agent.ts';
import { SignJWT, decodeJwt, importJWK } from 'jose';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, requireParts, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { call } from './fleet.ts';
import { until } from '../support/until.ts';
import { runCli } from '../support/cli.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';
import { AGENT_CLAIM_REFUSED_CLOSE, AGENT_REFUSED_EXIT_CODE, type AgentGrant } from '../../src/contracts/agent-grant.ts';

type S = Record<string, any>;

const SANDBOX = testSandbox();
const RUNSC = requireParts({ runsc: hasCommand('runsc') });
if (!RUNSC) console.warn('agent-claims.test.ts: the real agent claiming gVisor is skipped — runsc is not installed (allowed outside CI only)');

const TEAM = 'claims';
/** A test that starts agents: generous (a loaded machine starts sandboxes slowly); never a timing assertion. */
const AGENT_TEST_MS = 300_000;
const POLICY = { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 8, queueWaitMs: 30_000 } };

let gw: Gateway;
let client: Client;
const agents: AgentProcess[] = [];
const roots: string[] = [];

async function admin(method: string, path: string, body?: unknown): Promise<{ status: number; json: S }> {
  const token = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'claims-admin' });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as S };
}

/** An agent token minted through the admin API, as an admin does it (with a grant, or without one). */
async function agentToken(subject: string, grant?: Partial<AgentGrant>): Promise<string> {
  const r = await admin('POST', '/tokens', { subject, scopes: ['agent'], ...(grant ? { agentGrant: grant } : {}) });
  if (r.status !== 201) throw new Error(`POST /tokens: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json.token as string;
}

function runAgent(token: string, o: { id: string; sandbox?: 'gvisor' | 'bwrap' | 'none'; labels?: string[]; extraArgs?: string[] }): AgentProcess {
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-claims-'));
  roots.push(root);
  const a = startAgent(gw, {
    token,
    root,
    sandbox: o.sandbox ?? SANDBOX,
    capacity: 2,
    agentId: o.id,
    extraArgs: [...(o.labels ?? []).flatMap((l) => ['--label', l]), ...(o.extraArgs ?? [])],
  });
  agents.push(a);
  return a;
}

/** The agent process's exit status; fails (with its log) if it keeps running. */
async function exitOf(a: AgentProcess): Promise<number | null> {
  if (a.proc.exitCode === null && a.proc.signalCode === null) {
    await until(async () => a.proc.exitCode !== null || a.proc.signalCode !== null, 90_000, 'the refused agent to exit').catch((e: Error) => {
      throw new Error(`${e.message}; its log:\n${a.logs()}`);
    });
  }
  return a.proc.exitCode;
}

async function agentView(id: string): Promise<S | undefined> {
  return ((await admin('GET', '/agents')).json.agents as S[] | undefined)?.find((x) => x.agent_id === id);
}

async function waitConnected(a: AgentProcess, id: string): Promise<void> {
  await until(
    async () => {
      if (a.proc.exitCode !== null) throw new Error(`agent ${id} exited (${a.proc.exitCode}):\n${a.logs()}`);
      return (await agentView(id))?.state === 'connected';
    },
    150_000,
    `agent ${id} to connect`,
  ).catch((e: Error) => {
    throw new Error(`${e.message}; its log:\n${a.logs()}`);
  });
}

/** The team's audit rows of refused agent connections whose command names `agentId`. */
async function refusals(agentId: string): Promise<S[]> {
  const r = await admin('GET', '/audit?tool=agent.connect&limit=200');
  expect(r.status).toBe(200);
  return (r.json.entries as S[]).filter((e) => e.command?.agentId === agentId);
}

const rawAgent = (token: string) => rawAgentOf(gw.url, token);

const hello = (agentId: string, claims: { sandbox: string; labels?: string[] }) =>
  JSON.stringify({
    type: 'hello',
    v: PROTOCOL_VERSION,
    agentId,
    version: 'attack',
    capacity: 4,
    sandbox: claims.sandbox,
    runtimes: [],
    labels: claims.labels ?? [],
    running: [],
  });

/** The job's answer: ran (its stdout) or was refused (its message). */
async function echo(word: string, placement: S = {}): Promise<{ ran: boolean; text: string }> {
  const r = await call(client, 'execute', { command: 'echo', args: [word], ...placement });
  return { ran: !r.r.isError && r.s.stdout === `${word}\n`, text: r.t };
}

beforeAll(async () => {
  gw = await startGateway();
  await gw.putPolicy(TEAM, POLICY);
  client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
}, 120_000);

afterAll(async () => {
  await client?.close().catch(() => {});
  for (const a of agents) await a.stop().catch(() => {});
  await gw?.stop();
  for (const d of roots) rmSync(d, { recursive: true, force: true });
});

describe('minting an agent token with a grant', () => {
  it('puts the grant in the token, the token list and the audit row; the CLI takes it as flags and lists it', async () => {
    const r = await admin('POST', '/tokens', {
      subject: 'grant-api',
      scopes: ['agent'],
      agentGrant: { sandboxes: ['gvisor', 'bwrap', 'gvisor'], labels: ['gpu'], agentId: 'build-1' },
    });
    expect(r.status).toBe(201);
    const grant = { sandboxes: ['gvisor', 'bwrap'], labels: ['gpu'], agentId: 'build-1' };
    expect(r.json.agentGrant).toEqual(grant);
    expect(decodeJwt(r.json.token).agent_grant).toEqual(grant);
    const list = await admin('GET', '/tokens');
    expect(list.json.tokens.find((t: S) => t.jti === r.json.jti)).toMatchObject({ subject: 'grant-api', agentGrant: grant });
    const plain = await admin('POST', '/tokens', { subject: 'grant-none', scopes: ['agent'] });
    expect(plain.json.agentGrant).toBeNull();
    expect(decodeJwt(plain.json.token).agent_grant).toBeUndefined();
    const audit = await admin('GET', '/audit?tool=admin.token_create&limit=50');
    expect(audit.json.entries.find((e: S) => e.command?.jti === r.json.jti)?.command.agentGrant).toEqual(grant);

    const adminToken = await gw.token({ team: TEAM, scopes: ['admin'] });
    const made = await runCli(gw.url, adminToken, [
      'token',
      'create',
      '--scope',
      'agent',
      '--subject',
      'grant-cli',
      '--sandbox',
      'bwrap',
      '--label',
      'linux',
      '--label',
      'gpu',
      '--agent-id',
      'build-9',
    ]);
    expect(made.code, made.stderr).toBe(0);
    expect(decodeJwt(made.stdout.trim()).agent_grant).toEqual({ sandboxes: ['bwrap'], labels: ['linux', 'gpu'], agentId: 'build-9' });
    expect(made.stderr).toContain('agent claims: sandbox bwrap; labels linux,gpu; id build-9');
    const listed = await runCli(gw.url, adminToken, ['token', 'list']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain('AGENT CLAIMS');
    expect(listed.stdout.split('\n').find((l) => l.includes('grant-cli'))).toContain('sandbox bwrap; labels linux,gpu; id build-9');
    expect(listed.stdout.split('\n').find((l) => l.includes('grant-none'))).toContain('any (not restricted)');
  });

  it('refuses a grant that is malformed or on a token without the agent scope, saying what is allowed', async () => {
    const bad = async (agentGrant: unknown, scopes = ['agent']) => {
      const r = await admin('POST', '/tokens', { subject: 'bad-grant', scopes, agentGrant });
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe('invalid_argument');
      return r.json.error.message as string;
    };
    expect(await bad({ sandboxes: ['gvisr'] })).toBe('agentGrant.sandboxes.0: unknown sandbox "gvisr"; allowed: gvisor, bwrap, none');
    expect(await bad({ sandboxes: [] })).toBe('agentGrant.sandboxes: name at least one sandbox the agent may claim (gvisor, bwrap, none)');
    expect(await bad({ labels: ['gpu'] })).toMatch(/^agentGrant\.sandboxes: /);
    expect(await bad({ sandboxes: ['bwrap'], labels: ['has space'] })).toBe('agentGrant.labels.0: labels are 1-64 characters of letters, digits, . _ : = -');
    expect(await bad({ sandboxes: ['bwrap'], agentId: 'a/b' })).toMatch(/^agentGrant\.agentId: agentId must be 1-128 characters/);
    expect(await bad({ sandbox: ['bwrap'] })).toMatch(/unknown key "sandbox" \(did you mean "sandboxes"\?\); valid keys: sandboxes, labels, agentId/);
    expect(await bad({ sandboxes: ['bwrap'] }, ['execute'])).toBe(
      'agentGrant: says what an agent may claim, so it needs the "agent" scope (scopes: execute); add "agent" to scopes or leave agentGrant out',
    );
    const misnamed = await admin('POST', '/tokens', { subject: 'bad-grant', scopes: ['agent'], agent: { sandboxes: ['bwrap'] } });
    expect(misnamed.json.error.message).toMatch(/unknown key "agent" \(did you mean "agentGrant"\?\)/);

    const adminToken = await gw.token({ team: TEAM, scopes: ['admin'] });
    const noSandbox = await runCli(gw.url, adminToken, ['token', 'create', '--scope', 'agent', '--label', 'gpu']);
    expect(noSandbox.code).toBe(2);
    expect(noSandbox.stderr).toMatch(/add --sandbox \(gvisor, bwrap, none\)/);
    const typo = await runCli(gw.url, adminToken, ['token', 'create', '--scope', 'agent', '--sandbox', 'gvisr']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('--sandbox: unknown sandbox "gvisr"; allowed: gvisor, bwrap, none');
    const noScope = await runCli(gw.url, adminToken, ['token', 'create', '--scope', 'execute', '--sandbox', 'bwrap']);
    expect(noScope.code).toBe(2);
    expect(noScope.stderr).toMatch(/need --scope agent/);
  });

  it('refuses a token whose agent_grant claim is malformed, never reading it as unrestricted', async () => {
    const key = await importJWK(JSON.parse(gw.signingKey), 'ES256');
    const token = await new SignJWT({ team: TEAM, scope: 'agent', agent_grant: { sandboxes: 'gvisor' } })
      .setProtectedHeader({ alg: 'ES256', kid: JSON.parse(gw.signingKey).kid, typ: 'JWT' })
      .setIssuer(gw.issuer)
      .setAudience(gw.audience)
      .setSubject('forged-grant')
      .setIssuedAt()
      .setExpirationTime('1h')
      .setJti('forged-grant-1')
      .sign(key);
    const r = await fetch(`${gw.url}/agent/v1/connect`, { headers: { Authorization: `Bearer ${token}` } });
    expect(r.status).toBe(401);
    expect(((await r.json()) as S).error.message).toMatch(/invalid "agent_grant" claim: sandboxes: /);
  });
});

describe('an agent connects with what its token grants, and nothing more', () => {
  it(
    'an agent that claims what its token grants connects and runs the jobs placed on it',
    async () => {
      const token = await agentToken('claims-a', { sandboxes: [SANDBOX], labels: ['linux'], agentId: 'claims-a' });
      const a = runAgent(token, { id: 'claims-a', labels: ['linux'] });
      await waitConnected(a, 'claims-a');
      expect(await agentView('claims-a')).toMatchObject({ sandbox: SANDBOX, labels: ['linux'] });
      const r = await echo('granted', { labels: ['linux'] });
      expect(r, r.text).toMatchObject({ ran: true });
    },
    AGENT_TEST_MS,
  );

  it(
    'a token granted bwrap cannot claim gvisor: a hand-made hello is closed with 4403 and audited, and a gvisor-floor job is not dispatched to it',
    async () => {
      const token = await agentToken('claims-impostor', { sandboxes: ['bwrap'] });
      const impostor = await rawAgent(token);
      impostor.ws.send(hello('impostor-gvisor', { sandbox: 'gvisor' }));
      const closed = await impostor.closed;
      expect(closed).toEqual({ code: AGENT_CLAIM_REFUSED_CLOSE, reason: 'sandbox "gvisor" not granted to this token (granted: bwrap)' });
      expect(impostor.messages.map((m) => m.type)).not.toContain('welcome');
      expect(await agentView('impostor-gvisor')).toBeUndefined();
      const [row] = await until(
        async () => {
          const r = await refusals('impostor-gvisor');
          return r.length ? r : null;
        },
        30_000,
        'the refusal audit row',
      );
      expect(row).toMatchObject({
        subject: 'claims-impostor',
        decision: 'denied',
        reason: 'sandbox "gvisor" not granted to this token (granted: bwrap)',
        command: { agentId: 'impostor-gvisor', sandbox: 'gvisor', labels: [], claim: 'sandbox' },
      });

      // The team asks for gVisor: the only connected agent (claims-a, not gVisor) cannot take the job, and nobody runs it.
      await gw.putPolicy(TEAM, { ...POLICY, sandbox: { minimum: 'gvisor' } });
      try {
        const r = await echo('for-gvisor-only');
        expect(r.ran).toBe(false);
        expect(r.text).toMatch(/sandbox floor \(sandbox\.minimum = gvisor\)/);
      } finally {
        await gw.putPolicy(TEAM, POLICY);
      }
      expect(impostor.messages.map((m) => m.type)).not.toContain('job.start');
    },
    AGENT_TEST_MS,
  );

  it.skipIf(!RUNSC)(
    'a real agent running gVisor with a token granted only bwrap is refused, says why, and exits without reconnecting',
    async () => {
      const token = await agentToken('claims-real-gvisor', { sandboxes: ['bwrap'] });
      const a = runAgent(token, { id: 'real-gvisor', sandbox: 'gvisor', extraArgs: ['--warm', '0'] });
      expect(await exitOf(a)).toBe(AGENT_REFUSED_EXIT_CODE);
      expect(a.logs()).toContain(
        `the gateway refused this agent (close code ${AGENT_CLAIM_REFUSED_CLOSE}): sandbox "gvisor" not granted to this token (granted: bwrap)`,
      );
      expect(a.logs()).toContain('not reconnecting');
      expect(a.logs()).not.toMatch(/connected to /);
      expect(await refusals('real-gvisor')).toHaveLength(1);
    },
    AGENT_TEST_MS,
  );

  it(
    'a label the token does not grant is refused (the real agent exits, audited), and a job asking for that label is not dispatched to it',
    async () => {
      const token = await agentToken('claims-labels', { sandboxes: [SANDBOX], labels: ['linux'] });
      const a = runAgent(token, { id: 'claims-gpu', labels: ['linux', 'gpu'] });
      expect(await exitOf(a)).toBe(AGENT_REFUSED_EXIT_CODE);
      expect(a.logs()).toContain(`(close code ${AGENT_CLAIM_REFUSED_CLOSE}): label "gpu" not granted to this token (granted: linux)`);
      expect(await refusals('claims-gpu')).toMatchObject([
        { subject: 'claims-labels', decision: 'denied', command: { labels: ['linux', 'gpu'], claim: 'labels' } },
      ]);
      const r = await echo('needs-gpu', { labels: ['gpu'] });
      expect(r.ran).toBe(false);
      expect(r.text).toMatch(/no connected executor agent carries all the labels/);

      // The same token claiming only what it grants connects.
      const ok = runAgent(token, { id: 'claims-linux', labels: ['linux'] });
      await waitConnected(ok, 'claims-linux');
    },
    AGENT_TEST_MS,
  );

  it(
    'a token for one agent id cannot connect as another (the real agent exits, audited); with its own id it connects and gets its jobs',
    async () => {
      const token = await agentToken('claims-fixed', { sandboxes: [SANDBOX], agentId: 'build-1' });
      const other = runAgent(token, { id: 'build-2' });
      expect(await exitOf(other)).toBe(AGENT_REFUSED_EXIT_CODE);
      expect(other.logs()).toContain('agent id "build-2" not granted: this token is for agent id "build-1" (--id)');
      expect(await refusals('build-2')).toMatchObject([{ subject: 'claims-fixed', command: { claim: 'agentId' } }]);
      expect(await agentView('build-2')).toBeUndefined();

      const own = runAgent(token, { id: 'build-1' });
      await waitConnected(own, 'build-1');
      const r = await echo('on-build-1', { agent: 'build-1' });
      expect(r, r.text).toMatchObject({ ran: true });
    },
    AGENT_TEST_MS,
  );

  it(
    'a second hello on a welcomed connection cannot widen its claims: the connection is closed and the agent gets no more jobs',
    async () => {
      const token = await agentToken('claims-rehello', { sandboxes: ['none'] });
      const raw = await rawAgent(token);
      raw.ws.send(hello('rehello', { sandbox: 'none' }));
      await until(async () => raw.messages.some((m) => m.type === 'welcome'), 30_000, 'welcome');
      await until(async () => (await agentView('rehello'))?.state === 'connected', 30_000, 'rehello listed connected');
      raw.ws.send(hello('rehello', { sandbox: 'gvisor', labels: ['gpu'] }));
      expect(await raw.closed).toEqual({ code: AGENT_CLAIM_REFUSED_CLOSE, reason: 'sandbox "gvisor" not granted to this token (granted: none)' });
      // The registry keeps what was granted and claimed, and the agent is gone.
      expect(await agentView('rehello')).toMatchObject({ state: 'disconnected', sandbox: 'none', labels: [] });
      expect(await refusals('rehello')).toHaveLength(1);
    },
    AGENT_TEST_MS,
  );

  it(
    'a token minted without a grant (admin API or offline) still connects claiming what its agent says',
    async () => {
      const fromApi = await agentToken('claims-legacy');
      const a = runAgent(fromApi, { id: 'legacy-api', labels: ['gpu'] });
      await waitConnected(a, 'legacy-api');
      expect(await agentView('legacy-api')).toMatchObject({ sandbox: SANDBOX, labels: ['gpu'] });
      const r = await echo('on-legacy', { labels: ['gpu'] });
      expect(r, r.text).toMatchObject({ ran: true });

      const offline = await gw.token({ team: TEAM, scopes: ['agent'], subject: 'claims-offline' });
      const raw = await rawAgent(offline);
      raw.ws.send(hello('legacy-offline', { sandbox: 'gvisor', labels: ['anything'] }));
      await until(async () => raw.messages.some((m) => m.type === 'welcome'), 30_000, 'welcome for the token without a grant');
      raw.ws.close();
    },
    AGENT_TEST_MS,
  );
});
