/**
 * The agent leaves a stream's upload out only when the exit's inline text is every byte of it
 * (executor/jobs/whole-inline.ts): the edge then keeps the artifact in the exit, so a wrong "whole"
 * would lose output. Invalid UTF-8 that decodes to replacement characters of the same byte length
 * is the case the byte count alone cannot see.
 */
import { describe, expect, it } from 'vitest';
import { inlineHoldsWhole } from '../../../executor/jobs/whole-inline.ts';

const exit = (text: string, bytes: number, o: { truncated?: boolean; artifactTruncated?: boolean } = {}) => ({
  stdout: text,
  stderr: '',
  stdoutTruncated: o.truncated ?? false,
  stderrTruncated: false,
  streams: { stdout: { bytes, artifactTruncated: o.artifactTruncated ?? false }, stderr: { bytes: 0, artifactTruncated: false } },
});
const enc = new TextEncoder();

describe('whether the exit holds a stream whole', () => {
  it('is whole for text that decoded cleanly to every byte', () => {
    const b = enc.encode('héllo\n');
    expect(inlineHoldsWhole(exit('héllo\n', b.byteLength), 'stdout', b)).toBe(true);
  });

  it('is not whole when invalid bytes became replacement characters of the same length, or anything was cut', () => {
    // F0 90 80: a 4-byte sequence missing its last byte — three bytes that decode to one U+FFFD (three bytes too).
    const bad = new Uint8Array([0xf0, 0x90, 0x80]);
    const text = new TextDecoder().decode(bad);
    expect(enc.encode(text).byteLength).toBe(3);
    expect(inlineHoldsWhole(exit(text, 3), 'stdout', bad)).toBe(false);
    const b = enc.encode('abc');
    expect(inlineHoldsWhole(exit('abc', 3, { truncated: true }), 'stdout', b)).toBe(false);
    expect(inlineHoldsWhole(exit('abc', 3, { artifactTruncated: true }), 'stdout', b)).toBe(false);
    expect(inlineHoldsWhole(exit('abc', 4), 'stdout', enc.encode('abcd'))).toBe(false);
    expect(inlineHoldsWhole(exit('', 0), 'stdout', new Uint8Array())).toBe(false);
  });
});
