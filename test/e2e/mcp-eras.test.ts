/**
 * Both protocol eras on one `/mcp` endpoint, end to end with real clients: the SDK v1.32 client
 * (2025-11-25 handshake), the SDK v2 client in its default legacy mode, and the SDK v2 client
 * pinned to 2026-07-28 (`server/discover`, per-request `_meta`, no sessions). Each lists the
 * tools, runs a job on a real agent (bubblewrap sandbox) and reads its artifact back; progress
 * and cancellation are checked in both eras. The MCP Inspector CLI does the same from the shell.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readmeBlock } from '../cli/readme.ts';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { hasCommand, requireParts, ROOT, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

const BWRAP = requireParts({ bwrap: hasCommand('bwrap') });
if (!BWRAP) console.warn('mcp-eras.test.ts: skipped — bubblewrap is not installed (allowed outside CI only)');

const TEAM = 'eras';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let token: string;

type Era = '2025-v1' | '2025-v2' | '2026-v2';

interface AnyClient {
  listResources(): Promise<{ resources: { uri: string; name: string }[] }>;
  readResource(p: { uri: string }): Promise<{ contents: { uri: string; text?: string }[] }>;
  getPrompt(p: { name: string; arguments: Record<string, string> }): Promise<{ messages: { content: { type: string; text?: string } }[] }>;
  listTools(): Promise<{ tools: { name: string; annotations?: Record<string, unknown>; outputSchema?: unknown; title?: string }[] }>;
  callTool(params: { name: string; arguments: Record<string, unknown> }, ...rest: unknown[]): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

async function connect(era: Era): Promise<AnyClient & { raw: unknown }> {
  const headers = { Authorization: `Bearer ${token}` };
  if (era === '2025-v1') {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const c = new Client({ name: 'eras-v1', version: '1.0.0' });
    await c.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { requestInit: { headers } }));
    expect(c.getServerVersion()?.name).toBe('gatehouse');
    return Object.assign(c as unknown as AnyClient, { raw: c });
  }
  const c = new ClientV2({ name: `eras-${era}`, version: '1.0.0' }, era === '2026-v2' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {});
  await c.connect(new TransportV2(new URL(gw.mcpUrl), { requestInit: { headers } }));
  expect(c.getProtocolEra()).toBe(era === '2026-v2' ? 'modern' : 'legacy');
  if (era === '2026-v2') expect(c.getNegotiatedProtocolVersion()).toBe('2026-07-28');
  expect(c.getServerVersion()?.name).toBe('gatehouse');
  return Object.assign(c as unknown as AnyClient, { raw: c });
}

/** v1's callTool takes (params, resultSchema, options); v2's takes (params, options). */
function call(era: Era, c: AnyClient, name: string, args: Record<string, unknown>, options: Record<string, unknown> = {}) {
  const opts = { timeout: 60_000, ...options };
  return era === '2025-v1' ? c.callTool({ name, arguments: args }, undefined, opts) : c.callTool({ name, arguments: args }, opts);
}

const maybe = BWRAP ? describe : describe.skip;

