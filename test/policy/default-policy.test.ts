import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { parsePolicy } from '../../src/policy/engine.ts';
import { check, run } from './helpers.ts';

describe('the default policy', () => {
  it('is a valid policy document', () => {
    expect(parsePolicy(JSON.parse(JSON.stringify(DEFAULT_POLICY)))).toMatchObject({ ok: true });
  });
  it.each([
    ['ls', '-la'],
    ['python3', 'x.py'],
    ['git', 'status'],
    ['git', 'log', '--oneline'],
    ['cat', 'README.md'],
    ['grep', '-rn', 'TODO', 'src'],
    ['node', 'x.js'],
    ['make', 'test'],
    ['find', '.', '-name', '*.ts'],
    ['sed', '-n', '1,5p', 'x'],
    ['tar', '-czf', 'out.tgz', 'src'],
    ['go', 'test', './...'],
  ])('allows %s %s', async (...argv) => {
    const d = await run(DEFAULT_POLICY, argv[0], ...argv.slice(1));
    expect(d.allowed, d.reason).toBe(true);
  });
  it.each([
    ['find', '.', '-exec', 'sh', '-c', 'id', ';'],
    ['git', '-c', 'core.pager=sh', 'log'],
    ['tar', '--checkpoint-action=exec=sh', '-cf', 'x.tar', '.'],
    ['python3', '-c', 'print(1)'],
    ['node', '-e', '1'],
    ['perl', '-e', '1'],
    ['sed', '1e id'],
    ['sort', '--compress-program=sh', 'x'],
    ['make', 'SHELL=/bin/sh'],
    ['env', 'sh'],
    ['xargs', 'sh'],
    ['sh', '-c', 'id'],
    ['bash', 'x.sh'],
    ['curl', 'http://127.0.0.1'],
  ])('denies %s %s …', async (...argv) => {
    expect((await run(DEFAULT_POLICY, argv[0], ...argv.slice(1))).allowed).toBe(false);
  });
  it('denies shell strings and points at args', async () => {
    const d = await check(DEFAULT_POLICY, { mode: 'shell', command: 'ls; rm -rf /' });
    expect(d.reason).toContain('shell.enabled = false');
  });
  it('allows runtime code mode for python, not the shell runtime', async () => {
    expect((await check(DEFAULT_POLICY, { tool: 'runtime_execute', runtime: 'python', mode: 'code', command: 'python3', code: 'print(1)' })).allowed).toBe(
      true,
    );
    expect((await check(DEFAULT_POLICY, { tool: 'runtime_execute', runtime: 'shell', mode: 'argv', command: 'bash', args: ['-c', 'true'] })).reason).toContain(
      'Runtime "shell" is not in the allowed runtimes list',
    );
  });
  it('clamps a long timeout rather than refusing it', async () => {
    const d = await check(DEFAULT_POLICY, { command: 'true', timeoutMs: 10_000_000 });
    expect(d.allowed).toBe(true);
    expect(d.notes.join()).toMatch(/clamped/);
  });
  it('passes harmless locale variables and refuses loader variables', async () => {
    expect((await check(DEFAULT_POLICY, { command: 'ls', env: { LANG: 'C.UTF-8' } })).allowed).toBe(true);
    expect((await check(DEFAULT_POLICY, { command: 'ls', env: { LD_PRELOAD: '/tmp/x.so' } })).reason).toContain('LD_PRELOAD');
  });
});
