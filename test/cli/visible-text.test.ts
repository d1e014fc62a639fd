/**
 * The one rule for showing text from users (src/contracts/visible-text.ts) and the CLI renderers
 * built on it (cli/visible-text.ts, io.table, fields.text, audit rows): every control, bidi and
 * invisible character comes out as a visible escape, a row is one line, and the dashboard's client
 * (bundled into main.js for the browser) gives what the CLI gives.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { visible } from '../../src/contracts/visible-text.ts';
import { formatCommand, visibleJson } from '../../cli/visible-text.ts';
import { formatRow } from '../../cli/audit.ts';
import { table } from '../../cli/io.ts';
import { text, when } from '../../cli/fields.ts';
import { bundleClient } from '../../scripts/build-dashboard.ts';

/** What must never reach a terminal or a page raw (beyond the renderer's own line ends). */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/** One sample of each class of hostile text, and how it must read. */
const CLASSES: [string, string, string][] = [
  ['newline + ANSI cursor movement', 'ok\n\x1b[1A\x1b[2Kallowed', 'ok\\n\\x1b[1A\\x1b[2Kallowed'],
  ['carriage return over the line', 'rm -rf x\rls', 'rm -rf x\\rls'],
  ['ESC[8m conceal', 'echo safe \x1b[8m; rm -rf ./p', 'echo safe \\x1b[8m; rm -rf ./p'],
  ['C1 CSI 0x9b, NEL, DEL, NUL, tab', '\x9b2K\x85\x7f\x00\t', '\\x9b2K\\x85\\x7f\\x00\\t'],
  ['OSC 8 hyperlink and BEL', '\x1b]8;;http://evil\x07x\x1b]8;;\x07', '\\x1b]8;;http://evil\\x07x\\x1b]8;;\\x07'],
  ['U+202E right-to-left override', 'a\u202ecod.exe', 'a\\u202ecod.exe'],
  ['U+202A–U+202D embeddings and overrides', '\u202a\u202b\u202c\u202d', '\\u202a\\u202b\\u202c\\u202d'],
  ['U+2066–U+2069 isolates', '\u2066\u2067\u2068x\u2069', '\\u2066\\u2067\\u2068x\\u2069'],
  ['LRM, RLM, ALM', '\u200e\u200f\u061c', '\\u200e\\u200f\\u061c'],
  ['zero-width characters', 'r\u200bm\u200c\u200d\u2060\ufeff', 'r\\u200bm\\u200c\\u200d\\u2060\\ufeff'],
  ['U+2028 / U+2029 separators', 'one\u2028two\u2029three', 'one\\u2028two\\u2029three'],
  ['spaces other than U+0020', 'a\u00a0b\u3000c\u2009d', 'a\\xa0b\\u3000c\\u2009d'],
  ['soft hyphen, Hangul filler, variation selector', 'a\u00adb\u3164c\ufe0f', 'a\\xadb\\u3164c\\ufe0f'],
  ['invisible tag characters', 'x\u{e0041}\u{e0042}', 'x\\u{e0041}\\u{e0042}'],
  ['a lone surrogate', 'a\ud800b', 'a\\ud800b'],
];

describe('visible(): the rule for text from users', () => {
  it.each(CLASSES)('makes %s visible', (_, raw, shown) => {
    expect(visible(raw)).toBe(shown);
    expect(HIDDEN.test(visible(raw))).toBe(false);
  });

  it('leaves printable text of any script as it is, backslashes included', () => {
    for (const s of ['git status', 'café 中文 😀 עברית عربي', 'C:\\path\\n', 'ümlaut — dash', '👨‍👩‍👧'.replace(/\u200d/g, '')]) expect(visible(s)).toBe(s);
  });

  it('escapes every code point that is a control, format, separator or surrogate (all 1,114,112 of them)', () => {
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      const shown = visible(String.fromCodePoint(cp));
      if (HIDDEN.test(shown)) throw new Error(`U+${cp.toString(16)} is shown raw`);
    }
  });

  it('is idempotent: text shown once is shown again unchanged', () => {
    for (const [, raw] of CLASSES) {
      expect(visible(visible(raw))).toBe(visible(raw));
      expect(visible(visible(raw, true))).toBe(visible(raw, true));
    }
  });

  it('as a word: plain words bare, anything else one double-quoted token with \\ and " escaped', () => {
    expect(visible('status', true)).toBe('status');
    expect(visible('--max-count=1', true)).toBe('--max-count=1');
    expect(visible('', true)).toBe('""');
    expect(visible('a b', true)).toBe('"a b"');
    expect(visible('say "hi"\\n', true)).toBe('"say \\"hi\\"\\\\n"');
    // A real newline and a typed backslash-n read differently.
    expect(visible('a\nb', true)).toBe('"a\\nb"');
    expect(visible('a\\nb', true)).toBe('"a\\\\nb"');
    expect(visible('\u202ehs.live', true)).toBe('"\\u202ehs.live"');
  });
});

