import { describe, expect, it } from 'vitest';
import { decide } from '../../src/policy/engine.ts';
import { check, policy, request } from './helpers.ts';

const tools = policy({
  executables: { allow: ['ls', 'git', 'python3', '/usr/bin/python3', 'node'] },
  runtime: { enabled: true, allowedRuntimes: ['python', 'node'] },
});

describe('stage 1: feature gate', () => {
  it('denies runtime_execute when runtime.enabled = false, with the reference message', async () => {
    const p = policy({ runtime: { enabled: false, allowedRuntimes: ['python'] }, executables: { allow: ['python3'] } });
    const d = await check(p, { tool: 'runtime_execute', runtime: 'python', command: 'python3', args: ['x.py'] });
    expect(d).toMatchObject({ allowed: false, stage: 'feature_gate', reason: 'Runtime execution is disabled in configuration (runtime.enabled = false)' });
  });
  it('denies execute when execute.enabled = false', async () => {
    const d = await check(policy({ execute: { enabled: false }, executables: { allow: ['ls'] } }), { command: 'ls' });
    expect(d).toMatchObject({ allowed: false, stage: 'feature_gate' });
    expect(d.reason).toContain('execute.enabled = false');
  });
  it('allows when the gate is open', async () => {
    expect((await check(tools, { command: 'ls' })).allowed).toBe(true);
    expect((await check(tools, { tool: 'runtime_execute', runtime: 'python', command: 'python3', args: ['x.py'] })).allowed).toBe(true);
  });
});

describe('stage 2: runtime allowlist', () => {
  it('denies a runtime not in the list, naming the list', async () => {
    const d = await check(tools, { tool: 'runtime_execute', runtime: 'ruby', command: 'ruby', args: ['x.rb'] });
    expect(d).toMatchObject({ allowed: false, stage: 'runtime_allowlist', reason: 'Runtime "ruby" is not in the allowed runtimes list: [python, node]' });
  });
  it('applies to policy_check with a runtime too', async () => {
    const d = await check(tools, { tool: 'policy_check', runtime: 'ruby', command: 'ruby', args: [] });
    expect(d.stage).toBe('runtime_allowlist');
  });
  it('denies runtime_execute without a runtime', async () => {
    expect((await check(tools, { tool: 'runtime_execute', command: 'python3' })).stage).toBe('runtime_allowlist');
  });
});

describe('stage 3: executable validation', () => {
  it('denies an executable not compatible with the runtime (by basename)', async () => {
    const d = await check(tools, { tool: 'runtime_execute', runtime: 'python', command: 'node', args: ['x'] });
    expect(d.stage).toBe('executable');
    expect(d.reason).toContain('Executable "node" is not compatible with runtime "python"');
    const abs = await check(tools, { tool: 'runtime_execute', runtime: 'python', command: '/usr/bin/node', args: ['x'] });
    expect(abs.reason).toContain('Executable "/usr/bin/node" is not compatible with runtime "python"');
  });
  it('accepts python3 or python for the python runtime, and an absolute path whose basename is compatible', async () => {
    expect((await check(tools, { tool: 'runtime_execute', runtime: 'python', command: 'python3', args: ['x.py'] })).allowed).toBe(true);
    expect((await check(tools, { tool: 'runtime_execute', runtime: 'python', command: '/usr/bin/python3', args: ['x.py'] })).allowed).toBe(true);
  });
  it("uses the runtime's default executable when none is given", async () => {
    const d = await check(tools, { tool: 'runtime_execute', runtime: 'python', command: '', mode: 'code', code: 'print(1)' });
    expect(d.allowed).toBe(true);
    const noPython = policy({ runtime: { enabled: true, allowedRuntimes: ['python'] }, executables: { allow: ['python'] } });
    const d2 = await check(noPython, { tool: 'runtime_execute', runtime: 'python', command: '', mode: 'code', code: 'print(1)' });
    expect(d2.reason).toBe('Executable "python3" is not in the allowed executables list');
  });
  it('denies an executable not in executables.allow with the reference message', async () => {
    const d = await check(tools, { command: 'curl', args: ['http://127.0.0.1'] });
    expect(d).toMatchObject({ allowed: false, stage: 'executable', reason: 'Executable "curl" is not in the allowed executables list' });
  });
  it('matches a path only against an identical absolute entry', async () => {
    expect((await check(tools, { command: '/usr/bin/python3', args: ['x.py'] })).allowed).toBe(true);
    expect((await check(tools, { command: '/usr/bin/ls' })).stage).toBe('executable'); // only the bare `ls` is listed
    expect((await check(tools, { command: '/usr/bin/../bin/python3', args: ['x.py'] })).stage).toBe('executable');
    expect((await check(tools, { command: './python3', args: ['x.py'] })).reason).toContain('pass a bare name or an absolute path');
    expect((await check(tools, { command: 'bin/ls' })).stage).toBe('executable');
  });
  it('matches a bare name only against a bare entry', async () => {
    const onlyAbs = policy({ executables: { allow: ['/usr/bin/git'] } });
    expect((await check(onlyAbs, { command: 'git', args: ['status'] })).stage).toBe('executable');
    expect((await check(onlyAbs, { command: '/usr/bin/git', args: ['status'] })).allowed).toBe(true);
  });
  it('hands the allowlist to the agent to re-check by resolved path (argv and code, not shell)', async () => {
    const d = await check(tools, { command: 'ls' });
    expect(d.effective?.allowedExecutables).toEqual(['ls', 'git', 'python3', '/usr/bin/python3', 'node']);
    const sh = await check(policy({ shell: { enabled: true, allow: ['ls'] } }), { mode: 'shell', command: 'ls' });
    expect(sh.allowed).toBe(true);
    expect(sh.effective?.allowedExecutables).toBeUndefined();
  });
  it('denies empty and control-character executables', async () => {
    expect((await check(tools, { command: '' })).stage).toBe('executable');
    expect((await check(tools, { command: 'ls\n' })).stage).toBe('executable');
  });
});

