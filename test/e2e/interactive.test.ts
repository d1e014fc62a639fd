/**
 * Interactive jobs through the real gateway (`wrangler dev`), a real agent with gVisor (`runsc`) and the MCP SDK
 * client: a Python REPL conversation through job_input + job_output's wait, eof, who may write, the input cap, the
 * policy switch, the idle TTL, the sessions' own budget beside maxConcurrentJobs, a gateway restart mid-session,
 * and a job on a pseudo-terminal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { connectMcp, startAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { PRESETS } from '../../src/policy/presets.ts';
import { requireTool } from '../executor/helpers.ts';

const RUNSC = requireTool('gvisor');
type S = Record<string, unknown>;
let gw: Gateway;
const agents: AgentProcess[] = [];
let root: string;
let client: Client;

const text = (r: S) => (r.content as { text: string }[])[0]?.text ?? '';
async function call(c: Client, name: string, args: S): Promise<S> {
  return (await c.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as S;
}
const data = (r: S) => r.structuredContent as S;

/** A team with the open preset, interactive input on with these settings, and one job slot. */
async function team(name: string, interactive: S): Promise<void> {
  const open = PRESETS.open.policy;
  await gw.putPolicy(name, { ...open, limits: { ...open.limits, maxConcurrentJobs: 1 }, interactive: { ...open.interactive, ...interactive } });
  const a = startAgent(gw, {
    token: await gw.token({ team: name, scopes: ['agent'] }),
    root,
    sandbox: 'gvisor',
    capacity: 4,
    agentId: `agent-${name}`,
    extraArgs: ['--warm', '1'],
  });
  agents.push(a);
  // The harness gives an agent 30 s; probing runtimes on a loaded machine can take longer, so wait for the line itself.
  await a.ready.catch(async () => {
    for (let i = 0; i < 360 && !/connected to /.test(a.logs()); i++) await new Promise((r) => setTimeout(r, 500));
    if (!/connected to /.test(a.logs())) throw new Error(`agent ${name} did not connect:\n${a.logs()}`);
  });
}

/** Starts `python3 -i` as an interactive job and waits for its first prompt (on stderr, where Python writes it). */
async function startRepl(c: Client): Promise<string> {
  const r = await call(c, 'execute', { command: 'python3', args: ['-i', '-q', '-u'], interactive: true });
  expect(r.isError, text(r)).toBeFalsy();
  const jobId = data(r).job_id as string;
  const prompt = await call(c, 'job_output', { job_id: jobId, stream: 'stderr', wait_ms: 30_000, until: '>>> ' });
  expect(data(prompt).data).toContain('>>> ');
  return jobId;
}

/** Sends a line and reads stdout from `offset` until `until` shows (the REPL's answer). */
async function say(c: Client, jobId: string, line: string, offset: number, until: string): Promise<{ out: string; next: number }> {
  const w = await call(c, 'job_input', { job_id: jobId, data: `${line}\n` });
  expect(w.isError, text(w)).toBeFalsy();
  if (until === '') return { out: '', next: offset };
  const r = await call(c, 'job_output', { job_id: jobId, offset, wait_ms: 30_000, until });
  return { out: data(r).data as string, next: data(r).next_offset as number };
}

beforeAll(async () => {
  if (!RUNSC) return;
  gw = await startGateway();
  console.log(`gateway up ${new Date().toISOString()}`);
  root = mkdtempSync(join(tmpdir(), 'gatehouse-interactive-'));
  await team('repl', { enabled: true, maxSessions: 3, maxInputBytes: 1024, auditInputText: false });
  await team('idle', { enabled: true, maxSessions: 1, idleTtlMs: 2_000 });
  await gw.putPolicy('off', PRESETS.standard.policy);
  client = await gw.mcp('repl', ['execute', 'artifacts:read']);
}, 900_000);

