/**
 * OPA evaluators against a loopback OPA stand-in (test/support/opa-server.ts; there is no `opa`
 * binary here): mode any/all, every fail-closed case, and the input document's shape.
 */
import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PolicyDocumentInput } from '../../src/contracts/policy.ts';
import { startOpaServer, type OpaServer } from '../support/opa-server.ts';
import { check, policy } from './helpers.ts';

let opa: OpaServer;
let deadUrl: string;

beforeAll(async () => {
  opa = await startOpaServer();
  // A port that was just free and is now closed: connection refused.
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((r) => srv.close(() => r()));
  deadUrl = `http://127.0.0.1:${port}`;
});
afterAll(() => opa.close());
beforeEach(() => opa.reset());

function withOpa(paths: string[], mode: 'any' | 'all' = 'any', extra: Partial<PolicyDocumentInput> = {}, timeoutMs = 2000) {
  return policy({
    executables: { allow: ['ls', 'git', 'python3'] },
    runtime: { enabled: true, allowedRuntimes: ['python', 'shell'] },
    env: { allow: ['LANG'] },
    opa: { mode, timeoutMs, evaluators: paths.map((p) => (p.startsWith('http') ? { url: p, policyPath: 'mcp/subprocess' } : { url: opa.url, policyPath: p })) },
    ...extra,
  });
}

describe('mode any / all', () => {
  it('any: one allow is enough', async () => {
    opa.set('gate/deny', { allow: false });
    opa.set('gate/allow', { allow: true });
    const d = await check(withOpa(['gate/deny', 'gate/allow']), { command: 'ls' });
    expect(d).toMatchObject({ allowed: true, stage: 'allowed' });
    expect(d.opa?.verdicts.map((v) => v.allowed)).toEqual([false, true]);
    expect(d.reason).toContain('OPA');
  });
  it("any: denied when none allows, with every evaluator's reason", async () => {
    opa.set('a', { allow: false });
    opa.set('b', { allow: false });
    const d = await check(withOpa(['a', 'b']), { command: 'ls' });
    expect(d).toMatchObject({ allowed: false, stage: 'opa' });
    expect(d.reason).toContain(`${opa.url}/v1/data/a`);
    expect(d.reason).toContain(`${opa.url}/v1/data/b`);
  });
  it('all: every evaluator must allow', async () => {
    opa.set('gate/allow', { allow: true });
    opa.set('gate/also', { allow: true });
    opa.set('gate/deny', { allow: false });
    expect((await check(withOpa(['gate/allow', 'gate/also'], 'all'), { command: 'ls' })).allowed).toBe(true);
    const d = await check(withOpa(['gate/allow', 'gate/deny'], 'all'), { command: 'ls' });
    expect(d).toMatchObject({ allowed: false, stage: 'opa' });
    expect(d.reason).toContain(`denied by OPA evaluator ${opa.url}/v1/data/gate/deny`);
  });
  it('accepts a bare boolean result', async () => {
    opa.set('bool/yes', { result: true });
    opa.set('bool/no', { result: false });
    expect((await check(withOpa(['bool/yes']), { command: 'ls' })).allowed).toBe(true);
    expect((await check(withOpa(['bool/no']), { command: 'ls' })).allowed).toBe(false);
  });
  it('any: an evaluator that fails does not block another that allows', async () => {
    opa.set('ok', { allow: true });
    opa.set('boom', { status: 500 });
    const d = await check(withOpa(['boom', 'ok']), { command: 'ls' });
    expect(d.allowed).toBe(true);
    expect(d.opa?.verdicts[0]).toMatchObject({ allowed: false });
  });
  it('all: an evaluator that fails denies', async () => {
    opa.set('ok', { allow: true });
    opa.set('boom', { status: 503 });
    const d = await check(withOpa(['ok', 'boom'], 'all'), { command: 'ls' });
    expect(d).toMatchObject({ allowed: false, stage: 'opa' });
    expect(d.reason).toContain('OPA returned HTTP 503');
  });
  it('an empty evaluator list adds nothing (no request, the declarative decision stands)', async () => {
    const d = await check(withOpa([]), { command: 'ls' });
    expect(d.allowed).toBe(true);
    expect(d.opa).toBeUndefined();
    expect((await check(withOpa([]), { command: 'curl' })).stage).toBe('executable');
    expect(opa.requests).toHaveLength(0);
  });
});