/** The code points the rule names one by one: C0, DEL, C1 and the bidi controls, with how each reads. */
const LISTED: number[] = [
  ...Array.from({ length: 0x20 }, (_, i) => i),
  0x7f,
  ...Array.from({ length: 0x20 }, (_, i) => 0x80 + i),
  0x061c,
  0x200e,
  0x200f,
  0x202a,
  0x202b,
  0x202c,
  0x202d,
  0x202e,
  0x2066,
  0x2067,
  0x2068,
  0x2069,
];
const escapeOf = (cp: number) =>
  ({ 9: '\\t', 10: '\\n', 13: '\\r' })[cp] ?? (cp < 0x100 ? `\\x${cp.toString(16).padStart(2, '0')}` : `\\u${cp.toString(16).padStart(4, '0')}`);

describe('every listed control and bidi code point', () => {
  it.each(LISTED.map((cp) => [`U+${cp.toString(16).padStart(4, '0').toUpperCase()}`, cp]))('%s is written as its escape, alone and inside text', (_, cp) => {
    const ch = String.fromCodePoint(cp);
    expect(visible(ch)).toBe(escapeOf(cp));
    expect(visible(`a${ch}b`)).toBe(`a${escapeOf(cp)}b`);
    expect(visible(`a${ch}b`, true)).toBe(`"a${escapeOf(cp)}b"`);
  });

  it.each(LISTED.map((cp) => [`U+${cp.toString(16).padStart(4, '0').toUpperCase()}`, cp]))(
    '%s with keepLines: only a line break and a tab stay raw',
    (_, cp) => {
      const ch = String.fromCodePoint(cp);
      const kept = cp === 0x0a || cp === 0x09;
      expect(visible(`a${ch}b`, false, true)).toBe(kept ? `a${ch}b` : `a${escapeOf(cp)}b`);
    },
  );

  it('keepLines: several lines stay several lines, each one shown like a single line', () => {
    const text = 'first\tcol\n\x1b[2Kforged \u202eevil\r\nlast\u2028x';
    expect(visible(text, false, true)).toBe('first\tcol\n\\x1b[2Kforged \\u202eevil\\r\nlast\\u2028x');
    expect(visible(visible(text, false, true), false, true)).toBe(visible(text, false, true));
    expect(visible(text)).toBe('first\\tcol\\n\\x1b[2Kforged \\u202eevil\\r\\nlast\\u2028x');
  });
});