afterAll(async () => {
  await client?.close();
  for (const a of agents) await a.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe.skipIf(!RUNSC)('interactive jobs (job_input, job_output wait, tty)', () => {
  it('converses with a Python REPL: each answer read with wait_ms + until, then eof ends it with exit 0', async () => {
    const jobId = await startRepl(client);
    let a = await say(client, jobId, 'x = 6 * 7', 0, '');
    a = await say(client, jobId, 'print(x)', 0, '42');
    expect(a.out).toContain('42');
    a = await say(client, jobId, 'print("answer:", x + 1)', a.next, 'answer: 43');
    expect(a.out).toContain('answer: 43');
    const last = await call(client, 'job_input', { job_id: jobId, data: 'print("bye")\n', eof: true });
    expect(data(last)).toMatchObject({ eof: true, bytes: 13 });
    expect(data(last).sha256).toMatch(/^[0-9a-f]{64}$/);
    const st = await call(client, 'job_status', { job_id: jobId, wait_ms: 60_000 });
    expect(data(st)).toMatchObject({ state: 'exited', exit_code: 0 });
    const out = await call(client, 'job_output', { job_id: jobId });
    expect(data(out).data).toContain('bye');
    // Its stdin is gone with it.
    const again = await call(client, 'job_input', { job_id: jobId, data: 'print(1)\n' });
    expect(again.isError).toBe(true);
    expect(text(again)).toContain('has ended');
  }, 240_000);

  it('audits each write with its size and sha256, without the text when the policy does not keep it', async () => {
    const token = await gw.token({ team: 'repl', scopes: ['admin'] });
    const r = await fetch(`${gw.url}/admin/v1/audit?tool=job_input&limit=50`, { headers: { Authorization: `Bearer ${token}` } });
    const rows = JSON.stringify(await r.json());
    expect(rows).toContain('"sha256"');
    expect(rows).not.toContain('answer:');
  });

  it('refuses another subject of the same team ("not found"), a non-interactive job and input over the cap', async () => {
    const jobId = await startRepl(client);
    const other = await connectMcp(`${gw.url}/mcp`, await gw.token({ team: 'repl', scopes: ['execute', 'artifacts:read'], subject: 'someone-else' }));
    const foreign = await call(other, 'job_input', { job_id: jobId, data: 'import os; os.system("id")\n' });
    await other.close();
    expect(foreign.isError).toBe(true);
    expect(text(foreign)).toContain('not found');
    const big = await call(client, 'job_input', { job_id: jobId, data: `${'#'.repeat(2000)}\n` });
    expect(big.isError).toBe(true);
    expect(text(big)).toContain("over the team's limit of 1024 bytes (interactive.maxInputBytes)");
    // Neither reached the REPL: its next answer is the first thing it printed.
    const a = await say(client, jobId, 'print("still", 1)', 0, 'still 1');
    expect(a.out).toBe('still 1\n');
    await call(client, 'job_input', { job_id: jobId, data: '', eof: true });
    const plain = await call(client, 'execute', { command: 'sleep', args: ['20'], background: true });
    const w = await call(client, 'job_input', { job_id: data(plain).job_id, data: 'x\n' });
    expect(w.isError).toBe(true);
    expect(text(w)).toContain('is not interactive');
    await call(client, 'job_kill', { job_id: data(plain).job_id });
  }, 240_000);

  it("a session does not take the team's one job slot: a normal job runs beside it (maxConcurrentJobs = 1)", async () => {
    const jobId = await startRepl(client);
    const r = await call(client, 'execute', { command: 'echo', args: ['beside the session'] });
    expect(r.isError, text(r)).toBeFalsy();
    expect(data(r).stdout).toBe('beside the session\n');
    await call(client, 'job_input', { job_id: jobId, data: '', eof: true });
  }, 240_000);

  it('is refused when the policy leaves interactive input off (the standard preset)', async () => {
    const off = await gw.mcp('off', ['execute', 'artifacts:read']);
    const r = await call(off, 'execute', { command: 'cat', args: [], interactive: true });
    await off.close();
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('Interactive input is disabled in configuration (interactive.enabled = false)');
  });

  it('stops a session idle past its TTL, saying why, and counts sessions against interactive.maxSessions', async () => {
    const c = await gw.mcp('idle', ['execute', 'artifacts:read']);
    const first = await call(c, 'execute', { command: 'cat', args: [], interactive: true });
    expect(first.isError, text(first)).toBeFalsy();
    const second = await call(c, 'execute', { command: 'cat', args: [], interactive: true });
    expect(second.isError).toBe(true);
    expect(text(second)).toContain('interactive.maxSessions = 1');
    const st = await call(c, 'job_status', { job_id: data(first).job_id, wait_ms: 60_000 });
    await c.close();
    expect(data(st).state).toBe('cancelled');
    expect((data(st).error as S).message).toMatch(/idle for \d+ ms, over its idle TTL of 2000 ms \(interactive\.idleTtlMs\)/);
  }, 240_000);

  it('survives a gateway restart mid-session: the REPL keeps its state and the conversation goes on', async () => {
    const jobId = await startRepl(client);
    const a = await say(client, jobId, 'kept = "before the restart"', 0, '');
    await gw.restart();
    const c = await gw.mcp('repl', ['execute', 'artifacts:read']);
    // The agent reconnects with backoff; until then a write answers no_agent and writes nothing.
    let w: S = {};
    for (let i = 0; i < 60; i++) {
      w = await call(c, 'job_input', { job_id: jobId, data: 'print(kept)\n' });
      if (!w.isError) break;
      expect(text(w)).toContain('is not connected now');
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(w.isError, text(w)).toBeFalsy();
    const r = await call(c, 'job_output', { job_id: jobId, offset: a.next, wait_ms: 30_000, until: 'before the restart' });
    expect(data(r).data).toBe('before the restart\n');
    await call(c, 'job_input', { job_id: jobId, data: '', eof: true });
    const st = await call(c, 'job_status', { job_id: jobId, wait_ms: 60_000 });
    expect(data(st)).toMatchObject({ state: 'exited', exit_code: 0 });
    await c.close();
    client = await gw.mcp('repl', ['execute', 'artifacts:read']);
  }, 240_000);

  it('runs a job on a pseudo-terminal of the size asked (tty inside the gVisor sandbox)', async () => {
    const r = await call(client, 'execute', {
      command: 'python3',
      args: ['-c', 'import sys, os; print(sys.stdin.isatty(), sys.stdout.isatty(), os.get_terminal_size())'],
      tty: true,
      rows: 30,
      cols: 100,
    });
    expect(r.isError, text(r)).toBeFalsy();
    const jobId = data(r).job_id as string;
    const st = await call(client, 'job_status', { job_id: jobId, wait_ms: 60_000 });
    expect(data(st)).toMatchObject({ state: 'exited', exit_code: 0 });
    const out = await call(client, 'job_output', { job_id: jobId });
    expect(data(out).data).toContain('True True os.terminal_size(columns=100, lines=30)');
  }, 240_000);
});