describe('fails closed, naming the evaluator', () => {
  const url = (p: string) => `${opa.url}/v1/data/${p}`;
  it('network error', async () => {
    const d = await check(withOpa([deadUrl]), { command: 'ls' });
    expect(d).toMatchObject({ allowed: false, stage: 'opa' });
    expect(d.reason).toContain('OPA request failed');
    expect(d.reason).toContain(`${deadUrl}/v1/data/mcp/subprocess`);
  });
  it('connection dropped without an answer', async () => {
    opa.set('hang', { hangUp: true });
    const d = await check(withOpa(['hang']), { command: 'ls' });
    expect(d).toMatchObject({ allowed: false, stage: 'opa' });
    expect(d.reason).toContain(url('hang'));
  });
  it('timeout (opa.timeoutMs, via AbortController)', async () => {
    opa.set('slow', { sleepMs: 5000, next: { allow: true } });
    const started = Date.now();
    const d = await check(withOpa(['slow'], 'any', {}, 200), { command: 'ls' });
    expect(Date.now() - started).toBeLessThan(4000);
    expect(d).toMatchObject({ allowed: false, stage: 'opa' });
    expect(d.reason).toBe(`OPA request to ${url('slow')} timed out after 200ms`);
  });
  it('HTTP 500', async () => {
    opa.set('broken', { status: 500 });
    const d = await check(withOpa(['broken']), { command: 'ls' });
    expect(d.reason).toBe(`OPA returned HTTP 500 (${url('broken')})`);
  });
  it('garbage body', async () => {
    opa.set('garbage', { garbage: true });
    const d = await check(withOpa(['garbage']), { command: 'ls' });
    expect(d.allowed).toBe(false);
    expect(d.reason).toMatch(/^Failed to parse OPA response: /);
    expect(d.reason).toContain(url('garbage'));
  });
  it('a JSON body that is not an object', async () => {
    opa.set('arr', { garbage: true, body: '[true]' });
    expect((await check(withOpa(['arr']), { command: 'ls' })).reason).toMatch(/^Failed to parse OPA response/);
  });
  it('undefined result (no rule answered)', async () => {
    opa.set('nothing', { undefined: true });
    const d = await check(withOpa(['nothing']), { command: 'ls' });
    expect(d.allowed).toBe(false);
    expect(d.reason).toContain('undefined');
    expect(d.reason).toContain(url('nothing'));
    // A path nobody configured answers {} too.
    expect((await check(withOpa(['never/set']), { command: 'ls' })).allowed).toBe(false);
  });
  it('result without allow', async () => {
    opa.set('noallow', { result: { other: true } });
    const d = await check(withOpa(['noallow']), { command: 'ls' });
    expect(d.allowed).toBe(false);
    expect(d.reason).toContain('result.allow is undefined');
  });
  it.each([
    ['string', 'yes'],
    ['number', 1],
    ['null', null],
    ['object', { x: 1 }],
  ])('non-boolean allow (%s)', async (_, allow) => {
    opa.set('weird', { result: { allow } });
    const d = await check(withOpa(['weird']), { command: 'ls' });
    expect(d).toMatchObject({ allowed: false, stage: 'opa' });
    expect(d.reason).toContain('is not a boolean');
    expect(d.reason).toContain(url('weird'));
  });
  it('a non-boolean, non-object result', async () => {
    opa.set('str', { result: 'allow' });
    expect((await check(withOpa(['str']), { command: 'ls' })).allowed).toBe(false);
  });
  it('a fetch that throws (injected through DecideOptions.fetch)', async () => {
    const d = await check(
      withOpa(['x']),
      { command: 'ls' },
      {
        fetch: async () => {
          throw new TypeError('boom');
        },
      },
    );
    expect(d.reason).toContain('OPA request failed: boom');
  });
  it('a redirect is not an answer', async () => {
    const d = await check(
      withOpa(['x']),
      { command: 'ls' },
      { fetch: async () => new Response(null, { status: 307, headers: { Location: 'http://127.0.0.1:1/' } }) },
    );
    expect(d.reason).toContain('OPA returned HTTP 307');
  });
});

