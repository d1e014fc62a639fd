/**
 * `execute` end to end with the real pieces: `wrangler dev` (workerd, local D1/R2), a real agent
 * process (`node executor/main.ts`) using real gVisor (`runsc`), and the official MCP SDK client.
 * Outside CI the file skips when runsc is missing (and says so); under CI=true that is a failure.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { hasCommand, requireParts, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

const RUNSC = requireParts({ runsc: hasCommand('runsc') });
if (!RUNSC) console.warn('agent.test.ts: skipped — runsc is not installed (allowed outside CI only)');

const TEAM = 'e2e';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let secretsDir: string;
let client: Client;
const AGENT_SECRET = 'agent-env-secret-value-1234567890';

type Structured = Record<string, unknown> & { stdout: string; stderr: string; exit_code: number | null; state: string };

async function exec(args: Record<string, unknown>, opts: { timeout?: number; signal?: AbortSignal } = {}) {
  const r = await client.callTool({ name: 'execute', arguments: args }, undefined, { timeout: opts.timeout ?? 60_000, signal: opts.signal });
  return { r, s: r.structuredContent as Structured, text: (r.content as { text: string }[])[0]?.text ?? '' };
}

function startTestAgent(extra: { agentId?: string } = {}): AgentProcess {
  return startAgent(gw, {
    token: agentToken,
    root,
    sandbox: 'gvisor',
    capacity: 4,
    agentId: extra.agentId ?? 'e2e-agent',
    env: { GATEHOUSE_TEST_SECRET: AGENT_SECRET },
  });
}
let agentToken: string;

const maybe = RUNSC ? describe : describe.skip;

maybe('execute through a real agent in gVisor', () => {
  beforeAll(async () => {
    gw = await startGateway();
    root = mkdtempSync(join(tmpdir(), 'gatehouse-ws-'));
    secretsDir = mkdtempSync(join(tmpdir(), 'gatehouse-secrets-'));
    agentToken = await gw.token({ team: TEAM, scopes: ['agent'] });
    writeFileSync(join(secretsDir, 'agent.token'), agentToken);
    // This team allows shell strings (the default policy does not) so the tests can build process trees.
    await gw.putPolicy(TEAM, {
      ...DEFAULT_POLICY,
      shell: { enabled: true, allow: ['/.*/'] },
      executables: { allow: [...DEFAULT_POLICY.executables.allow, 'sh', 'yes', 'seq', 'id'] },
      limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 8, maxArtifactBytes: 200 * 1024 * 1024 },
    });
    agent = startTestAgent();
    await agent.ready;
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
  }, 120_000);

  afterAll(async () => {
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    rmSync(root, { recursive: true, force: true });
    rmSync(secretsDir, { recursive: true, force: true });
  });

  it('runs argv mode without a shell', async () => {
    const { r, s } = await exec({ command: 'echo', args: ['a b', '$HOME', ';', 'c'] });
    expect(r.isError).toBeFalsy();
    expect(s).toMatchObject({ stdout: 'a b $HOME ; c\n', exit_code: 0, timed_out: false, state: 'exited', stdout_truncated: false });
    expect(s.artifact_handle).toMatch(/^art_/);
  });

  it('runs shell strings with sh -c when the policy allows them', async () => {
    const { s } = await exec({ command: 'echo one; echo two >&2; exit 3' });
    expect(s).toMatchObject({ stdout: 'one\n', stderr: 'two\n', exit_code: 3, state: 'exited' });
  });

  it('passes stdin', async () => {
    const { s } = await exec({ command: 'cat', args: [], stdin: 'from stdin\n' });
    expect(s.stdout).toBe('from stdin\n');
  });

  it('reports a non-zero exit truthfully', async () => {
    const { r, s } = await exec({ command: 'false', args: [] });
    expect(r.isError).toBeFalsy();
    expect(s).toMatchObject({ exit_code: 1, state: 'exited' });
  });

  it('reports failed_to_start as "Error: execute: spawn failed", never a fake exit 0', async () => {
    // Allowed by name but not present on the agent.
    await gw.putPolicy(TEAM, {
      ...DEFAULT_POLICY,
      shell: { enabled: true, allow: ['/.*/'] },
      executables: { allow: [...DEFAULT_POLICY.executables.allow, 'sh', 'yes', 'seq', 'id', 'no-such-tool-xyz'] },
      limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 8, maxArtifactBytes: 200 * 1024 * 1024 },
    });
    const { r, text } = await exec({ command: 'no-such-tool-xyz', args: [] });
    expect(r.isError).toBe(true);
    // One wording, from the edge; the agent's reason (naming the program) inside it, never a second prefix.
    expect(text).toMatch(/^Error: execute: spawn failed \(.*no-such-tool-xyz.*\)/);
    expect(text.match(/spawn failed/g)).toHaveLength(1);
  });

  it('kills the whole tree on timeout, escaping grandchildren included', async () => {
    const started = Date.now();
    const { s } = await exec({
      command: "setsid sh -c 'sleep 3; echo survived > escaped-setsid' & (sh -c 'sleep 3; echo survived > escaped-fork' &) ; sleep 30",
      timeout_ms: 1000,
    });
    expect(s).toMatchObject({ timed_out: true, state: 'timed_out', exit_code: null });
    expect(Date.now() - started).toBeLessThan(10_000);
    await new Promise((r) => setTimeout(r, 4000));
    expect(existsSync(join(root, 'escaped-setsid'))).toBe(false);
    expect(existsSync(join(root, 'escaped-fork'))).toBe(false);
  });

  it('caps inline output and flags truncation; the artifact keeps everything', async () => {
    const { s } = await exec({ command: 'yes 0123456789 | head -c 100000; echo err >&2' });
    expect(s.stdout_truncated).toBe(true);
    expect(Buffer.byteLength(s.stdout) + Buffer.byteLength(s.stderr)).toBeLessThanOrEqual(40_000);
    const q = await client.callTool({
      name: 'query_output',
      arguments: { artifactHandle: s.artifact_handle, queryTerms: ['0123456789'], maxExcerpts: 1, contextLines: 0 },
    });
    expect((q.structuredContent as { totalBytes: number }).totalBytes).toBe(100_000 + 4);
  });

  it('handles binary and invalid UTF-8 output', async () => {
    const { s } = await exec({ command: "printf '\\377\\376\\000ok\\n'" });
    expect(s.state).toBe('exited');
    expect(s.stdout).toContain('ok');
  });

  it('streams 50 MB of output with bounded agent memory and keeps the full artifact', async () => {
    const pid = agent.proc.pid!;
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
    const before = rss();
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), 50);
    const { s } = await exec({ command: 'seq 1 7000000; echo THE-END', timeout_ms: 60_000 }, { timeout: 120_000 });
    clearInterval(sampler);
    expect(s.state).toBe('exited');
    expect(s.stdout_truncated).toBe(true);
    expect(peak - before).toBeLessThan(150 * 1024 * 1024);
    const q = await client.callTool({ name: 'query_output', arguments: { artifactHandle: s.artifact_handle, queryTerms: ['THE-END'], contextLines: 1 } });
    const qs = q.structuredContent as { totalBytes: number; totalLines: number; excerpts: { lineStart: number; content: string }[] };
    expect(qs.totalLines).toBe(7_000_001);
    expect(qs.totalBytes).toBeGreaterThan(50_000_000);
    expect(qs.excerpts[0].content).toContain('7000000');
  }, 180_000);

  it('cancels a job when the client sends notifications/cancelled', async () => {
    const ctl = new AbortController();
    const call = exec({ command: 'sleep 5; echo finished > cancelled-marker' }, { signal: ctl.signal });
    await new Promise((r) => setTimeout(r, 1500));
    ctl.abort('user pressed stop');
    await expect(call).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 6000));
    expect(existsSync(join(root, 'cancelled-marker'))).toBe(false);
  }, 30_000);

  it("cannot read the agent's token or environment", async () => {
    const { s } = await exec({ command: `cat ${join(secretsDir, 'agent.token')}; cat /proc/1/environ; printenv; cat /proc/${agent.proc.pid}/environ` });
    const all = s.stdout + s.stderr;
    expect(all).not.toContain(agentToken);
    expect(all).not.toContain(AGENT_SECRET);
    expect(all).not.toContain('GATEHOUSE_TEST_SECRET');
  });

  it('cannot write outside the workspace', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'gatehouse-outside-'));
    const { s } = await exec({ command: `touch ${outside}/pwned; touch /etc/pwned; touch /usr/pwned; touch inside-ok; echo done` });
    expect(s.stdout).toContain('done');
    expect(existsSync(join(outside, 'pwned'))).toBe(false);
    expect(existsSync('/etc/pwned')).toBe(false);
    expect(existsSync('/usr/pwned')).toBe(false);
    expect(existsSync(join(root, 'inside-ok'))).toBe(true);
    rmSync(outside, { recursive: true, force: true });
  });

  it('marks a job lost when its agent is killed, and runs the next job after a restart', async () => {
    const started = Date.now();
    const call = exec({ command: 'sleep', args: ['30'] });
    await new Promise((r) => setTimeout(r, 1500));
    await agent.stop('SIGKILL');
    const { r, s } = await call;
    expect(r.isError).toBe(true);
    expect(s.state).toBe('lost');
    // HEARTBEAT_MS=1000 in tests: three missed heartbeats plus an alarm tick.
    expect(Date.now() - started).toBeLessThan(10_000);
    agent = startTestAgent();
    await agent.ready;
    const next = await exec({ command: 'echo', args: ['back'] });
    expect(next.s.stdout).toBe('back\n');
  }, 60_000);
});
