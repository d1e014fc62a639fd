import { describe, expect, it } from 'vitest';
import { check, policy } from './helpers.ts';

const shellOn = policy({
  executables: { allow: ['ls'] },
  runtime: { enabled: true, allowedRuntimes: ['shell', 'python'] },
  shell: { enabled: true, allow: ['ls', 'ls -la', 'ls -la | wc -l', '/git (status|log --oneline)/', '/echo [a-z]+/'] },
});

describe('shell strings are decided on the whole string', () => {
  it('denies every shell string while shell.enabled = false, saying how to proceed', async () => {
    const d = await check(policy({ executables: { allow: ['ls'] } }), { mode: 'shell', command: 'ls *' });
    expect(d).toMatchObject({
      allowed: false,
      stage: 'shell',
      reason: 'Shell strings are disabled by policy (shell.enabled = false); pass "args" to run an executable directly',
    });
  });
  it('allows an exact entry', async () => {
    const d = await check(shellOn, { mode: 'shell', command: 'ls -la | wc -l' });
    expect(d.allowed).toBe(true);
    expect(d.notes.join()).toContain('shell.allow');
  });
  it('never allows by the first word: `ls; rm -rf /` is denied when `ls` is allowed', async () => {
    for (const command of ['ls; rm -rf /', 'ls && id', 'ls | sh', 'ls\nid', 'ls $(id)', 'ls `id`', 'ls > /etc/x', 'ls *']) {
      const d = await check(shellOn, { mode: 'shell', command });
      expect(d.allowed, command).toBe(false);
      expect(d.stage).toBe('shell');
    }
  });
  it('anchors /regex/ entries at both ends', async () => {
    expect((await check(shellOn, { mode: 'shell', command: 'git status' })).allowed).toBe(true);
    expect((await check(shellOn, { mode: 'shell', command: 'git log --oneline' })).allowed).toBe(true);
    expect((await check(shellOn, { mode: 'shell', command: 'git status; id' })).allowed).toBe(false);
    expect((await check(shellOn, { mode: 'shell', command: 'x; git status' })).allowed).toBe(false);
    expect((await check(shellOn, { mode: 'shell', command: 'echo hello' })).allowed).toBe(true);
    expect((await check(shellOn, { mode: 'shell', command: 'echo hello\nid' })).allowed).toBe(false);
    expect((await check(shellOn, { mode: 'shell', command: 'echo hello\n' })).allowed).toBe(false);
  });
  it('explains an unlisted string', async () => {
    const d = await check(shellOn, { mode: 'shell', command: 'cat /etc/passwd' });
    expect(d.reason).toContain('does not match any entry of shell.allow');
  });
  it('decides runtime `shell` code as a shell string', async () => {
    const ok = await check(shellOn, { tool: 'runtime_execute', runtime: 'shell', mode: 'shell', command: 'ls', code: 'ls' });
    expect(ok.allowed).toBe(true);
    const bad = await check(shellOn, { tool: 'runtime_execute', runtime: 'shell', mode: 'shell', command: 'ls; id', code: 'ls; id' });
    expect(bad).toMatchObject({ allowed: false, stage: 'shell' });
    // The same if a caller sends it as code mode.
    const code = await check(shellOn, { tool: 'runtime_execute', runtime: 'shell', mode: 'code', command: 'bash', code: 'ls; id' });
    expect(code).toMatchObject({ allowed: false, stage: 'shell' });
    expect((await check(shellOn, { tool: 'runtime_execute', runtime: 'shell', mode: 'code', command: 'bash', code: 'ls' })).allowed).toBe(true);
  });
  it('still needs the runtime `shell` in the allowlist for runtime shell code', async () => {
    const p = policy({ runtime: { enabled: true, allowedRuntimes: ['python'] }, shell: { enabled: true, allow: ['ls'] } });
    const d = await check(p, { tool: 'runtime_execute', runtime: 'shell', mode: 'shell', command: 'ls', code: 'ls' });
    expect(d.stage).toBe('runtime_allowlist');
  });
  it('denies empty and NUL-carrying strings', async () => {
    expect((await check(shellOn, { mode: 'shell', command: '' })).stage).toBe('shell');
    expect((await check(shellOn, { mode: 'shell', command: 'ls\u0000' })).stage).toBe('shell');
  });
  it('applies the later stages to an allowed shell string', async () => {
    expect((await check(shellOn, { mode: 'shell', command: 'ls', cwd: '../x' })).stage).toBe('cwd');
    expect((await check(shellOn, { mode: 'shell', command: 'ls', env: { LD_PRELOAD: 'x' } })).stage).toBe('env');
  });
  it('bash -c in argv mode is inline code, not a way around the shell switch', async () => {
    const p = policy({ executables: { allow: ['bash'] }, shell: { enabled: false, allow: [] } });
    expect((await check(p, { command: 'bash', args: ['-c', 'ls; id'] })).stage).toBe('arguments');
  });
});