describe('when OPA is asked, and with what input', () => {
  it('only after the declarative stages allowed', async () => {
    opa.set('allow', { allow: true });
    const p = withOpa(['allow']);
    for (const r of [
      { command: 'curl' },
      { command: 'git', args: ['-c', 'x=y', 'log'] },
      { command: 'ls', cwd: '..' },
      { command: 'ls', env: { PATH: '/' } },
    ]) {
      expect((await check(p, r)).allowed).toBe(false);
    }
    expect(opa.requests).toHaveLength(0);
  });
  it('argv: operation command_output with command, args, team, subject, tool; cwd/env only when given', async () => {
    opa.set('mcp/subprocess', { allow: true });
    await check(withOpa(['mcp/subprocess']), { command: 'git', args: ['status'] });
    const r = opa.requests[0];
    expect(r.method).toBe('POST');
    expect(r.path).toBe('mcp/subprocess');
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.body).toEqual({ input: r.input });
    expect(r.input).toEqual({
      operation: 'command_output',
      command: 'git',
      args: ['status'],
      team: 'team-a',
      subject: 'user-1',
      tool: 'execute',
      mode: 'argv',
    });
    await check(withOpa(['mcp/subprocess']), { command: 'ls', args: ['-la'], cwd: './src//', env: { LANG: 'C' } });
    expect(opa.requests[1].input).toMatchObject({ command: 'ls', args: ['-la'], cwd: 'src', env: { LANG: 'C' } });
  });
  it('runtime code mode: the runtime, the executable and the code', async () => {
    opa.set('p', { allow: true });
    await check(withOpa(['p']), { tool: 'runtime_execute', runtime: 'python', mode: 'code', command: 'python3', code: 'print(1)' });
    expect(opa.requests[0].input).toMatchObject({
      operation: 'command_output',
      command: 'python3',
      args: [],
      runtime: 'python',
      tool: 'runtime_execute',
      mode: 'code',
      code: 'print(1)',
    });
  });
  it('shell string: operation exec, /bin/sh -c <string>', async () => {
    opa.set('p', { allow: true });
    const p = withOpa(['p'], 'any', { shell: { enabled: true, allow: ['ls -la | wc -l'] } });
    const d = await check(p, { mode: 'shell', command: 'ls -la | wc -l' });
    expect(d.allowed).toBe(true);
    expect(opa.requests[0].input).toMatchObject({ operation: 'exec', command: '/bin/sh', args: ['-c', 'ls -la | wc -l'], mode: 'shell' });
  });
  it('OPA may allow a shell string not in shell.allow when shell is enabled', async () => {
    opa.set('shellgate', { decide: (input) => ({ allow: (input as { args: string[] }).args[1] === 'make test' }) });
    const p = withOpa(['shellgate'], 'any', { shell: { enabled: true, allow: [] } });
    const ok = await check(p, { mode: 'shell', command: 'make test' });
    expect(ok.allowed).toBe(true);
    expect(ok.notes.join()).toContain('allowed by OPA');
    const no = await check(p, { mode: 'shell', command: 'make test; id' });
    expect(no).toMatchObject({ allowed: false, stage: 'opa' });
    expect(no.reason).toContain('does not match any entry of shell.allow');
  });
  it('OPA cannot enable shell strings when shell.enabled = false', async () => {
    opa.set('p', { allow: true });
    const d = await check(withOpa(['p']), { mode: 'shell', command: 'ls | wc -l' });
    expect(d).toMatchObject({ allowed: false, stage: 'shell' });
    expect(opa.requests).toHaveLength(0);
  });
  it('a trailing slash on the evaluator URL does not double the slash', async () => {
    opa.set('p', { allow: true });
    const p = policy({ executables: { allow: ['ls'] }, opa: { mode: 'any', timeoutMs: 2000, evaluators: [{ url: `${opa.url}/`, policyPath: 'p' }] } });
    expect((await check(p, { command: 'ls' })).allowed).toBe(true);
  });
});
