/**
 * Code on stdin through the real gateway (`wrangler dev`) and a real agent: under the `standard`
 * preset a caller must not get a REPL or compiler to run code it sends as the job's stdin
 * (`kotlinc` with no source ran `ProcessBuilder("id")` in the sandbox). The denial is the screens'
 * one "no script is given" reason, before any job exists; with a source file the same programs
 * are decided as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { PRESETS } from '../../src/policy/presets.ts';

const TEAM = 'stdin';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let client: Client;

const text = (r: Record<string, unknown>) => (r.content as { text: string }[])[0]?.text ?? '';
const noScript = (exe: string, shown: string) =>
  `Argument "${shown}" is not allowed for ${exe}: no script is given, so it would read the program from stdin; a policy may permit it with argumentRules["${exe}"].allowInlineCode = true`;

async function admin(method: string, path: string, body?: unknown): Promise<Response> {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  return fetch(`${gw.url}/admin/v1${path}`, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
  });
}
async function jobCount(): Promise<number> {
  return ((await (await admin('GET', '/jobs?limit=200')).json()) as { jobs: unknown[] }).jobs.length;
}
async function policyCheck(command: string, args: string[]) {
  const r = await client.callTool({ name: 'policy_check', arguments: { command, args } });
  return r.structuredContent as { allowed: boolean; decision: string; stage: string; reason: string };
}

beforeAll(async () => {
  gw = await startGateway();
  root = mkdtempSync(join(tmpdir(), 'gatehouse-stdin-'));
  writeFileSync(join(root, 'Hello.kts'), 'println("script ran")\n');
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: testSandbox(), capacity: 2, agentId: 'stdin-agent' });
  await agent.ready;
  const r = await admin('PUT', '/policy/presets/standard');
  expect(r.ok, await r.clone().text()).toBe(true);
  client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
}, 180_000);

afterAll(async () => {
  await client?.close();
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('standard preset: code on stdin', () => {
  it('execute kotlinc with no source and Kotlin on stdin is denied with the no-script reason, and no job runs', async () => {
    const before = await jobCount();
    const r = await client.callTool(
      {
        name: 'execute',
        arguments: {
          command: 'kotlinc',
          args: [],
          stdin: 'println(ProcessBuilder("id").redirectErrorStream(true).start().inputStream.bufferedReader().readText())\n',
          timeout_ms: 110_000,
        },
      },
      undefined,
      { timeout: 180_000 },
    );
    expect(r.isError).toBe(true);
    expect(text(r)).toContain(noScript('kotlinc', '(none)'));
    expect(text(r)).not.toMatch(/uid=\d+/);
    expect(await jobCount()).toBe(before);
  }, 240_000);

  it('options without a source are no source either: kotlinc -d out, with the same reason', async () => {
    const r = await client.callTool({ name: 'execute', arguments: { command: 'kotlinc', args: ['-d', 'out'], stdin: 'println(6*8)\n' } });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain(noScript('kotlinc', '-d out'));
  });

  it('policy_check: dotnet fsi with no script is denied at the arguments stage; with a script it is allowed', async () => {
    expect(await policyCheck('dotnet', ['fsi'])).toMatchObject({ allowed: false, stage: 'arguments', reason: noScript('dotnet', 'fsi') });
    expect(await policyCheck('dotnet', ['fsi', 'build.fsx'])).toMatchObject({ allowed: true });
    expect(await policyCheck('kotlinc', ['-script', 'Hello.kts'])).toMatchObject({ allowed: true });
  });

  it('kotlinc given a script still runs it through the agent', async () => {
    const r = await client.callTool({ name: 'execute', arguments: { command: 'kotlinc', args: ['-script', 'Hello.kts'], timeout_ms: 110_000 } }, undefined, {
      timeout: 180_000,
    });
    expect(r.isError, text(r)).toBeFalsy();
    expect((r.structuredContent as { stdout: string }).stdout).toContain('script ran');
  }, 240_000);
});

describe("a team that adds REPLs to standard's allowlist", () => {
  beforeAll(async () => {
    const standard = PRESETS.standard.policy;
    await gw.putPolicy(TEAM, { ...standard, executables: { allow: [...standard.executables.allow, 'jshell', 'irb', 'lua', 'tclsh', 'iex', 'R'] } });
  }, 60_000);

  it('policy_check denies each with no source, with the same reason', async () => {
    for (const exe of ['jshell', 'irb', 'lua', 'tclsh', 'iex', 'R']) {
      expect(await policyCheck(exe, []), exe).toMatchObject({ allowed: false, stage: 'arguments', reason: noScript(exe, '(none)') });
    }
    // Options alone give no source: tclsh -encoding's value, R's ignored positional.
    expect((await policyCheck('tclsh', ['-encoding', 'utf-8'])).reason).toBe(noScript('tclsh', '-encoding utf-8'));
    expect((await policyCheck('R', ['--vanilla', 'x.R'])).reason).toBe(noScript('R', '--vanilla x.R'));
  });

  it('policy_check allows them with a source file, except the REPLs that read stdin after their files', async () => {
    for (const [exe, args] of [
      ['irb', ['x.rb']],
      ['lua', ['x.lua']],
      ['tclsh', ['x.tcl']],
      ['R', ['-f', 'x.R']],
    ] as const) {
      expect(await policyCheck(exe, [...args]), exe).toMatchObject({ allowed: true });
    }
    // jshell and iex run their files, then read stdin (checked against the real programs).
    for (const [exe, file] of [
      ['jshell', 'x.jsh'],
      ['iex', 'x.exs'],
    ]) {
      const d = await policyCheck(exe, [file]);
      expect(d, exe).toMatchObject({ allowed: false, stage: 'arguments' });
      expect(d.reason).toContain('it reads more program from stdin after the files it is given');
    }
  });
});