describe('stage 5: cwd jail', () => {
  const msg = (c: string) => `Relative CWD "${c}" contains path traversal or absolute path components`;
  it.each(['../..', '..', 'a/../../b', 'a/..', '/etc', '/', '~/x', 'a\\..\\..', '..\\x', 'C:\\x', 'C:/x', 'a/\u0000b', './../x', 'a/./../..'])(
    'denies %j',
    async (cwd) => {
      const d = await check(tools, { command: 'ls', cwd });
      expect(d.stage).toBe('cwd');
      if (!cwd.includes('\u0000')) expect(d.reason).toBe(msg(cwd));
      else expect(d.reason).toContain('\\x00');
    },
  );
  it.each([
    ['./a//b/', 'a/b'],
    ['', ''],
    ['.', ''],
    ['./', ''],
    ['src', 'src'],
    ['a/b/c', 'a/b/c'],
    ['..a/b..', '..a/b..'],
    ['.hidden', '.hidden'],
  ])('normalises %j to %j', async (cwd, want) => {
    const d = await check(tools, { command: 'ls', cwd });
    expect(d.allowed).toBe(true);
    expect(d.effective?.cwd).toBe(want);
  });
  it('defaults to the workspace root', async () => {
    expect((await check(tools, { command: 'ls' })).effective?.cwd).toBe('');
  });
});

describe('stage 6: env', () => {
  const p = policy({ executables: { allow: ['ls'] }, env: { allow: ['LANG', 'CI', 'NODE_OPTIONS'] } });
  it('passes allowed names and nothing else', async () => {
    const d = await check(p, { command: 'ls', env: { LANG: 'C.UTF-8', CI: '1' } });
    expect(d.allowed).toBe(true);
    expect(d.effective?.env).toEqual({ LANG: 'C.UTF-8', CI: '1' });
  });
  it('denies a name not in env.allow, naming it and the list', async () => {
    const d = await check(p, { command: 'ls', env: { LANG: 'C', FOO: 'x' } });
    expect(d).toMatchObject({ allowed: false, stage: 'env' });
    expect(d.reason).toContain('"FOO"');
    expect(d.reason).toContain('[LANG, CI, NODE_OPTIONS]');
  });
  it('never lets the caller set PATH, even when listed', async () => {
    const d = await check(policy({ executables: { allow: ['ls'] }, env: { allow: ['PATH'] } }), { command: 'ls', env: { PATH: '/tmp/evil' } });
    expect(d.stage).toBe('env');
    expect(d.reason).toContain('PATH');
  });
  it.each([
    'LD_PRELOAD',
    'LD_LIBRARY_PATH',
    'LD_AUDIT',
    'BASH_ENV',
    'ENV',
    'PYTHONPATH',
    'PYTHONSTARTUP',
    'PERL5OPT',
    'PERL5LIB',
    'RUBYOPT',
    'RUBYLIB',
    'GIT_SSH_COMMAND',
    'GIT_CONFIG_GLOBAL',
    'GIT_CONFIG_COUNT',
    'GIT_EXEC_PATH',
    'JAVA_TOOL_OPTIONS',
    '_JAVA_OPTIONS',
    'DYLD_INSERT_LIBRARIES',
    'NODE_PATH',
  ])('denies dangerous %s with a reason that says why', async (name) => {
    const d = await check(p, { command: 'ls', env: { [name]: 'x' } });
    expect(d.stage).toBe('env');
    expect(d.reason).toContain(name);
    expect(d.reason).toMatch(/load code|run other programs/);
  });
  it('passes a dangerous name the policy lists explicitly, with a note', async () => {
    const d = await check(p, { command: 'ls', env: { NODE_OPTIONS: '--max-old-space-size=512' } });
    expect(d.allowed).toBe(true);
    expect(d.notes.join(' ')).toContain('NODE_OPTIONS');
  });
  it('denies NUL in a value and invalid names', async () => {
    expect((await check(p, { command: 'ls', env: { LANG: 'a\u0000b' } })).stage).toBe('env');
    expect((await check(p, { command: 'ls', env: { 'A-B': 'x' } })).stage).toBe('env');
  });
});

