import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hasCommand } from '../e2e/harness.ts';
import { parsePolicy } from '../../src/policy/parse.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { PRESETS, PRESET_NAMES, STRICT_GIT_ARGS } from '../../src/policy/presets.ts';
import { check, run } from './helpers.ts';

const { strict, standard, open } = { strict: PRESETS.strict.policy, standard: PRESETS.standard.policy, open: PRESETS.open.policy };

describe('presets are valid policy documents', () => {
  it.each(PRESET_NAMES)('%s parses (no unknown keys) and says what it allows', (n) => {
    expect(parsePolicy(JSON.parse(JSON.stringify(PRESETS[n].policy))).ok).toBe(true);
    expect(PRESETS[n].summary.length).toBeGreaterThan(40);
  });
  it('standard is the default policy', () => {
    expect(standard).toEqual(DEFAULT_POLICY);
  });
});

describe('strict: no interpreters, no make, git without repository programs', () => {
  it('refuses interpreters, make, compilers, runtimes and shell strings', async () => {
    for (const exe of ['python3', 'node', 'make', 'gcc', 'perl', 'sh']) expect((await run(strict, exe, 'x')).allowed, exe).toBe(false);
    expect((await check(strict, { tool: 'runtime_execute', mode: 'argv', runtime: 'python', command: 'python3', args: ['x.py'] })).allowed).toBe(false);
    expect((await check(strict, { mode: 'shell', command: 'ls | wc -l' })).allowed).toBe(false);
  });
  it('runs git with the repository-program switches in front, also for a simple command string', async () => {
    const d = await run(strict, 'git', 'status');
    expect(d.allowed).toBe(true);
    expect(d.runAs).toEqual({ command: 'git', args: [...STRICT_GIT_ARGS, 'status'] });
    expect((await check(strict, { mode: 'shell', command: 'git log --oneline' })).runAs).toEqual({ command: 'git', args: [...STRICT_GIT_ARGS, 'log', '--oneline'] });
  });
  it('refuses git diff (diff.external comes from the repository)', async () => {
    expect((await run(strict, 'git', 'diff')).allowed).toBe(false);
  });
  it('still allows the read tools', async () => {
    expect((await check(strict, { mode: 'shell', command: 'ls -la' })).allowed).toBe(true);
  });
});

describe('open: arbitrary code inside the sandbox, by design', () => {
  it('allows any shell string and interpreters\' inline code', async () => {
    expect((await check(open, { mode: 'shell', command: 'ls | wc -l; echo $HOME' })).allowed).toBe(true);
    expect((await run(open, 'python3', '-c', 'print(1)')).allowed).toBe(true);
  });
  it('keeps the launcher and program-option screens', async () => {
    expect((await run(open, 'env', 'sh')).allowed).toBe(false);
    expect((await run(open, 'tar', '-c', '-f', '--', '--to-command=sh', '.')).allowed).toBe(false);
  });
});

const roots: string[] = [];
afterAll(() => {
  for (const d of roots) rmSync(d, { recursive: true, force: true });
});
const skipGit = !hasCommand('git') && process.env.CI !== 'true';

describe.skipIf(skipGit)("strict's git switches against the real git", () => {
  function repo(): { dir: string; marker: (n: string) => string; git: (...a: string[]) => void } {
    const dir = mkdtempSync(join(tmpdir(), 'gh-strict-'));
    roots.push(dir);
    const env = { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 'a', GIT_AUTHOR_EMAIL: 'a@x.invalid', GIT_COMMITTER_NAME: 'a', GIT_COMMITTER_EMAIL: 'a@x.invalid' };
    const git = (...a: string[]) => void spawnSync('git', a, { cwd: join(dir, 'r'), env, stdio: 'ignore' });
    mkdirSync(join(dir, 'r'));
    git('init', '-q');
    // What a workspace can write: an fsmonitor program and a pre-commit hook.
    const payload = join(dir, 'payload.sh');
    writeFileSync(payload, `#!/bin/sh\ntouch '${dir}/M_'"$1"\n`);
    chmodSync(payload, 0o755);
    git('config', 'core.fsmonitor', `${payload} fsmonitor`);
    writeFileSync(join(dir, 'r', '.git', 'hooks', 'pre-commit'), `#!/bin/sh\n'${payload}' hook\n`);
    chmodSync(join(dir, 'r', '.git', 'hooks', 'pre-commit'), 0o755);
    return { dir, marker: (n) => join(dir, `M_${n}`), git };
  }
  it('without the switches, the workspace\'s programs run (the payload is real)', () => {
    const r = repo();
    r.git('status');
    r.git('commit', '-q', '--allow-empty', '-m', 'x');
    expect(existsSync(r.marker('fsmonitor'))).toBe(true);
    expect(existsSync(r.marker('hook'))).toBe(true);
  });
  it('with them, neither fsmonitor nor the hook runs', () => {
    const r = repo();
    r.git(...STRICT_GIT_ARGS, 'status');
    r.git(...STRICT_GIT_ARGS, 'commit', '-q', '--allow-empty', '-m', 'x');
    expect(existsSync(r.marker('fsmonitor'))).toBe(false);
    expect(existsSync(r.marker('hook'))).toBe(false);
    // …and git still works: the commit was made.
    expect(spawnSync('git', ['rev-parse', '--verify', 'HEAD'], { cwd: join(r.dir, 'r'), stdio: 'ignore' }).status).toBe(0);
  });
});
