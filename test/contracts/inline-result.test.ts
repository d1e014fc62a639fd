/** Inline result semantics (reference 001), the one definition the agent and the edge share, without any process. */
import { describe, expect, it } from 'vitest';
import { inlineResult } from '../../src/contracts/inline-result.ts';

const bytes = (x: string | number[]) => (typeof x === 'string' ? new TextEncoder().encode(x) : new Uint8Array(x));
const s = (x: string | number[]) => {
  const head = bytes(x);
  return { head, total: head.length };
};
const utf8Length = (t: string) => new TextEncoder().encode(t).length;

describe('inline result', () => {
  it('keeps both streams whole when they fit', () => {
    expect(inlineResult(s('out'), s('err'), 10)).toEqual({ stdout: 'out', stderr: 'err', stdoutTruncated: false, stderrTruncated: false });
  });

  it('caps stdout at the limit, then cuts stderr to what is left, flagging both', () => {
    expect(inlineResult(s('0123456789AB'), s('err'), 10)).toEqual({ stdout: '0123456789', stderr: '', stdoutTruncated: true, stderrTruncated: true });
    expect(inlineResult(s('abc'), s('defghijklm'), 10)).toEqual({ stdout: 'abc', stderr: 'defghij', stdoutTruncated: false, stderrTruncated: true });
  });

  it('counts what the stream produced, not only what was kept', () => {
    expect(inlineResult({ head: bytes('abc'), total: 1000 }, s(''), 10).stdoutTruncated).toBe(true);
  });

  it('flags a stream whose head is shorter than it needs (an edge that kept fewer live bytes) and keeps what there is', () => {
    const r = inlineResult({ head: bytes('abcd'), total: 8 }, { head: bytes('x'), total: 3 }, 100);
    expect(r).toEqual({ stdout: 'abcd', stderr: 'x', stdoutTruncated: true, stderrTruncated: true });
    // A head cut inside a character keeps the whole characters only.
    expect(inlineResult({ head: bytes('aé').subarray(0, 2), total: 3 }, s(''), 100)).toMatchObject({ stdout: 'a', stdoutTruncated: true });
  });

  it('never splits a character, and replacement characters never push past the budget', () => {
    expect(inlineResult(s('ééé'), s(''), 3)).toMatchObject({ stdout: 'é', stdoutTruncated: true });
    const r = inlineResult(s([0xff, 0xfe, 0xfd, 0xfc]), s(''), 4);
    expect(utf8Length(r.stdout)).toBeLessThanOrEqual(4);
    expect(r.stdout).toBe('\ufffd');
    expect(r.stdoutTruncated).toBe(true);
    // stderr's budget is what stdout's text took, replacement characters included.
    const both = inlineResult(s([0xff, 0x61]), s('bcdef'), 6);
    expect(both).toEqual({ stdout: '\ufffda', stderr: 'bc', stdoutTruncated: false, stderrTruncated: true });
  });

  it('keeps NUL bytes and binary data decodable', () => {
    const r = inlineResult(s([0xff, 0x00, 0x6f, 0x6b]), s(''), 100);
    expect(r.stdout).toBe('\ufffd\u0000ok');
  });

  it('gives the same result from a Buffer (the agent) and from a plain Uint8Array (the edge)', () => {
    const data = [0x00, 0xe2, 0x82, 0xac, 0xff, 0x0a, 0x41];
    expect(inlineResult({ head: Buffer.from(data), total: 7 }, s(''), 5)).toEqual(inlineResult(s(data), s(''), 5));
  });
});
