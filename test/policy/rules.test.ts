import { describe, expect, it } from 'vitest';
import { verdictOf } from '../../src/policy/engine.ts';
import { parsePolicy } from '../../src/policy/parse.ts';
import { PRESETS } from '../../src/policy/presets.ts';
import { check, policy, run } from './helpers.ts';

const base = { executables: { allow: ['git', '/usr/bin/git', 'ls', 'rm', 'python3'] }, runtime: { enabled: true, allowedRuntimes: ['python' as const] } };

describe('rules: allow / ask / deny by argv prefix', () => {
  const p = policy({
    ...base,
    rules: [
      { pattern: ['git', 'push', '--dry-run'], decision: 'allow' },
      { pattern: ['git', ['push', 'reset']], decision: 'ask', reason: 'pushes leave the workspace' },
      { pattern: ['rm', '/-[a-z]*r[a-z]*/'], decision: 'deny', reason: 'no recursive deletes' },
    ],
  });

  it('asks: not allowed until approved, with the rule, its reason, and what would run', async () => {
    const d = await run(p, 'git', 'push', 'origin', 'main');
    expect(d).toMatchObject({ allowed: false, stage: 'rules', ask: { rule: 1, reason: 'pushes leave the workspace' } });
    expect(d.reason).toBe('Approval required by rule 2: pushes leave the workspace');
    expect(d.effective?.timeoutMs).toBeGreaterThan(0);
    expect(verdictOf(d)).toBe('ask');
  });
  it('the first matching rule decides: an earlier allow exempts a narrower command', async () => {
    const d = await run(p, 'git', 'push', '--dry-run');
    expect(d.allowed).toBe(true);
    expect(d.ask).toBeUndefined();
    expect(d.notes).toContain('allowed by rules[0]');
  });
  it('alternatives and /regex/ elements (anchored) match', async () => {
    expect((await run(p, 'git', 'reset', '--hard')).ask?.rule).toBe(1);
    const d = await run(p, 'rm', '-rf', 'build');
    expect(d).toMatchObject({ allowed: false, stage: 'rules', reason: 'Denied by rule 3: no recursive deletes' });
    expect(verdictOf(d)).toBe('deny');
    // Anchored: "-f" alone does not contain an r, "x-r" is not an option.
    expect((await run(p, 'rm', '-f', 'x')).allowed).toBe(true);
    expect((await run(p, 'rm', 'x-r')).allowed).toBe(true);
  });
  it('a command no rule matches is decided by the rest of the policy', async () => {
    expect((await run(p, 'git', 'status')).allowed).toBe(true);
    expect(verdictOf(await run(p, 'git', 'status'))).toBe('allow');
  });
  it('a path to the executable does not dodge a rule written with its bare name', async () => {
    expect((await run(p, '/usr/bin/git', 'push')).ask?.rule).toBe(1);
  });
  it("an earlier stage's denial stands: a rule never allows what the allowlists refuse", async () => {
    const q = policy({
      ...base,
      rules: [
        { pattern: ['curl'], decision: 'allow' },
        { pattern: ['curl'], decision: 'ask' },
      ],
    });
    expect(await run(q, 'curl', 'x')).toMatchObject({ allowed: false, stage: 'executable' });
    expect((await run(q, 'curl', 'x')).ask).toBeUndefined();
  });
  it('a simple command string is decided as its argv, and allowing shell strings does not dodge the rule', async () => {
    const q = policy({ ...base, shell: { enabled: true, allow: ['/.*/'] }, rules: [{ pattern: ['git', 'push'], decision: 'ask' }] });
    const d = await check(q, { mode: 'shell', command: 'git push origin' });
    expect(d.ask?.rule).toBe(0);
    expect(d.runAs).toEqual({ command: 'git', args: ['push', 'origin'] });
  });
  it('a shell string with shell syntax is matched as sh -c <string>', async () => {
    const q = policy({ ...base, shell: { enabled: true, allow: ['/.*/'] }, rules: [{ pattern: ['sh', '-c', '/.*git +push.*/'], decision: 'ask' }] });
    expect((await check(q, { mode: 'shell', command: 'cd x && git  push' })).ask?.rule).toBe(0);
    expect((await check(q, { mode: 'shell', command: 'ls | wc -l' })).allowed).toBe(true);
  });
  it('a tools filter limits a rule to those tools (policy_check counts as the call it simulates)', async () => {
    const q = policy({ ...base, rules: [{ pattern: ['python3'], decision: 'ask', tools: ['runtime_execute'] }] });
    expect((await check(q, { tool: 'runtime_execute', runtime: 'python', mode: 'code', command: 'python3', code: 'print(1)' })).ask).toBeDefined();
    expect((await check(q, { tool: 'policy_check', runtime: 'python', command: 'python3', args: ['x.py'] })).ask).toBeDefined();
    expect((await run(q, 'python3', 'x.py')).allowed).toBe(true);
  });
});

describe('rules in the policy document', () => {
  const doc = (rules: unknown) => parsePolicy({ version: 1, rules });
  it('an unknown decision is refused with the allowed values', () => {
    const r = doc([{ pattern: ['git'], decision: 'prompt' }]);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.message).toContain('rules.0.decision');
      expect(r.error.message).toMatch(/allow.*ask.*deny/);
    }
  });
  it('an invalid regular expression names its place', () => {
    const r = doc([{ pattern: ['git', ['push', '/(/']], decision: 'ask' }]);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toContain('rules.0.pattern.1.1: invalid regular expression');
  });
  it('an empty pattern and unknown keys are refused', () => {
    const empty = doc([{ pattern: [], decision: 'ask' }]);
    expect(empty.ok).toBe(false);
    const typo = doc([{ pattern: ['git'], decison: 'ask' }]);
    expect(typo.ok).toBe(false);
    if (!typo.ok) expect(typo.error.message).toContain('decison');
  });
  it('approval lifetimes are bounded', () => {
    expect(parsePolicy({ version: 1, approvals: { ttlSeconds: 0 } }).ok).toBe(false);
    expect(parsePolicy({ version: 1, approvals: { ttlSeconds: 60, promptTtlSeconds: 30, askClient: false } }).ok).toBe(true);
    expect(parsePolicy({ version: 1, approvals: { askClient: 'no' } }).ok).toBe(false);
  });
});

describe('strict preset asks before destroying work', () => {
  const strict = PRESETS.strict.policy;
  it('asks for a recursive rm and for git clean/reset/push, not for reading', async () => {
    expect((await run(strict, 'rm', '-rf', 'build')).ask).toBeDefined();
    expect((await run(strict, 'rm', '--recursive', 'build')).ask).toBeDefined();
    expect((await run(strict, 'rm', 'one-file')).allowed).toBe(true);
    const push = await run(strict, 'git', 'push');
    expect(push.ask).toBeDefined();
    // What runs once approved keeps the preset's git hardening.
    expect(push.effective?.hardenGit).toBe(true);
    expect((await run(strict, 'git', 'status')).allowed).toBe(true);
  });
});
