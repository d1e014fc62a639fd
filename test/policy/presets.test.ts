import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/policy/parse.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { PRESETS, PRESET_NAMES } from '../../src/policy/presets.ts';
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
  it('standard and open reuse gVisor sandboxes within bounds; strict gives every job a fresh one', () => {
    expect(standard.sandbox.reuse).toEqual({ jobs: 50, seconds: 300 });
    expect(open.sandbox.reuse).toEqual({ jobs: 50, seconds: 300 });
    expect(strict.sandbox).toEqual({ minimum: 'none' });
    expect(PRESETS.strict.summary).toContain('single-use');
  });
});

describe('strict: no interpreters, no make, git without repository programs', () => {
  it('refuses interpreters, make, compilers, runtimes and shell strings', async () => {
    for (const exe of ['python3', 'node', 'make', 'gcc', 'perl', 'sh']) expect((await run(strict, exe, 'x')).allowed, exe).toBe(false);
    expect((await check(strict, { tool: 'runtime_execute', mode: 'argv', runtime: 'python', command: 'python3', args: ['x.py'] })).allowed).toBe(false);
    expect((await check(strict, { mode: 'shell', command: 'ls | wc -l' })).allowed).toBe(false);
  });
  it("hands git to the agent to run with the repository's programs switched off, also for a simple command string", async () => {
    const d = await run(strict, 'git', 'status');
    expect(d.allowed).toBe(true);
    expect(d.effective?.hardenGit).toBe(true);
    expect((await check(strict, { mode: 'shell', command: 'git log --oneline' })).runAs).toEqual({ command: 'git', args: ['log', '--oneline'] });
  });
  it('allows git diff: diff.external and diff drivers are switched off like every other repository program', async () => {
    expect((await run(strict, 'git', 'diff')).allowed).toBe(true);
  });
  it('still allows the read tools', async () => {
    expect((await check(strict, { mode: 'shell', command: 'ls -la' })).allowed).toBe(true);
  });
});

describe('open: arbitrary code inside the sandbox, by design', () => {
  it("allows any shell string and interpreters' inline code", async () => {
    expect((await check(open, { mode: 'shell', command: 'ls | wc -l; echo $HOME' })).allowed).toBe(true);
    expect((await run(open, 'python3', '-c', 'print(1)')).allowed).toBe(true);
  });
  it('keeps the launcher and program-option screens', async () => {
    expect((await run(open, 'env', 'sh')).allowed).toBe(false);
    expect((await run(open, 'tar', '-c', '-f', '--', '--to-command=sh', '.')).allowed).toBe(false);
  });
});

// strict's git against the real git, in the real sandbox: test/policy/git-repository-programs.test.ts.
