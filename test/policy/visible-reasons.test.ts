/**
 * A policy decision quotes what the caller sent (a cwd, an executable, an argument, a shell
 * string): its reason and notes show every control and bidi character as a visible escape
 * (src/contracts/visible-text.ts), so a refusal cannot reorder or hide its own words.
 */
import { describe, expect, it } from 'vitest';
import { check, policy } from './helpers.ts';

/** Any C0/C1 control, DEL or bidi control left raw. */
const RAW = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

const tools = policy({ executables: { allow: ['ls', 'git'] } });

describe('a decision shows the text it quotes visibly', () => {
  it('refuses an absolute cwd with U+202E, quoting it as \\u202e', async () => {
    const d = await check(tools, { command: 'ls', cwd: '/etc\u202egnp.exe' });
    expect(d).toMatchObject({ allowed: false, stage: 'cwd' });
    expect(d.reason).toBe('Relative CWD "/etc\\u202egnp.exe" contains path traversal or absolute path components');
    expect(RAW.test(d.reason)).toBe(false);
  });

  it('refuses a cwd with ESC and the isolates, every one escaped', async () => {
    const d = await check(tools, { command: 'ls', cwd: '../\x1b[8m\u2066\u2067\u2068\u2069\u061c\u200e\u200f\u202a\u202b\u202c\u202d' });
    expect(d.reason).toContain('"../\\x1b[8m\\u2066\\u2067\\u2068\\u2069\\u061c\\u200e\\u200f\\u202a\\u202b\\u202c\\u202d"');
    expect(RAW.test(d.reason)).toBe(false);
  });

  it('refuses an executable not on the allowlist, quoting it escaped', async () => {
    const d = await check(tools, { command: 'curl\u202eexe' });
    expect(d).toMatchObject({ allowed: false, stage: 'executable' });
    expect(d.reason).toContain('"curl\\u202eexe"');
    expect(RAW.test(d.reason)).toBe(false);
  });

  it('escapes U+202E in the note that quotes a shell string decided as argv', async () => {
    const d = await check(policy({ executables: { allow: ['ls'] }, shell: { enabled: true } }), { mode: 'shell', command: 'ls \u202ex' });
    expect(d.notes.join('\n')).toContain('\\u202ex');
    expect(d.notes.some((n) => RAW.test(n))).toBe(false);
  });
});
