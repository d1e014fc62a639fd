/**
 * Human approval of `ask` decisions, end to end with the real parts: wrangler dev (D1, DO), a real
 * agent, the official SDK v2 client pinned to 2026-07-28 with an elicitation handler (the
 * approval prompt rides `input_required`), the SDK v1 client without elicitation (approval id,
 * the `gatehouse approvals` CLI, retry), and the audit log that ties the ask, the decision and
 * the run together.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2, specTypeSchemas, withInputRequired } from '@modelcontextprotocol/client';
import { connectMcp, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { runCli, type CliRun } from '../support/cli.ts';

const SANDBOX = testSandbox();
const TEAM = 'appr';
/** Short lifetimes, to see expiry; no agent needed — nothing there ever runs. */
const FAST = 'appr-fast';
const OTHER = 'appr-other';
/** `approvals.askClient: false`: only a team admin may approve. */
const ADMIN_ONLY = 'appr-admin-only';
const RULE = { pattern: ['echo', 'ship-it'], decision: 'ask', reason: 'shipping needs a person' };
/** runtime_execute's python code waits for a person too (its argv starts with the runtime's executable). */
const PY_RULE = { pattern: [['python3', 'python']], decision: 'ask', reason: 'python code needs a person', tools: ['runtime_execute'] };

let gw: Gateway;
let agent: AgentProcess;
let root: string;
let adminToken: string;
const open: { close(): Promise<void> }[] = [];

type Answer = { action: 'accept'; content: { approve: boolean } } | { action: 'decline' } | { action: 'cancel' };

/** SDK v2 client pinned to 2026-07-28; with `answer`, it declares form elicitation and answers every prompt so. */
async function modern(team: string, o: { answer?: Answer; subject?: string; manual?: boolean } = {}) {
  const token = await gw.token({ team, scopes: ['execute'], subject: o.subject ?? 'alice' });
  const prompts: string[] = [];
  const c = new ClientV2(
    { name: 'approval-2026', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: o.answer || o.manual ? { elicitation: { form: {} } } : {},
      ...(o.manual ? { inputRequired: { autoFulfill: false } } : {}),
    },
  );
  if (o.answer) {
    const answer = o.answer;
    c.setRequestHandler('elicitation/create', async (req) => {
      prompts.push(String((req.params as { message?: string }).message));
      return answer;
    });
  }
  await c.connect(new TransportV2(new URL(gw.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  expect(c.getNegotiatedProtocolVersion()).toBe('2026-07-28');
  open.push(c);
  return { c, prompts };
}

type ToolResult = {
  isError?: boolean;
  content?: { type: string; text?: string }[];
  structuredContent?: Record<string, any>;
  resultType?: string;
  requestState?: string;
  inputRequests?: Record<string, any>;
};

function execute(c: { callTool(p: unknown, o?: unknown): Promise<unknown> }, args: Record<string, unknown>): Promise<ToolResult> {
  return c.callTool({ name: 'execute', arguments: args }, { timeout: 60_000 }) as Promise<ToolResult>;
}

/** One raw round of the manual multi-round-trip path: the input_required result comes back as is. */
function round(c: ClientV2, args: Record<string, unknown>, retry?: { requestState?: string; inputResponses?: Record<string, unknown> }): Promise<ToolResult> {
  return c.request(
    { method: 'tools/call', params: { name: 'execute', arguments: args, ...(retry ?? {}) } },
    withInputRequired(specTypeSchemas.CallToolResult),
    { allowInputRequired: true, timeout: 60_000 },
  ) as Promise<ToolResult>;
}

function cli(args: string[], token = adminToken): Promise<CliRun> {
  return runCli(gw.url, token, args);
}

async function admin(method: string, path: string, team = TEAM, body?: unknown): Promise<{ status: number; json: any }> {
  const token = team === TEAM ? adminToken : await gw.token({ team, scopes: ['admin'], subject: 'ops' });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

const auditOf = async (approvalId: string, team = TEAM) => (await admin('GET', `/audit?approval=${approvalId}`, team)).json.entries as any[];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'gatehouse-approval-'));
  gw = await startGateway();
  adminToken = await gw.token({ team: TEAM, scopes: ['admin'], subject: 'ops' });
  const policy = { ...DEFAULT_POLICY, rules: [RULE, PY_RULE] };
  await gw.putPolicy(TEAM, policy);
  await gw.putPolicy(OTHER, policy);
  await gw.putPolicy(ADMIN_ONLY, { ...policy, approvals: { askClient: false } });
  await gw.putPolicy(FAST, { ...policy, approvals: { ttlSeconds: 1, promptTtlSeconds: 1 } });
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: SANDBOX, capacity: 2, agentId: 'approval-agent' });
  await agent.ready;
}, 180_000);

