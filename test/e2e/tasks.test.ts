/**
 * MCP Tasks (`io.modelcontextprotocol/tasks`, protocol revision 2026-07-28) end to end: the real
 * gateway (`wrangler dev`), a real agent (bubblewrap) and official clients — the SDK v2 client
 * pinned to 2026-07-28, and the extension's own requester (`@modelcontextprotocol/ext-tasks`)
 * on top of it. A long job becomes a task whose id is the job id; tasks/get shows it working and
 * then completed with the tool's result; tasks/cancel kills its whole process tree; a gateway
 * restart keeps it; another team and another subject get "not found"; a client that does not
 * declare the extension gets a plain result.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, type TaskEnabledSession } from '@modelcontextprotocol/ext-tasks/client';
import { CompletedTaskV2Schema, CreateTaskResultV2Schema, WorkingTaskV2Schema } from '@modelcontextprotocol/ext-tasks/core/v2';
import { hasCommand, requireParts, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { CLIENT_INFO, PROTOCOL_VERSION, capabilities, post, request, type JsonRpcResponse } from '../support/mcp2026-raw.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

const SANDBOX = testSandbox();
const BWRAP = requireParts({ bwrap: hasCommand('bwrap') });
if (!BWRAP) console.warn('tasks.test.ts: skipped — bubblewrap is not installed (allowed outside CI only)');

const TEAM = 'tasks';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let token: string;

async function sdkClient(declareTasks: boolean): Promise<Client> {
  const c = new Client(
    { name: CLIENT_INFO.name, version: CLIENT_INFO.version },
    { versionNegotiation: { mode: { pin: PROTOCOL_VERSION } }, capabilities: capabilities(declareTasks) },
  );
  await c.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  expect(c.getNegotiatedProtocolVersion()).toBe(PROTOCOL_VERSION);
  return c;
}

/** The extension's requester over the SDK client; task traffic goes through `rawDispatch` (the SDK codecs do not carry it). */
function taskSession(client: Client, as = token): TaskEnabledSession {
  return createTaskSessionFromClient(client, {
    endpointId: 'gatehouse-tasks-test',
    rawDispatch: async (message, options) => {
      const m = message as { id?: number; method: string; params?: Record<string, unknown> };
      const r = await post(gw.mcpUrl, as, m, options?.signal);
      return (r.error ? { kind: 'error', error: r.error } : { kind: 'result', result: r.result }) as never;
    },
    v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo: CLIENT_INFO, clientCapabilities: capabilities(true) as never },
  });
}

const waitFor = async (file: string, ms = 20_000) => {
  for (let t = 0; t < ms && !existsSync(join(root, file)); t += 50) await new Promise((r) => setTimeout(r, 50));
  return existsSync(join(root, file));
};

async function getTask(taskId: string, as = token, declare = true): Promise<JsonRpcResponse> {
  return request(gw.mcpUrl, as, 'tasks/get', { taskId }, declare);
}

/** Polls tasks/get (raw) until the task leaves `working`. */
async function settle(taskId: string, ms = 60_000): Promise<Record<string, unknown>> {
  for (let t = 0; t < ms; t += 500) {
    const r = await getTask(taskId);
    if (r.error) throw new Error(`tasks/get: ${r.error.code} ${r.error.message}`);
    if (r.result!.status !== 'working') return r.result!;
    await new Promise((res) => setTimeout(res, 500));
  }
  throw new Error(`task ${taskId} still working after ${ms} ms`);
}

const maybe = BWRAP ? describe : describe.skip;