maybe('both protocol eras on /mcp with real clients', () => {
  beforeAll(async () => {
    gw = await startGateway();
    root = mkdtempSync(join(tmpdir(), 'gatehouse-eras-'));
    await gw.putPolicy(TEAM, {
      ...DEFAULT_POLICY,
      shell: { enabled: true, allow: ['/.*/'] },
      executables: { allow: [...DEFAULT_POLICY.executables.allow, 'sh', 'seq', 'touch', 'sleep'] },
    });
    agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: 'bwrap', capacity: 4, agentId: 'eras-agent' });
    await agent.ready;
    token = await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'] });
  }, 120_000);

  afterAll(async () => {
    await agent?.stop();
    await gw?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  for (const era of ['2025-v1', '2025-v2', '2026-v2'] as const) {
    describe(era, () => {
      it('lists the tools, runs a job with progress and reads its artifact', async () => {
        const c = await connect(era);
        try {
          const { tools } = await c.listTools();
          expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['execute', 'runtime_execute', 'query_output', 'policy_check', 'list_runtimes']));
          const progress: { progress: number; message?: string }[] = [];
          const r = await call(
            era,
            c,
            'execute',
            { command: 'for i in 1 2 3; do echo line-$i; sleep 0.3; done; echo needle-' + era },
            {
              onprogress: (p: { progress: number; message?: string }) => progress.push(p),
            },
          );
          expect(r.isError).toBeFalsy();
          const s = r.structuredContent as { stdout: string; exit_code: number; artifact_handle: string };
          expect(s.exit_code).toBe(0);
          expect(s.stdout).toContain(`needle-${era}`);
          // queued/started at least: progress reaches the client in this era (SSE kept for calls that report it).
          expect(progress.length).toBeGreaterThanOrEqual(2);
          expect(progress.map((p) => p.message).join('\n')).toMatch(/started on agent eras-agent/);
          const q = await call(era, c, 'query_output', { artifactHandle: s.artifact_handle, queryTerms: [`needle-${era}`], contextLines: 0 });
          expect(q.isError).toBeFalsy();
          const qs = q.structuredContent as { matchCount: number; excerpts: { content: string }[] };
          expect(qs.matchCount).toBe(1);
          expect(qs.excerpts[0].content).toContain(`needle-${era}`);
          // The same output as an MCP resource: listed for this team, readable by its URI.
          const uri = `gatehouse://artifacts/${s.artifact_handle}/stdout`;
          const { resources } = await c.listResources();
          expect(resources.map((r) => r.uri)).toContain(uri);
          const read = await c.readResource({ uri });
          expect(read.contents[0].text).toBe(s.stdout);
          await expect(c.readResource({ uri: 'gatehouse://artifacts/art_nope/stdout' })).rejects.toThrow(/not found/);
          const prompt = await c.getPrompt({ name: 'investigate_output', arguments: { artifactHandle: s.artifact_handle } });
          expect(prompt.messages[0].content.text).toContain(`query_output with artifactHandle "${s.artifact_handle}"`);
        } finally {
          await c.close();
        }
      }, 90_000);

      it('describes every tool, and a failed call carries a stable code that fits the advertised schema', async () => {
        const c = await connect(era);
        try {
          // Listing first makes the v1 client validate every later result against the advertised outputSchema.
          const { tools } = await c.listTools();
          const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
          for (const t of tools) {
            expect(t.title, t.name).toBeTruthy();
            expect(t.outputSchema, t.name).toBeDefined();
            expect(t.annotations, t.name).toBeDefined();
          }
          for (const name of ['query_output', 'policy_check', 'list_runtimes', 'job_status', 'job_output', 'job_list']) {
            expect(byName[name].annotations, name).toMatchObject({ readOnlyHint: true, destructiveHint: false });
          }
          for (const name of ['execute', 'runtime_execute', 'run_script']) {
            expect(byName[name].annotations, name).toMatchObject({ readOnlyHint: false, destructiveHint: true, openWorldHint: true });
          }
          expect(byName.job_kill.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
          const blank = await call(era, c, 'execute', { command: '   ' });
          expect(blank.isError).toBe(true);
          expect(blank.structuredContent).toMatchObject({ error: { code: 'invalid_argument', message: 'Error: command: empty' } });
          const denied = await call(era, c, 'execute', { command: 'curl', args: ['http://127.0.0.1:1/'] });
          expect(denied.isError).toBe(true);
          expect((denied.structuredContent as { error: { code: string; message: string } }).error.code).toBe('policy_denied');
          const invalid = await call(era, c, 'runtime_execute', { runtime: 'cobol', code: 'x' });
          expect(invalid.isError).toBe(true);
          expect((invalid.structuredContent as { error: { code: string; message: string } }).error).toMatchObject({
            code: 'invalid_argument',
            message: expect.stringMatching(/^Input validation error: .*runtime/),
          });
          const missing = await call(era, c, 'query_output', { artifactHandle: 'art_does_not_exist', queryTerms: ['x'] });
          expect(missing.isError).toBe(true);
          expect((missing.structuredContent as { error: { code: string } }).error.code).toBe('not_found');
          const ok = await call(era, c, 'policy_check', { command: 'ls', args: ['-l'] });
          expect(ok.isError).toBeFalsy();
          expect(ok.structuredContent).toMatchObject({ allowed: true });
          expect((ok.structuredContent as Record<string, unknown>).error).toBeUndefined();
        } finally {
          await c.close();
        }
      }, 60_000);

      it("cancelling the call kills the job's whole process tree", async () => {
        const c = await connect(era);
        const marker = `cancel-${era}`;
        try {
          const ctl = new AbortController();
          // No progress requested: the job is silent, so nothing but the cancellation can stop it.
          // A child shell in the background and the job's own shell: both must die.
          const pending = call(
            era,
            c,
            'execute',
            { command: `touch ${marker}-running; (sleep 3; touch ${marker}-child) & sleep 3; touch ${marker}-parent; wait` },
            { signal: ctl.signal },
          );
          pending.catch(() => {});
          for (let i = 0; i < 300 && !existsSync(join(root, `${marker}-running`)); i++) await new Promise((r) => setTimeout(r, 50));
          expect(existsSync(join(root, `${marker}-running`))).toBe(true);
          ctl.abort('the user pressed stop');
          await expect(pending).rejects.toThrow();
          await new Promise((r) => setTimeout(r, 5_000));
          expect(existsSync(join(root, `${marker}-parent`))).toBe(false);
          expect(existsSync(join(root, `${marker}-child`))).toBe(false);
        } finally {
          await c.close();
        }
      }, 60_000);
    });
  }

  describe('MCP Inspector CLI', () => {
    // The Inspector as the README runs it: `npx @modelcontextprotocol/inspector --cli <url> …`, from the project
    // (npx finds the pinned devDependency).
    const inspect = (...args: string[]) =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        execFile(
          'npx',
          ['--no-install', '@modelcontextprotocol/inspector', '--cli', gw.mcpUrl, '--transport', 'http', '--header', `Authorization: Bearer ${token}`, ...args],
          {
            timeout: 60_000,
            cwd: ROOT,
          },
          (e, stdout, stderr) => {
            if (e) return reject(new Error(`inspector ${args.join(' ')} failed: ${e.message}\n${stdout}\n${stderr}`));
            resolve(JSON.parse(stdout) as Record<string, unknown>);
          },
        );
      });

    it("runs the README's Inspector line as written", async () => {
      const [line] = readmeBlock('inspector-cli');
      const stdout = await new Promise<string>((resolve, reject) => {
        execFile(
          '/bin/sh',
          ['-ec', line],
          { cwd: ROOT, timeout: 60_000, env: { ...process.env, GATEHOUSE_URL: new URL(gw.mcpUrl).origin, TOKEN: token } },
          (e, out, err) => (e ? reject(new Error(`${line}: ${e.message}\n${out}\n${err}`)) : resolve(out)),
        );
      });
      expect((JSON.parse(stdout) as { tools: { name: string }[] }).tools.map((t) => t.name)).toContain('execute');
    }, 120_000);

    it('lists the tools, runs a job and reads its artifact', async () => {
      const list = (await inspect('--method', 'tools/list')) as { tools: { name: string }[] };
      expect(list.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['execute', 'query_output']));
      const run = (await inspect('--method', 'tools/call', '--tool-name', 'execute', '--tool-arg', 'command=echo', 'args=["from-inspector"]')) as {
        isError?: boolean;
        structuredContent: { stdout: string; artifact_handle: string };
      };
      expect(run.isError).toBeFalsy();
      expect(run.structuredContent.stdout).toBe('from-inspector\n');
      const q = (await inspect(
        '--method',
        'tools/call',
        '--tool-name',
        'query_output',
        '--tool-arg',
        `artifactHandle=${run.structuredContent.artifact_handle}`,
        'queryTerms=["from-inspector"]',
      )) as {
        structuredContent: { matchCount: number; excerpts: { content: string }[] };
      };
      expect(q.structuredContent.matchCount).toBe(1);
      expect(q.structuredContent.excerpts[0].content).toContain('from-inspector');
    }, 120_000);
  });
});
