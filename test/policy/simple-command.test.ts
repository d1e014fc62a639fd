import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { splitSimpleCommand } from '../../src/policy/simple-command.ts';
import { check, policy } from './helpers.ts';

/** What a real sh makes of `words`: the argv printf receives, NUL-separated. */
function shellWords(words: string): string[] {
  const r = spawnSync('sh', ['-c', `printf '%s\\0' ${words}`], { encoding: 'utf8' });
  expect(r.status).toBe(0);
  return r.stdout.split('\0').slice(0, -1);
}

const SIMPLE = [
  'ls',
  'ls -la',
  'git status',
  'git log --oneline -n 5',
  "grep 'a b' file",
  'grep "a b" file',
  "echo 'it''s'",
  'echo ""',
  "echo ''x",
  '  ls   -l  ',
  "git commit -m 'fix: it works'",
  'make CC=cc all',
  'cat a=b',
  'echo a,b %x ^y @z +w',
  "printf 'a;b|c&d'",
  'echo "a;b|c>d"',
  "echo '$HOME'",
  "echo 'a*b?[c]'",
  'echo -- -n',
  'node x.js --flag=1',
  'echo "tab\there"',
];
const SHELL = [
  'ls; rm -rf /',
  'ls | wc',
  'ls && id',
  'ls &',
  'echo $HOME',
  'echo "$HOME"',
  'echo `id`',
  'echo $(id)',
  'ls *.ts',
  'ls ?',
  'ls [ab]',
  'cat < f',
  'echo x > f',
  'echo x >> f',
  'ls\nid',
  'ls\rid',
  'echo ~',
  'echo ~/x',
  'ls # comment',
  'echo a\\ b',
  'echo "a\\"b"',
  'A=1 ls',
  'if true',
  '! ls',
  '{ ls; }',
  '(ls)',
  'echo {a,b}',
  "echo 'unterminated",
  'echo "unterminated',
  '',
  '   ',
  'echo "!x"',
  'for x in a',
  "''",
];

describe('simple command strings are split like a real shell splits them', () => {
  it.each(SIMPLE)('%j', (s) => {
    const argv = splitSimpleCommand(s);
    expect(argv).not.toBeNull();
    expect(argv).toEqual(shellWords(s));
  });
  it.each(SHELL)('%j keeps shell syntax: stays a shell string', (s) => {
    expect(splitSimpleCommand(s)).toBeNull();
  });
});

describe('execute without args, under a policy without shell strings', () => {
  it('the first command a new user tries works: {"command":"ls"}', async () => {
    const d = await check(DEFAULT_POLICY, { mode: 'shell', command: 'ls' });
    expect(d.allowed, d.reason).toBe(true);
    expect(d.runAs).toEqual({ command: 'ls', args: [] });
  });
  it('ls -la and git status run as argv, without a shell', async () => {
    expect((await check(DEFAULT_POLICY, { mode: 'shell', command: 'ls -la' })).runAs).toEqual({ command: 'ls', args: ['-la'] });
    const g = await check(DEFAULT_POLICY, { mode: 'shell', command: 'git status' });
    expect(g.runAs).toEqual({ command: 'git', args: ['status'] });
    expect(g.notes[0]).toContain('decided as argv');
  });
  it('a simple command is screened as argv: git -c core.pager=… is still refused', async () => {
    const d = await check(DEFAULT_POLICY, { mode: 'shell', command: "git -c 'core.pager=sh -c id' log" });
    expect(d.allowed).toBe(false);
    expect(d.stage).toBe('arguments');
  });
  it('an executable outside the allowlist is refused by the allowlist', async () => {
    const d = await check(DEFAULT_POLICY, { mode: 'shell', command: 'curl http://127.0.0.1' });
    expect(d.allowed).toBe(false);
    expect(d.reason).toContain('not in the allowed executables list');
  });
  it('anything with shell syntax stays a shell string (refused when shell strings are off)', async () => {
    const d = await check(DEFAULT_POLICY, { mode: 'shell', command: 'ls; id' });
    expect(d.allowed).toBe(false);
    expect(d.stage).toBe('shell');
    expect(d.runAs).toBeUndefined();
  });
  it('a policy allowing the exact shell string keeps allowing it when argv would not', async () => {
    const p = policy({ shell: { enabled: true, allow: ['uptime -p'] } });
    const d = await check(p, { mode: 'shell', command: 'uptime -p' });
    expect(d.allowed).toBe(true);
    expect(d.runAs).toBeUndefined();
  });
  it('runtime shell code is not split: it is a script', async () => {
    const p = policy({ runtime: { enabled: true, allowedRuntimes: ['shell'] }, executables: { allow: ['ls', 'sh'] } });
    const d = await check(p, { tool: 'runtime_execute', mode: 'shell', runtime: 'shell', command: 'ls' });
    expect(d.runAs).toBeUndefined();
  });
});
