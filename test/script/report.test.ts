/**
 * The host's check of an isolate's report. The runner caps console and return value inside the
 * isolate, with built-ins the script can replace, so the host applies the caps again and never
 * trusts the report's shape or its JSON.
 */
import { describe, expect, it } from 'vitest';
import { acceptReport, sanitizeError, TRUNCATED_LINE } from '../../src/script/report.ts';
import { CONSOLE_MAX_BYTES, ERROR_MAX_BYTES, RETURN_MAX_BYTES } from '../../src/script/limits.ts';

const report = (o: Record<string, unknown>) => ({ console: '', consoleTruncated: false, resultJson: null, error: null, ticks: 0, ...o });

describe('acceptReport', () => {
  it('passes an honest report through, the result parsed', () => {
    expect(acceptReport(report({ console: 'a\n[warn] b', resultJson: '{"n":1}' }))).toEqual({
      console: 'a\n[warn] b',
      consoleTruncated: false,
      result: { n: 1 },
      error: null,
    });
    expect(acceptReport(report({}))).toEqual({ console: '', consoleTruncated: false, error: null });
  });

  it('turns a malformed report into an error, never a throw', () => {
    for (const bad of [null, 'text', {}, report({ console: 42 }), report({ resultJson: { x: 1 } }), report({ consoleTruncated: 'no' })]) {
      expect(acceptReport(bad).error).toBe("the script's isolate returned a malformed report");
    }
  });

  it('refuses a return value that is not JSON or is over the cap, whatever the runner said', () => {
    expect(acceptReport(report({ resultJson: '{not json' })).error).toMatch(/^Return value could not be read back as JSON/);
    const big = JSON.stringify('r'.repeat(RETURN_MAX_BYTES));
    const r = acceptReport(report({ resultJson: big }));
    expect(r.error).toBe('Return value exceeds limit (10485760 bytes)');
    expect(r.result).toBeUndefined();
  });

  it('cuts a console over 10 MB at a line boundary and ends it with one [output truncated]', () => {
    const line = 'c'.repeat(1023);
    const text = Array.from({ length: 11 * 1024 }, () => line).join('\n');
    const r = acceptReport(report({ console: text, resultJson: '"done"' }));
    expect(r.consoleTruncated).toBe(true);
    expect(r.result).toBe('done');
    expect(new TextEncoder().encode(r.console).byteLength).toBeLessThanOrEqual(CONSOLE_MAX_BYTES);
    const lines = r.console.split('\n');
    expect(lines.at(-1)).toBe(TRUNCATED_LINE);
    expect(lines.slice(0, -1).every((l) => l === line)).toBe(true);
    expect(lines.length).toBeGreaterThan(10 * 1024 - 10);
  });

  it('keeps an error without host paths or stack frames, at most 16 KiB', () => {
    expect(sanitizeError('boom at /work/main/src/script/run.ts:12:3\n    at f (file:///srv/x.js:1:2)')).toBe('boom at <path>');
    const long = acceptReport(report({ error: 'e'.repeat(100_000) })).error!;
    expect(new TextEncoder().encode(long).byteLength).toBeLessThanOrEqual(ERROR_MAX_BYTES + 64);
    expect(long).toMatch(/… \[error message truncated\]$/);
  });
});
