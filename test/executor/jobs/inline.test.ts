/** Inline result semantics (reference 001), without any process. */
import { describe, expect, it } from 'vitest';
import { inlineResult } from '../../../executor/jobs/inline.ts';

const s = (x: string | Buffer) => {
  const head = Buffer.isBuffer(x) ? x : Buffer.from(x);
  return { head, total: head.length };
};

describe('inline result', () => {
  it('keeps both streams whole when they fit', () => {
    expect(inlineResult(s('out'), s('err'), 10)).toEqual({ stdout: 'out', stderr: 'err', stdoutTruncated: false, stderrTruncated: false });
  });

  it('caps stdout at the limit, then cuts stderr to what is left, flagging both', () => {
    expect(inlineResult(s('0123456789AB'), s('err'), 10)).toEqual({ stdout: '0123456789', stderr: '', stdoutTruncated: true, stderrTruncated: true });
    expect(inlineResult(s('abc'), s('defghijklm'), 10)).toEqual({ stdout: 'abc', stderr: 'defghij', stdoutTruncated: false, stderrTruncated: true });
  });

  it('counts what the stream produced, not only what was kept', () => {
    expect(inlineResult({ head: Buffer.from('abc'), total: 1000 }, s(''), 10).stdoutTruncated).toBe(true);
  });

  it('never splits a character, and replacement characters never push past the budget', () => {
    expect(inlineResult(s('ééé'), s(''), 3)).toMatchObject({ stdout: 'é', stdoutTruncated: true });
    const r = inlineResult(s(Buffer.from([0xff, 0xfe, 0xfd, 0xfc])), s(''), 4);
    expect(Buffer.byteLength(r.stdout)).toBeLessThanOrEqual(4);
    expect(r.stdout).toBe('\ufffd');
    expect(r.stdoutTruncated).toBe(true);
  });

  it('keeps NUL bytes and binary data decodable', () => {
    const r = inlineResult(s(Buffer.from([0xff, 0x00, 0x6f, 0x6b])), s(''), 100);
    expect(r.stdout).toBe('\ufffd\u0000ok');
  });
});