describe('stage 7: limits', () => {
  const deny = policy({
    executables: { allow: ['ls'] },
    limits: { defaultTimeoutMs: 10_000, maxTimeoutMs: 60_000, overMax: 'deny', inlineOutputBytes: 1234, maxArtifactBytes: 5678 },
  });
  const clamp = policy({ executables: { allow: ['ls'] }, limits: { defaultTimeoutMs: 10_000, maxTimeoutMs: 60_000, overMax: 'clamp' } });
  it('uses the default timeout when none is requested', async () => {
    expect((await check(deny, { command: 'ls' })).effective?.timeoutMs).toBe(10_000);
  });
  it('keeps a timeout within the maximum', async () => {
    expect((await check(deny, { command: 'ls', timeoutMs: 60_000 })).effective?.timeoutMs).toBe(60_000);
  });
  it('denies above the maximum when overMax = deny, with the reference message', async () => {
    const d = await check(deny, { command: 'ls', timeoutMs: 60_001 });
    expect(d).toMatchObject({ allowed: false, stage: 'limits', reason: 'Requested timeout (60001ms) exceeds maximum (60000ms)' });
  });
  it('clamps above the maximum when overMax = clamp, and says so', async () => {
    const d = await check(clamp, { command: 'ls', timeoutMs: 200_000 });
    expect(d.allowed).toBe(true);
    expect(d.effective?.timeoutMs).toBe(60_000);
    expect(d.notes).toContain('timeout 200000ms clamped to the maximum 60000ms');
  });
  it('denies a non-positive or fractional timeout', async () => {
    expect((await check(clamp, { command: 'ls', timeoutMs: 0 })).stage).toBe('limits');
    expect((await check(clamp, { command: 'ls', timeoutMs: 1.5 })).stage).toBe('limits');
    expect((await check(clamp, { command: 'ls', timeoutMs: Number.NaN })).stage).toBe('limits');
  });
  it('puts the output caps into effective', async () => {
    expect((await check(deny, { command: 'ls' })).effective).toMatchObject({ inlineBytes: 1234, artifactBytes: 5678 });
  });
});

describe('order and shape', () => {
  it('reports the first failing stage in the reference order', async () => {
    const d = await check(tools, { command: 'curl', cwd: '..', env: { LD_PRELOAD: 'x' }, timeoutMs: 10_000_000 });
    expect(d.stage).toBe('executable');
    const d2 = await check(tools, { command: 'ls', cwd: '..', env: { LD_PRELOAD: 'x' }, timeoutMs: 10_000_000 });
    expect(d2.stage).toBe('cwd');
    const d3 = await check(tools, { command: 'ls', env: { LD_PRELOAD: 'x' }, timeoutMs: 10_000_000 });
    expect(d3.stage).toBe('env');
  });
  it('an allowed decision has stage "allowed" and the effective job', async () => {
    const d = await decide(tools, request({ command: 'git', args: ['status'] }));
    expect(d).toMatchObject({ allowed: true, stage: 'allowed', notes: [], effective: { cwd: '', env: {}, timeoutMs: 30_000 } });
  });
  it('fails closed if the engine itself breaks', async () => {
    const broken = { ...tools, env: null } as unknown as typeof tools;
    const d = await check(broken, { command: 'ls', env: { A: 'b' } });
    expect(d.allowed).toBe(false);
    expect(d.stage).toBe('env');
    expect(d.reason).toMatch(/fails closed/);
  });
});