maybe('MCP Tasks on /mcp (io.modelcontextprotocol/tasks)', () => {
  beforeAll(async () => {
    gw = await startGateway();
    root = mkdtempSync(join(tmpdir(), 'gatehouse-tasks-'));
    await gw.putPolicy(TEAM, {
      ...DEFAULT_POLICY,
      shell: { enabled: true, allow: ['/.*/'] },
      executables: { allow: [...DEFAULT_POLICY.executables.allow, 'sh', 'touch', 'sleep'] },
    });
    agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: SANDBOX, capacity: 4, agentId: 'tasks-agent' });
    await agent.ready;
    token = await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'], subject: 'alice' });
  }, 240_000); // wrangler dev + an agent: slow when the machine is shared

  afterAll(async () => {
    await agent?.stop();
    await gw?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('advertises the extension to 2026-07-28 clients and says which tools may become tasks', async () => {
    const c = await sdkClient(true);
    try {
      expect(c.getServerCapabilities()?.extensions).toHaveProperty(['io.modelcontextprotocol/tasks']);
      const { tools } = await c.listTools();
      const support = Object.fromEntries(tools.map((t) => [t.name, t._meta?.['gatehouse/taskSupport']]));
      expect(support).toMatchObject({ execute: 'optional', runtime_execute: 'optional', run_script: 'forbidden' });
    } finally {
      await c.close();
    }
  }, 60_000);

  it("a long job becomes a task (id = job id): working, then completed with the tool's own result", async () => {
    const c = await sdkClient(true);
    const session = taskSession(c);
    try {
      const execution = await session.callTool('execute', { command: 'echo started; sleep 4; echo finished' });
      expect(execution.kind).toBe('task');
      const taskId = execution.handle!.taskId;
      // The task id is the job id: the job_* tools see the same job.
      const js = await c.callTool({ name: 'job_status', arguments: { job_id: taskId } });
      expect((js.structuredContent as { state: string }).state).toMatch(/queued|running/);
      const working = await getTask(taskId);
      expect(WorkingTaskV2Schema.safeParse(working.result).success, JSON.stringify(working)).toBe(true);
      expect(working.result).toMatchObject({ resultType: 'complete', status: 'working', taskId, ttlMs: 7 * 24 * 3600_000 });
      const seen: string[] = [];
      const { outcome } = await execution.settle({
        onEvent: (e) => {
          if (e.type === 'task') seen.push(e.task.status);
        },
      });
      expect(outcome.status).toBe('completed');
      const result = (outcome as unknown as { result: { structuredContent: { stdout: string; exit_code: number; job_id: string }; isError?: boolean } }).result;
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toMatchObject({ stdout: 'started\nfinished\n', exit_code: 0, job_id: taskId });
      expect(seen[0] ?? 'working').toBe('working');
      // tasks/get keeps answering with the inlined result, in the published wire shape.
      const done = await getTask(taskId);
      expect(CompletedTaskV2Schema.safeParse(done.result).success, JSON.stringify(done)).toBe(true);
      expect(done.result).toMatchObject({ status: 'completed', result: { resultType: 'complete', structuredContent: { stdout: 'started\nfinished\n' } } });
    } finally {
      await session.close();
      await c.close();
    }
  }, 90_000);

  it("runtime_execute keeps its outputMode in the task's result; every answer has the extension's wire shape", async () => {
    const created = await request(
      gw.mcpUrl,
      token,
      'tools/call',
      {
        name: 'runtime_execute',
        arguments: {
          runtime: 'python',
          code: 'import time\ntime.sleep(2)\nprint("alpha")\nprint("needle-beta")',
          outputMode: 'intent',
          queryTerms: ['needle'],
          contextLines: 0,
        },
      },
      true,
    );
    expect(CreateTaskResultV2Schema.safeParse(created.result).success, JSON.stringify(created)).toBe(true);
    const taskId = created.result!.taskId as string;
    // Flat Result & Task: no v1 `task` wrapper, no v1 `ttl`/`pollInterval` names, no `requestState`; integer milliseconds.
    expect(created.result).toMatchObject({ resultType: 'task', status: 'working' });
    for (const key of ['task', 'ttl', 'pollInterval', 'requestState', 'content']) expect(created.result, key).not.toHaveProperty(key);
    expect(Number.isInteger(created.result!.ttlMs) && Number.isInteger(created.result!.pollIntervalMs)).toBe(true);
    // The update and cancel acknowledgements are complete results; an update for a task that asks nothing changes nothing.
    const update = await request(gw.mcpUrl, token, 'tasks/update', { taskId, inputResponses: { 'never-asked': { action: 'accept' } } }, true);
    expect(update.result).toMatchObject({ resultType: 'complete' });
    const done = await settle(taskId);
    for (const key of ['requestState', 'ttl', 'pollInterval']) expect(done, key).not.toHaveProperty(key);
    expect((done.result as { _meta?: Record<string, unknown> })._meta ?? {}).not.toHaveProperty(['io.modelcontextprotocol/related-task']);
    const cancelDone = await request(gw.mcpUrl, token, 'tasks/cancel', { taskId }, true);
    expect(cancelDone.result).toMatchObject({ resultType: 'complete' });
    expect((await getTask(taskId)).result).toMatchObject({ status: 'completed' });
    expect(done.status).toBe('completed');
    const sc = (done.result as { structuredContent: { status: string; excerpts: { content: string }[] } }).structuredContent;
    expect(sc.status).toBe('success');
    expect(sc.excerpts.map((e) => e.content).join('\n')).toContain('needle-beta');
    expect(sc.excerpts.map((e) => e.content).join('\n')).not.toContain('alpha');
  }, 90_000);

  it('a quick job answers at once with a plain result, even to a client that declares the extension', async () => {
    const r = await request(gw.mcpUrl, token, 'tools/call', { name: 'execute', arguments: { command: 'echo', args: ['quick'] } }, true);
    // Under a loaded machine a quick job may miss the wait and become a task: both answers are valid.
    if (r.result!.resultType === 'task') {
      expect((await settle(r.result!.taskId as string)).result).toMatchObject({ structuredContent: { stdout: 'quick\n' } });
    } else {
      expect(r.result).toMatchObject({ resultType: 'complete', structuredContent: { stdout: 'quick\n', exit_code: 0 } });
    }
  }, 60_000);

  it('a client that does not declare the extension gets a plain result for the same long job', async () => {
    const c = await sdkClient(false);
    try {
      const r = await c.callTool({ name: 'execute', arguments: { command: 'sleep 2; echo plain' } }, { timeout: 60_000 });
      expect(r.isError).toBeFalsy();
      expect(r).not.toHaveProperty('taskId');
      expect(r.structuredContent).toMatchObject({ stdout: 'plain\n', exit_code: 0 });
      // And the task methods refuse it: the capability must be declared on each request.
      const get = await getTask('anything', token, false);
      expect(get.error?.code).toBe(-32021);
      expect(get.error?.data).toEqual({ requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } });
    } finally {
      await c.close();
    }
  }, 60_000);

  it("tasks/cancel kills the job's whole process tree and the task reads cancelled", async () => {
    const c = await sdkClient(true);
    const session = taskSession(c);
    try {
      const marker = 'task-cancel';
      const execution = await session.callTool('execute', {
        command: `touch ${marker}-running; (sleep 4; touch ${marker}-child) & sleep 4; touch ${marker}-parent; wait`,
      });
      expect(execution.kind).toBe('task');
      expect(await waitFor(`${marker}-running`)).toBe(true);
      await execution.cancel();
      const end = await settle(execution.handle!.taskId);
      expect(end.status).toBe('cancelled');
      await new Promise((r) => setTimeout(r, 6_000));
      expect(existsSync(join(root, `${marker}-parent`))).toBe(false);
      expect(existsSync(join(root, `${marker}-child`))).toBe(false);
      const js = await c.callTool({ name: 'job_status', arguments: { job_id: execution.handle!.taskId } });
      expect((js.structuredContent as { state: string }).state).toBe('cancelled');
      // Audited like job_kill: who cancelled which task.
      const adminToken = await gw.token({ team: TEAM, scopes: ['admin'] });
      const audit = await fetch(`${gw.url}/admin/v1/audit?tool=job_kill&subject=alice`, { headers: { Authorization: `Bearer ${adminToken}` } });
      const entries = ((await audit.json()) as { entries: { jobId?: string; job_id?: string; command: unknown; reason: string }[] }).entries;
      expect(JSON.stringify(entries)).toContain(execution.handle!.taskId);
      expect(JSON.stringify(entries)).toContain('tasks/cancel');
    } finally {
      await session.close();
      await c.close();
    }
  }, 90_000);

  it('another team and another subject get "not found"; their cancel does not touch the job', async () => {
    const marker = 'task-foreign';
    const created = await request(gw.mcpUrl, token, 'tools/call', { name: 'execute', arguments: { command: `sleep 3; touch ${marker}-done` } }, true);
    expect(created.result!.resultType).toBe('task');
    const taskId = created.result!.taskId as string;
    const otherTeam = await gw.token({ team: 'tasks-other', scopes: ['execute', 'artifacts:read'], subject: 'alice' });
    const otherSubject = await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'], subject: 'mallory' });
    for (const as of [otherTeam, otherSubject]) {
      for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
        const r = await request(gw.mcpUrl, as, method, method === 'tasks/update' ? { taskId, inputResponses: {} } : { taskId }, true);
        expect(r.error?.code, `${method}: ${JSON.stringify(r)}`).toBe(-32602);
        expect(r.error?.message).toMatch(/not found/);
      }
    }
    // The owner's task ran to its end: nobody else's cancel reached it.
    expect((await settle(taskId)).status).toBe('completed');
    expect(existsSync(join(root, `${marker}-done`))).toBe(true);
    const unknown = await getTask('00000000-0000-4000-8000-000000000000');
    expect(unknown.error?.code).toBe(-32602);
  }, 90_000);

  it('a gateway restart in the middle of a task keeps it: the same task id completes afterwards', async () => {
    const c = await sdkClient(true);
    const session = taskSession(c);
    const execution = await session.callTool('execute', { command: 'sleep 6; echo survived' });
    if (execution.kind !== 'task') throw new Error(`expected a task, got an immediate result`);
    const reference = execution.serializeReference();
    await execution.detach();
    await session.close();
    await c.close();
    await gw.restart();
    const c2 = await sdkClient(true);
    const session2 = taskSession(c2);
    try {
      const resumed = await session2.resumeTask(reference);
      const { outcome } = await resumed.settle();
      expect(outcome.status).toBe('completed');
      expect((outcome as unknown as { result: { structuredContent: { stdout: string } } }).result.structuredContent.stdout).toBe('survived\n');
    } finally {
      await session2.close();
      await c2.close();
    }
  }, 120_000);
});