afterAll(async () => {
  for (const c of open) await c.close().catch(() => {});
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('policy_check reports ask', () => {
  it('says the call needs approval, which rule, and why', async () => {
    const c = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'] }));
    open.push(c);
    const r = (await c.callTool({ name: 'policy_check', arguments: { command: 'echo', args: ['ship-it', 'now'] } })) as ToolResult;
    expect(r.structuredContent).toMatchObject({
      allowed: false,
      decision: 'ask',
      stage: 'rules',
      reason: 'Approval required by rule 1: shipping needs a person',
    });
    const ok = (await c.callTool({ name: 'policy_check', arguments: { command: 'echo', args: ['hello'] } })) as ToolResult;
    expect(ok.structuredContent).toMatchObject({ allowed: true, decision: 'allow' });
  });
  it('the admin dry run says ask, and gatehouse policy check exits 3 (needs approval)', async () => {
    const r = await admin('POST', '/policy/check', TEAM, { command: 'echo', args: ['ship-it'] });
    expect(r.json).toMatchObject({ allowed: false, decision: 'ask', stage: 'rules' });
    const c = await cli(['policy', 'check', '--', 'echo', 'ship-it']);
    expect(c.code, c.stderr).toBe(3);
    expect(c.stdout).toContain('needs approval (rules): Approval required by rule 1: shipping needs a person');
    expect((await cli(['policy', 'check', '--', 'echo', 'hello'])).code).toBe(0);
  });
});

describe('a 2026-07-28 client with elicitation: the approval prompt', () => {
  it('approve → the job runs on the agent, and the audit links the ask, the answer and the run', async () => {
    const { c, prompts } = await modern(TEAM, { answer: { action: 'accept', content: { approve: true } } });
    const r = await execute(c, { command: 'echo', args: ['ship-it', 'approved-by-prompt'] });
    expect(r.isError, JSON.stringify(r)).toBeFalsy();
    expect(r.structuredContent).toMatchObject({ stdout: 'ship-it approved-by-prompt\n', exit_code: 0 });
    expect(prompts).toHaveLength(1);
    expect(prompts[0]).toContain('shipping needs a person');
    expect(prompts[0]).toContain('echo ship-it approved-by-prompt');
    const approvalId = /approval (ap_[A-Za-z0-9_-]{22})/.exec(prompts[0])![1];
    const rows = await auditOf(approvalId);
    expect(rows.map((x) => `${x.tool}:${x.decision}`)).toEqual(['execute:allowed', 'approval.elicitation:allowed', 'execute:asked']);
    expect(rows[0].jobId).toBe(r.structuredContent!.job_id);
    expect(rows[0].reason).toContain('approved by alice');
    const a = (await admin('GET', `/approvals/${approvalId}`)).json.approval;
    expect(a).toMatchObject({ status: 'used', channel: 'elicitation', subject: 'alice', job_id: r.structuredContent!.job_id });
  });

  for (const answer of [{ action: 'accept', content: { approve: false } }, { action: 'decline' }, { action: 'cancel' }] as Answer[]) {
    it(`${answer.action}${answer.action === 'accept' ? ' with approve=false' : ''} → denied, nothing runs`, async () => {
      const { c, prompts } = await modern(TEAM, { answer });
      const r = await execute(c, { command: 'echo', args: ['ship-it', `refused-${answer.action}`] });
      expect(r.isError).toBe(true);
      expect(r.structuredContent?.error?.code).toBe('approval_denied');
      expect(r.content?.[0]?.text).toMatch(/the person asked to approve this run (answered no|declined|cancelled)/);
      const approvalId = /approval (ap_[A-Za-z0-9_-]{22})/.exec(prompts[0])![1];
      const rows = await auditOf(approvalId);
      expect(rows.map((x) => `${x.tool}:${x.decision}`)).toEqual(['execute:denied', 'approval.elicitation:denied', 'execute:asked']);
      expect((await admin('GET', `/approvals/${approvalId}`)).json.approval).toMatchObject({ status: 'denied', job_id: null });
    });
  }

  it('tampered request state is refused before any tool runs; replayed state is refused', async () => {
    const { c } = await modern(TEAM, { manual: true });
    const args = { command: 'echo', args: ['ship-it', 'replay'] };
    const first = await round(c, args);
    expect(first.resultType).toBe('input_required');
    expect(first.inputRequests?.approval?.method ?? first.inputRequests?.approval).toBeTruthy();
    const state = first.requestState!;
    expect(state).toMatch(/^v1\./);
    const yes = { approval: { action: 'accept', content: { approve: true } } };
    // Flip one character of the payload: the MAC no longer holds.
    const body = state.split('.')[1];
    const tampered = `v1.${body.slice(0, -2)}${body.at(-2) === 'A' ? 'B' : 'A'}${body.at(-1)}.${state.split('.')[2]}`;
    await expect(round(c, args, { requestState: tampered, inputResponses: yes })).rejects.toMatchObject({ code: -32602 });
    // State minted for alice does not work for bob of the same team.
    const bob = await modern(TEAM, { manual: true, subject: 'bob' });
    await expect(round(bob.c, args, { requestState: state, inputResponses: yes })).rejects.toMatchObject({ code: -32602 });
    // State for one request does not approve another.
    const other = await round(c, { command: 'echo', args: ['ship-it', 'something-else'] }, { requestState: state, inputResponses: yes });
    expect(other.structuredContent?.error?.code).toBe('approval_mismatch');
    // The genuine answer runs once …
    const ran = await round(c, args, { requestState: state, inputResponses: yes });
    expect(ran.isError, JSON.stringify(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({ stdout: 'ship-it replay\n' });
    // … and the same state and answer again run nothing.
    const again = await round(c, args, { requestState: state, inputResponses: yes });
    expect(again.isError).toBe(true);
    expect(again.structuredContent?.error?.code).toBe('approval_used');
  });

  it('an expired prompt is denied with the reason', async () => {
    const { c } = await modern(FAST, { manual: true });
    const args = { command: 'echo', args: ['ship-it', 'late'] };
    const first = await round(c, args);
    expect(first.resultType).toBe('input_required');
    await new Promise((r) => setTimeout(r, 2500)); // promptTtlSeconds is 1
    const late = await round(c, args, { requestState: first.requestState, inputResponses: { approval: { action: 'accept', content: { approve: true } } } });
    expect(late.isError).toBe(true);
    expect(late.structuredContent?.error?.code).toBe('approval_expired');
    expect(late.content?.[0]?.text).toContain('the approval prompt expired before it was answered');
  });

  it('under approvals.askClient = false the client is never asked, even if it could answer', async () => {
    const { c, prompts } = await modern(ADMIN_ONLY, { answer: { action: 'accept', content: { approve: true } } });
    const r = await execute(c, { command: 'echo', args: ['ship-it', 'admin-only'] });
    expect(prompts).toHaveLength(0);
    expect(r.isError).toBe(true);
    expect(r.structuredContent?.error?.code).toBe('approval_required');
  });

  it('a 2026 client that did not declare elicitation gets the admin flow', async () => {
    const { c } = await modern(TEAM);
    const r = await execute(c, { command: 'echo', args: ['ship-it', 'no-elicitation'] });
    expect(r.isError).toBe(true);
    expect(r.structuredContent?.error?.code).toBe('approval_required');
    expect(r.structuredContent?.approval?.id).toMatch(/^ap_/);
  });
});

describe('a client without elicitation (SDK v1, 2025-11-25): approval id, CLI approval, retry', () => {
  it('approval_required names the id and how to get it approved; the CLI approves; the retry runs once', async () => {
    const alice = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'], subject: 'carol' }));
    open.push(alice);
    const args = { command: 'echo', args: ['ship-it', 'via-cli'] };
    const asked = (await alice.callTool({ name: 'execute', arguments: args })) as ToolResult;
    expect(asked.isError).toBe(true);
    expect(asked.structuredContent?.error?.code).toBe('approval_required');
    const approval = asked.structuredContent!.approval;
    expect(approval).toMatchObject({ status: 'pending', reason: 'shipping needs a person', approve_with: `gatehouse approvals approve ${approval.id}` });
    const text = asked.content![0].text!;
    expect(text).toContain(`Pending approval ${approval.id}`);
    expect(text).toContain(`"approval_id": "${approval.id}"`);
    // Asking again before a decision does not flood the list: the same pending approval comes back.
    const again = (await alice.callTool({ name: 'execute', arguments: args })) as ToolResult;
    expect(again.structuredContent!.approval.id).toBe(approval.id);
    // Retrying before approval is refused as pending.
    const early = (await alice.callTool({ name: 'execute', arguments: { ...args, approval_id: approval.id } })) as ToolResult;
    expect(early.structuredContent?.error?.code).toBe('approval_pending');

    const listed = await cli(['approvals', 'list', '--status', 'pending']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`${approval.id}\\s+pending\\s+carol\\s+.*echo ship-it via-cli`));
    const shown = await cli(['approvals', 'show', approval.id]);
    expect(shown.stdout).toContain('why:      shipping needs a person');
    const ok = await cli(['approvals', 'approve', approval.id, '--note', 'release day']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`approved ${approval.id}`);
    // Deciding twice is refused with what happened.
    const twice = await cli(['approvals', 'deny', approval.id]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain('approved already');

    // Another subject of the same team, and another team, cannot use it.
    const bob = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'], subject: 'bob' }));
    open.push(bob);
    const stolen = (await bob.callTool({ name: 'execute', arguments: { ...args, approval_id: approval.id } })) as ToolResult;
    expect(stolen.structuredContent?.error?.code).toBe('approval_not_found');
    const foreign = await connectMcp(gw.mcpUrl, await gw.token({ team: OTHER, scopes: ['execute'], subject: 'carol' }));
    open.push(foreign);
    const foreignTry = (await foreign.callTool({ name: 'execute', arguments: { ...args, approval_id: approval.id } })) as ToolResult;
    expect(foreignTry.structuredContent?.error?.code).toBe('approval_not_found');
    expect((await admin('GET', `/approvals/${approval.id}`, OTHER)).status).toBe(404);
    // Another command with this approval is refused.
    const swapped = (await alice.callTool({
      name: 'execute',
      arguments: { command: 'echo', args: ['ship-it', 'something-else'], approval_id: approval.id },
    })) as ToolResult;
    expect(swapped.structuredContent?.error?.code).toBe('approval_mismatch');

    const ran = (await alice.callTool({ name: 'execute', arguments: { ...args, approval_id: approval.id } })) as ToolResult;
    expect(ran.isError, JSON.stringify(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({ stdout: 'ship-it via-cli\n', exit_code: 0 });
    const second = (await alice.callTool({ name: 'execute', arguments: { ...args, approval_id: approval.id } })) as ToolResult;
    expect(second.isError).toBe(true);
    expect(second.structuredContent?.error?.code).toBe('approval_used');
    expect(second.content![0].text).toContain(String(ran.structuredContent!.job_id));

    const rows = await auditOf(approval.id);
    const story = rows.map((x) => `${x.tool}:${x.decision}:${x.subject}`);
    expect(story).toContain('admin.approval_approve:allowed:ops');
    expect(story.filter((s) => s === 'execute:asked:carol')).toHaveLength(2);
    const run = rows.find((x) => x.tool === 'execute' && x.decision === 'allowed');
    expect(run.jobId).toBe(ran.structuredContent!.job_id);
    expect(run.reason).toContain('approved by ops');
    expect(rows.filter((x) => x.tool === 'execute' && x.decision === 'allowed')).toHaveLength(1);
    const final = (await admin('GET', `/approvals/${approval.id}`)).json.approval;
    expect(final).toMatchObject({ status: 'used', decided_by: 'ops', note: 'release day', job_id: ran.structuredContent!.job_id });
  });

  it('a 2025-era client that declares elicitation gets the admin flow too (a stateless endpoint cannot ask it)', async () => {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
    const c = new Client({ name: 'approval-2025-elicit', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    let asked = 0;
    c.setRequestHandler(ElicitRequestSchema, async () => {
      asked++;
      return { action: 'accept', content: { approve: true } };
    });
    const token = await gw.token({ team: TEAM, scopes: ['execute'], subject: 'frank' });
    await c.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    open.push(c);
    const r = (await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['ship-it', 'legacy-elicit'] } })) as ToolResult;
    expect(asked).toBe(0);
    expect(r.structuredContent?.error?.code).toBe('approval_required');
  });

  it('retries racing for one approval: exactly one runs', async () => {
    const c = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'], subject: 'gina' }));
    open.push(c);
    const args = { command: 'echo', args: ['ship-it', 'race'] };
    const id = ((await c.callTool({ name: 'execute', arguments: args })) as ToolResult).structuredContent!.approval.id;
    expect((await admin('POST', `/approvals/${id}/approve`)).status).toBe(200);
    const all = (await Promise.all(
      [1, 2, 3, 4].map(() => c.callTool({ name: 'execute', arguments: { ...args, approval_id: id } }, undefined, { timeout: 60_000 })),
    )) as ToolResult[];
    const ran = all.filter((r) => !r.isError);
    expect(ran).toHaveLength(1);
    expect(ran[0].structuredContent).toMatchObject({ stdout: 'ship-it race\n' });
    expect(all.filter((r) => r.structuredContent?.error?.code === 'approval_used')).toHaveLength(3);
  });

  it('runtime_execute asks too, and runs the approved code with approvalId', async () => {
    const c = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'], subject: 'hank' }));
    open.push(c);
    const args = { runtime: 'python', code: 'print(6 * 7)', outputMode: 'summary' };
    const asked = (await c.callTool({ name: 'runtime_execute', arguments: args })) as ToolResult;
    expect(asked.isError).toBe(true);
    expect(asked.structuredContent).toMatchObject({
      status: 'denied',
      error: { code: 'approval_required' },
      approval: { status: 'pending', reason: 'python code needs a person' },
    });
    const id = asked.structuredContent!.approval.id;
    expect(asked.content![0].text).toContain(`"approvalId": "${id}"`);
    expect((await admin('POST', `/approvals/${id}/approve`)).status).toBe(200);
    // The code is part of what was approved.
    const other = (await c.callTool({ name: 'runtime_execute', arguments: { ...args, code: 'print(0)', approvalId: id } })) as ToolResult;
    expect(other.structuredContent?.error?.code).toBe('approval_mismatch');
    const ran = (await c.callTool({ name: 'runtime_execute', arguments: { ...args, approvalId: id } })) as ToolResult;
    expect(ran.isError, JSON.stringify(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({ status: 'success', exitCode: 0 });
    expect(JSON.stringify(ran.structuredContent)).toContain('42');
  });

  it('an admin denial is final: the retry is denied with who denied it', async () => {
    const c = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'], subject: 'dave' }));
    open.push(c);
    const args = { command: 'echo', args: ['ship-it', 'denied'] };
    const asked = (await c.callTool({ name: 'execute', arguments: args })) as ToolResult;
    const id = asked.structuredContent!.approval.id;
    const r = await admin('POST', `/approvals/${id}/deny`, TEAM, { note: 'not today' });
    expect(r.status).toBe(200);
    expect(r.json.approval).toMatchObject({ status: 'denied', decided_by: 'ops', note: 'not today' });
    const retry = (await c.callTool({ name: 'execute', arguments: { ...args, approval_id: id } })) as ToolResult;
    expect(retry.structuredContent?.error?.code).toBe('approval_denied');
    expect(retry.content![0].text).toContain('denied by ops');
    expect(retry.content![0].text).toContain('not today');
  });

  it('an approval not used in time expires', async () => {
    const c = await connectMcp(gw.mcpUrl, await gw.token({ team: FAST, scopes: ['execute'], subject: 'erin' }));
    open.push(c);
    const args = { command: 'echo', args: ['ship-it', 'too-late'] };
    const id = ((await c.callTool({ name: 'execute', arguments: args })) as ToolResult).structuredContent!.approval.id;
    const ok = await admin('POST', `/approvals/${id}/approve`, FAST);
    expect(ok.status).toBe(200);
    await new Promise((r) => setTimeout(r, 2500)); // ttlSeconds is 1
    const retry = (await c.callTool({ name: 'execute', arguments: { ...args, approval_id: id } })) as ToolResult;
    expect(retry.structuredContent?.error?.code).toBe('approval_expired');
    expect((await admin('GET', `/approvals?status=expired`, FAST)).json.approvals.map((a: { id: string }) => a.id)).toContain(id);
  });

  it('bad input to the approvals API and CLI gets a clear error', async () => {
    expect((await admin('GET', '/approvals?status=maybe')).json.error.message).toContain('status must be one of pending, approved, denied, used, expired');
    expect((await admin('POST', '/approvals/nope/approve')).json.error.message).toContain('malformed approval id');
    expect((await admin('POST', '/approvals/ap_AAAAAAAAAAAAAAAAAAAAAA/approve')).status).toBe(404);
    const c = await connectMcp(gw.mcpUrl, await gw.token({ team: TEAM, scopes: ['execute'] }));
    open.push(c);
    const bad = (await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['x'], approval_id: 'nope' } })) as ToolResult;
    expect(bad.isError).toBe(true);
    expect(bad.content![0].text).toContain('approval id looks like');
    const usage = await cli(['approvals', 'approve']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('exactly one id');
  });
});
