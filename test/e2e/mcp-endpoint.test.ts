/**
 * The MCP endpoint and the TeamDispatcher, end to end in workerd (`wrangler dev` with local D1/R2),
 * through the official MCP SDK client. The agent side here is a test socket speaking the agent
 * protocol by hand — so relay, malformed messages and artifact isolation can be driven exactly;
 * the real agent process is covered in agent.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'undici';
import { connectMcp, startGateway, type Gateway } from './harness.ts';
import type { EdgeMessage, JobExit, JobSpec } from '../../src/contracts/agent-protocol.ts';
import {
  ERROR_CODE_MAX_CHARS,
  ERROR_MESSAGE_MAX_CHARS,
  PROTOCOL_VERSION,
  UPLOAD_AGENT_HEADER,
  UPLOAD_TOKEN_HEADER,
} from '../../src/contracts/agent-protocol.ts';
import { encodeOutputFrame } from '../../src/contracts/output-frame.ts';

let gw: Gateway;

const connect = (token: string) => connectMcp(gw.mcpUrl, token);

/** A hand-driven executor agent: connects, says hello, and exposes the edge's messages. */
class TestAgent {
  ws: WebSocket;
  inbox: EdgeMessage[] = [];
  private waiters: Array<() => void> = [];
  constructor(url: string, token: string) {
    this.ws = new WebSocket(url.replace(/^http/, 'ws') + '/agent/v1/connect', { headers: { Authorization: `Bearer ${token}` } } as never);
    this.ws.addEventListener('message', (e) => {
      this.inbox.push(JSON.parse(String(e.data)));
      for (const w of this.waiters.splice(0)) w();
    });
  }
  async open(agentId: string, capacity = 2): Promise<void> {
    await new Promise<void>((res, rej) => {
      this.ws.addEventListener('open', () => res());
      this.ws.addEventListener('error', () => rej(new Error('agent socket failed')));
    });
    this.send({
      type: 'hello',
      v: PROTOCOL_VERSION,
      agentId,
      version: 'test',
      capacity,
      sandbox: 'none',
      runtimes: [{ name: 'python', executable: 'python3', path: '/usr/bin/python3', version: '3.11' }],
      running: [],
    });
    await this.next('welcome');
  }
  send(m: unknown): void {
    this.ws.send(typeof m === 'string' ? m : JSON.stringify(m));
  }
  async next<T extends EdgeMessage['type']>(type: T, timeoutMs = 10_000): Promise<Extract<EdgeMessage, { type: T }>> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const i = this.inbox.findIndex((m) => m.type === type);
      if (i >= 0) return this.inbox.splice(i, 1)[0] as Extract<EdgeMessage, { type: T }>;
      if (Date.now() > until) throw new Error(`no ${type} within ${timeoutMs}ms; got ${JSON.stringify(this.inbox)}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 200);
      });
    }
  }
  close(): void {
    this.ws.close();
  }
}

function exitFor(spec: JobSpec, stdout: string, over: Partial<JobExit> = {}): JobExit {
  return {
    type: 'job.exit',
    jobId: spec.jobId,
    state: 'exited',
    exitCode: 0,
    signal: null,
    timedOut: false,
    durationMs: 5,
    stdout,
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: {
      stdout: { bytes: stdout.length, lines: stdout.split('\n').length - 1, artifactTruncated: false },
      stderr: { bytes: 0, lines: 0, artifactTruncated: false },
    },
    artifactsUploaded: true,
    ...over,
  };
}

/** Uploads as the agent the job was sent to: with the upload grant its `job.start` carried. */
async function uploadArtifact(token: string, start: Extract<EdgeMessage, { type: 'job.start' }>, stream: 'stdout' | 'stderr', body: string) {
  const { spec, upload } = start;
  return fetch(`${gw.url}/agent/v1/artifacts/${spec.artifactHandle}/${stream}`, {
    method: 'PUT',
    body,
    headers: {
      Authorization: `Bearer ${token}`,
      'X-Gatehouse-Job': spec.jobId,
      'X-Gatehouse-Lines': String(body.split('\n').length - 1),
      'X-Gatehouse-Truncated': '0',
      ...(upload ? { [UPLOAD_AGENT_HEADER]: upload.agentId, [UPLOAD_TOKEN_HEADER]: upload.token } : {}),
    },
  });
}

beforeAll(async () => {
  gw = await startGateway({ vars: { MAX_BODY_BYTES: '65536' } });
});
afterAll(async () => {
  await gw?.stop();
});

describe('MCP handshake', () => {
  it('initializes and lists the tools with the official SDK client', async () => {
    const client = await connect(await gw.token({ team: 'acme', scopes: ['execute', 'artifacts:read'] }));
    expect(client.getServerVersion()?.name).toBe('gatehouse');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'execute',
      'job_input',
      'job_kill',
      'job_list',
      'job_output',
      'job_status',
      'list_runtimes',
      'policy_check',
      'query_output',
      'run_script',
      'runtime_execute',
      'workspace_delete',
      'workspace_list',
    ]);
    for (const t of tools) expect(t.name).toMatch(/^[a-z_]+$/);
    const execute = tools.find((t) => t.name === 'execute')!;
    expect(execute.inputSchema.required).toEqual(['command']);
    expect(Object.keys(execute.outputSchema!.properties!)).toEqual(
      expect.arrayContaining(['stdout', 'stderr', 'exit_code', 'timed_out', 'stdout_truncated', 'stderr_truncated', 'elapsed_ms']),
    );
    await client.close();
  });

  it('waits for an agent up to the queue deadline, then answers with a clear tool error', async () => {
    const client = await connect(await gw.token({ team: 'lonely', scopes: ['execute'] }));
    const started = Date.now();
    const r = await client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['hi'] } });
    expect(r.isError).toBe(true);
    expect((r.content as { text: string }[])[0].text).toContain("no executor agent is connected for team 'lonely'; start one with:");
    // The default policy's queueWaitMs (5 s): a job arriving before any agent waits for one that long.
    expect((r.content as { text: string }[])[0].text).toContain('waited 5000ms for one');
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_900);
    await client.close();
  });

  it('returns "Error: command: empty" for a blank command', async () => {
    const client = await connect(await gw.token({ team: 'acme', scopes: ['execute'] }));
    const r = await client.callTool({ name: 'execute', arguments: { command: '   ' } });
    expect(r.isError).toBe(true);
    expect((r.content as { text: string }[])[0].text).toBe('Error: command: empty');
    await client.close();
  });
});

describe('HTTP guards on /mcp', () => {
  const init = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };
  const post = async (body: string, headers: Record<string, string> = {}) =>
    fetch(gw.mcpUrl, {
      method: 'POST',
      body,
      headers: {
        Authorization: `Bearer ${await gw.token({ team: 'acme', scopes: ['execute'] })}`,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        ...headers,
      },
    });

  it('refuses a browser Origin that is not allowed with 403', async () => {
    const r = await post(JSON.stringify(init), { Origin: 'https://evil.example' });
    expect(r.status).toBe(403);
    expect(await r.text()).toContain('https://evil.example');
  });

  it('accepts an allowed Origin and requests without Origin', async () => {
    expect((await post(JSON.stringify(init), { Origin: 'http://localhost' })).status).toBe(200);
    expect((await post(JSON.stringify(init))).status).toBe(200);
  });

  it('refuses a body over MAX_BODY_BYTES with 413', async () => {
    const big = JSON.stringify({ ...init, params: { ...init.params, pad: 'x'.repeat(70_000) } });
    const r = await post(big);
    expect(r.status).toBe(413);
    expect(((await r.json()) as any).error.message).toContain('65536');
  });

  it('answers garbage with a JSON-RPC parse error and non-JSON-RPC JSON with an invalid request', async () => {
    const garbage = await post('{not json');
    expect(garbage.status).toBe(400);
    expect(((await garbage.json()) as any).error.code).toBe(-32700);
    const wrong = await post(JSON.stringify({ hello: 'world' }));
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as any).error.code).toBeLessThan(-32000 + 1);
  });

  it('refuses an unsupported MCP-Protocol-Version with 400', async () => {
    const r = await post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }), { 'MCP-Protocol-Version': '1999-01-01' });
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('Unsupported protocol version');
  });

  it('answers GET with 405 (stateless: no standalone stream)', async () => {
    const r = await fetch(gw.mcpUrl, {
      headers: { Authorization: `Bearer ${await gw.token({ team: 'acme', scopes: ['execute'] })}`, Accept: 'text/event-stream' },
    });
    expect(r.status).toBe(405);
  });
});

describe('TeamDispatcher relay to an agent socket', () => {
  it('dispatches a job, relays output as progress, returns the exit and accepts the result once', async () => {
    const agentToken = await gw.token({ team: 'relay', scopes: ['agent'] });
    const agent = new TestAgent(gw.url, agentToken);
    await agent.open('relay-1');
    const client = await connect(await gw.token({ team: 'relay', scopes: ['execute', 'artifacts:read'] }));
    const progress: string[] = [];
    const call = client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['hello'] } }, undefined, {
      onprogress: (p) => progress.push(p.message ?? ''),
      timeout: 30_000,
    });
    const start = await agent.next('job.start');
    expect(start.spec).toMatchObject({ mode: 'argv', command: 'echo', args: ['hello'], cwd: '' });
    expect(start.spec.env).toEqual({});
    agent.ws.send(encodeOutputFrame({ jobId: start.spec.jobId, stream: 'stdout', offset: 0, data: Buffer.from('hello\n') }));
    await new Promise((r) => setTimeout(r, 300));
    expect((await uploadArtifact(agentToken, start, 'stdout', 'hello\n')).status).toBe(201);
    const exit = exitFor(start.spec, 'hello\n');
    agent.send(exit);
    const r = await call;
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toMatchObject({
      stdout: 'hello\n',
      exit_code: 0,
      timed_out: false,
      state: 'exited',
      job_id: start.spec.jobId,
      artifact_handle: start.spec.artifactHandle,
    });
    expect(progress.some((m) => m.includes('hello'))).toBe(true);
    expect((await agent.next('job.ack')).jobId).toBe(start.spec.jobId);
    // A re-sent result (after a reconnect) is acknowledged again but not applied twice.
    agent.send(exit);
    expect((await agent.next('job.ack')).jobId).toBe(start.spec.jobId);
    await client.close();
    agent.close();
  });

  it('never sends an agent more jobs than its advertised capacity; the next waits in the queue', async () => {
    const agent = new TestAgent(gw.url, await gw.token({ team: 'narrow', scopes: ['agent'] }));
    await agent.open('narrow-1', 1);
    const client = await connect(await gw.token({ team: 'narrow', scopes: ['execute'] }));
    const first = client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['1'] } }, undefined, { timeout: 30_000 });
    const second = client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['2'] } }, undefined, { timeout: 30_000 });
    const a = await agent.next('job.start');
    await expect(agent.next('job.start', 1500)).rejects.toThrow(/no job.start/);
    agent.send(exitFor(a.spec, `${a.spec.args[0]}\n`));
    const b = await agent.next('job.start');
    expect(b.spec.jobId).not.toBe(a.spec.jobId);
    agent.send(exitFor(b.spec, `${b.spec.args[0]}\n`));
    const outs = [(await first).structuredContent, (await second).structuredContent].map((x) => (x as { stdout: string }).stdout).sort();
    expect(outs).toEqual(['1\n', '2\n']);
    await client.close();
    agent.close();
  });

  it('survives malformed agent messages and keeps dispatching on the same socket', async () => {
    const agent = new TestAgent(gw.url, await gw.token({ team: 'sturdy', scopes: ['agent'] }));
    await agent.open('sturdy-1');
    agent.send('{not json');
    agent.send({ type: 'job.exit', jobId: 42 });
    agent.send({ type: 'teleport' });
    const client = await connect(await gw.token({ team: 'sturdy', scopes: ['execute'] }));
    const call = client.callTool({ name: 'execute', arguments: { command: 'true', args: [] } });
    const start = await agent.next('job.start');
    agent.send(exitFor(start.spec, ''));
    const r = await call;
    expect(r.structuredContent).toMatchObject({ exit_code: 0, state: 'exited' });
    await client.close();
    agent.close();
  });

  it("cuts an agent's oversized error (1 MB message, 10 KB code): the call still gets its result, the audit row stays small", async () => {
    const agent = new TestAgent(gw.url, await gw.token({ team: 'wordy', scopes: ['agent'] }));
    await agent.open('wordy-1');
    const client = await connect(await gw.token({ team: 'wordy', scopes: ['execute'] }));
    const call = client.callTool({ name: 'execute', arguments: { command: 'true', args: [] } });
    const start = await agent.next('job.start');
    agent.send(
      exitFor(start.spec, '', {
        state: 'failed_to_start',
        exitCode: null,
        error: { code: `x${'c'.repeat(10_000)}`, message: `start ${'E'.repeat(1_000_000)}` },
      }),
    );
    const r = await call;
    expect(r.isError).toBe(true);
    const err = r.structuredContent as { error: { code: string; message: string } };
    expect(err.error.message).toContain('spawn failed (start EEE');
    expect(err.error.message).toContain('… (cut: 1000006 characters)');
    expect(err.error.message.length).toBeLessThan(ERROR_MESSAGE_MAX_CHARS + 200);
    expect(err.error.code.length).toBeLessThan(ERROR_CODE_MAX_CHARS + 40);
    const admin = { Authorization: `Bearer ${await gw.token({ team: 'wordy', scopes: ['admin'] })}` };
    let entry: { jobId: string; exitStatus: string | null; reason: string | null } | undefined;
    for (let i = 0; i < 100 && entry?.exitStatus !== 'failed_to_start'; i++) {
      const list = (await (await fetch(`${gw.url}/admin/v1/audit?tool=execute`, { headers: admin })).json()) as { entries: NonNullable<typeof entry>[] };
      entry = list.entries.find((e) => e.jobId === start.spec.jobId);
      if (entry?.exitStatus !== 'failed_to_start') await new Promise((res) => setTimeout(res, 100));
    }
    expect(entry?.exitStatus).toBe('failed_to_start');
    expect(entry!.reason!.length).toBeLessThan(ERROR_MESSAGE_MAX_CHARS + ERROR_CODE_MAX_CHARS + 1000);
    expect(entry!.reason).toContain('cut: 1000006 characters');
    await client.close();
    agent.close();
  });

  it('keeps artifacts team-scoped: another team\'s handle is "not found"', async () => {
    const agentToken = await gw.token({ team: 'owner', scopes: ['agent'] });
    const agent = new TestAgent(gw.url, agentToken);
    await agent.open('owner-1');
    const owner = await connect(await gw.token({ team: 'owner', scopes: ['execute', 'artifacts:read'] }));
    const call = owner.callTool({ name: 'execute', arguments: { command: 'cat', args: ['build.log'] } });
    const start = await agent.next('job.start');
    const log = Array.from({ length: 200 }, (_, i) => (i === 120 ? 'error: disk full' : `line ${i}`)).join('\n') + '\n';
    expect((await uploadArtifact(agentToken, start, 'stdout', log)).status).toBe(201);
    agent.send(exitFor(start.spec, log.slice(0, 100)));
    const handle = ((await call).structuredContent as { artifact_handle: string }).artifact_handle;

    const mine = await owner.callTool({ name: 'query_output', arguments: { artifactHandle: handle, queryTerms: ['disk full'], contextLines: 1 } });
    expect(mine.isError).toBeFalsy();
    expect(mine.structuredContent).toMatchObject({ matchCount: 1, excerpts: [{ lineStart: 120, lineEnd: 122, source: 'stdout' }] });

    const other = await connect(await gw.token({ team: 'intruder', scopes: ['execute', 'artifacts:read'] }));
    const theirs = await other.callTool({ name: 'query_output', arguments: { artifactHandle: handle, queryTerms: ['disk'] } });
    expect(theirs.isError).toBe(true);
    expect((theirs.content as { text: string }[])[0].text).toMatch(/not found/);
    expect((theirs.content as { text: string }[])[0].text).not.toMatch(/forbidden/i);

    // Uploading into another team's job is refused the same way.
    const intruderAgent = await gw.token({ team: 'intruder', scopes: ['agent'] });
    expect((await uploadArtifact(intruderAgent, start, 'stderr', 'x\n')).status).toBe(404);
    await owner.close();
    await other.close();
    agent.close();
  });

  it('declares a job lost when its agent vanishes and does not come back', async () => {
    const agent = new TestAgent(gw.url, await gw.token({ team: 'vanish', scopes: ['agent'] }));
    await agent.open('vanish-1');
    const client = await connect(await gw.token({ team: 'vanish', scopes: ['execute'] }));
    const started = Date.now();
    const call = client.callTool({ name: 'execute', arguments: { command: 'sleep', args: ['60'] } }, undefined, { timeout: 30_000 });
    await agent.next('job.start');
    agent.close();
    const r = await call;
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toMatchObject({ state: 'lost', exit_code: null });
    // HEARTBEAT_MS is 1000 in tests: lost after 3 missed intervals (plus one alarm tick).
    expect(Date.now() - started).toBeLessThan(8_000);
    await client.close();
  });
});