describe('CLI renderers', () => {
  it('formatCommand: one token per argument, shell strings bare only when nothing needs escaping', () => {
    expect(formatCommand({ mode: 'argv', command: 'git', args: ['log', '--oneline'] })).toBe('git log --oneline');
    expect(formatCommand({ mode: 'argv', command: 'curl', args: ['ok', '\x9b1A\x9b2K', 'a b'] })).toBe('curl ok "\\x9b1A\\x9b2K" "a b"');
    expect(formatCommand({ mode: 'argv', command: 'my tool', args: [] })).toBe('"my tool"');
    expect(formatCommand({ mode: 'shell', command: 'echo hi; ls | wc -l', args: [] })).toBe('echo hi; ls | wc -l');
    expect(formatCommand({ mode: 'shell', command: 'echo safe-1 \x1b[8m; rm -rf ./precious-1' })).toBe('"echo safe-1 \\x1b[8m; rm -rf ./precious-1"');
    expect(formatCommand({ mode: 'shell', command: "printf 'a\\nb'" })).toBe('"printf \'a\\\\nb\'"');
    expect(formatCommand({ mode: 'code', command: 'node', args: ['x'], runtime: 'node\u202e' })).toBe('[node\\u202e] node x');
    expect(formatCommand({ approval_id: 'ap_1', request: 'x\u2028y' })).toBe('{"approval_id":"ap_1","request":"x\\u2028y"}');
    expect(formatCommand('raw\nstring')).toBe('raw\\nstring');
    expect(formatCommand(null)).toBe('');
  });

  it('formatRow: an audit row is one line whatever its fields hold', () => {
    const line = formatRow({
      id: 1,
      at: Date.UTC(2026, 0, 1),
      subject: 'mallory\u202e\x1b[8m',
      tool: 'execute',
      decision: 'denied',
      command: { mode: 'shell', command: `curl x | sh\n\x1b[1A\x1b[2K2026-01-01T00:00:00Z  allowed  execute  dev-admin  git status` },
      cwd: 'w\u2066',
      reason: 'shell: no\u2029shell',
      jobId: null,
      exitStatus: null,
      durationMs: 0,
    });
    expect(line.split('\n')).toHaveLength(1);
    expect(HIDDEN.test(line)).toBe(false);
    expect(line).toBe(
      '2026-01-01T00:00:00Z  denied   execute          mallory\\u202e\\x1b[8m  "curl x | sh\\n\\x1b[1A\\x1b[2K2026-01-01T00:00:00Z  allowed  execute  dev-admin  git status"  — shell: no\\u2029shell',
    );
  });

  it('visibleJson: the same JSON document, with hidden characters as \\u escapes', () => {
    const v = { a: 'x\u202e\x9b\u2028\x7f\u{e0041}', b: ['\x1b[8m', 'ok'], n: 1 };
    for (const indent of [undefined, 2]) {
      const s = visibleJson(v, indent);
      expect(HIDDEN.test(s.replace(/\n/g, ''))).toBe(false);
      expect(JSON.parse(s)).toEqual(v);
    }
    expect(visibleJson({ a: 'x\u202e' })).toBe('{"a":"x\\u202e"}');
    expect(visibleJson({ a: '\u{e0041}' })).toBe('{"a":"\\udb40\\udc41"}');
  });

  it('table, text and when show gateway fields visible, one row per line', () => {
    const t = table([
      ['ID', 'NOTE'],
      ['1', 'note\n\x1b[2Kforged'],
      ['2', '\u202eright'],
    ]);
    expect(t.split('\n')).toHaveLength(3);
    expect(t).toContain('note\\n\\x1b[2Kforged');
    expect(t).toContain('\\u202eright');
    expect(text('a\u2066b')).toBe('a\\u2066b');
    expect(text({ k: '\x9b' })).toBe('{"k":"\\x9b"}');
    expect(text(null)).toBe('-');
    expect(when('2026\u202e')).toBe('2026\\u202e');
  });
});

describe('the dashboard shows text with the same function', () => {
  it("the client's visible(), bundled for the browser as main.js is, gives what the CLI gives", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-core-js-'));
    try {
      writeFileSync(join(dir, 'core.mjs'), await bundleClient('format.ts'));
      const samples = [...CLASSES.map(([, raw]) => raw), 'plain', 'a b', 'say "hi"\\'];
      writeFileSync(
        join(dir, 'run.mjs'),
        `import { visible } from './core.mjs';\nconst s = JSON.parse(process.argv[2]);\nprocess.stdout.write(JSON.stringify(s.map((x) => [visible(x), visible(x, true)])));\n`,
      );
      const got = JSON.parse(execFileSync(process.execPath, [join(dir, 'run.mjs'), JSON.stringify(samples)], { encoding: 'utf8' }));
      expect(got).toEqual(samples.map((x) => [visible(x), visible(x, true)]));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
