import { describe, expect, it } from 'vitest';
import { searchStream, searchText, type SearchOptions } from '../../src/search/line-search.ts';
import { asciiNeedles, countNewlines, countNewlinesByWord, foldCaseLoosely } from '../../src/search/byte-line-scan.ts';
import { LINE_CAP } from '../../src/contracts/tools.ts';
import { opts, streamOf } from '../support/search-input.ts';

const enc = new TextEncoder();

/** The byte path, in batches of `batch` bytes, against the decode-everything path on the same bytes. */
async function agree(bytes: Uint8Array, o: SearchOptions, batch: number, chunks: number[] = [7, 1, 64]) {
  const viaBytes = await searchStream(streamOf(bytes, chunks), o, batch);
  const viaText = searchText(new TextDecoder().decode(bytes), o);
  expect({ ...viaBytes, totalBytes: 0 }, JSON.stringify({ text: new TextDecoder().decode(bytes), o, batch })).toEqual({ ...viaText, totalBytes: 0 });
  expect(viaBytes.totalBytes).toBe(bytes.length);
  return viaBytes;
}

describe('byte-level search: same answers as decoding everything', () => {
  it('finds a term that spans two batches', async () => {
    const text = 'a\n'.repeat(20) + 'xx ERROR here\n' + 'b\n'.repeat(20);
    const at = text.indexOf('ERROR');
    for (let batch = at - 2; batch <= at + 6; batch++) {
      const r = await agree(enc.encode(text), opts({ terms: ['error'] }), batch, [batch]);
      expect(r.matchCount).toBe(1);
      expect(r.excerpts[0].lineStart).toBe(18);
    }
  });

  it('keeps a multi-byte character split across batches intact in the excerpt', async () => {
    const text = 'zz\n'.repeat(10) + 'héllo → wörld 🚀 hit\n' + 'ünïcode\n'.repeat(5);
    for (let batch = 28; batch <= 60; batch++) {
      const r = await agree(enc.encode(text), opts({ terms: ['hit'], contextLines: 1 }), batch, [3]);
      expect(r.excerpts[0].content).toBe('zz\nhéllo → wörld 🚀 hit\nünïcode');
    }
  });

  it('treats CRLF as a line break and does not show the \\r', async () => {
    const text = 'one\r\ntwo\r\nFound it\r\nfour\r\n';
    for (let batch = 1; batch <= text.length; batch++) {
      const r = await agree(enc.encode(text), opts({ terms: ['found'], contextLines: 1 }), batch, [batch]);
      expect(r.excerpts[0].content).toBe('two\nFound it\nfour');
    }
  });

  it('matches in a last line without a newline', async () => {
    const text = 'a\n'.repeat(1000) + 'the END';
    const r = await agree(enc.encode(text), opts({ terms: ['end'], contextLines: 2 }), 100);
    expect(r.totalLines).toBe(1001);
    expect(r.excerpts).toEqual([{ lineStart: 999, lineEnd: 1001, content: 'a\na\nthe END', source: 'stdout' }]);
  });

  it('matches ASCII terms in any case, and the non-ASCII letters that lowercase to them (İ, Kelvin sign)', async () => {
    // 'İ' lowercases to 'i' + U+0307, so 'xİ' holds 'xi'; the Kelvin sign lowercases to 'k'.
    const text = 'plain\nERROR one\nXİ two\n\u212Aelvin three\nnothing\n';
    const r = await agree(enc.encode(text), opts({ terms: ['error', 'xi', 'kel'], contextLines: 0 }), 8);
    expect(r.matchCount).toBe(3);
    expect(r.excerpts.map((e) => [e.lineStart, e.lineEnd])).toEqual([[2, 4]]);
  });

  it('drops only a leading BOM, and keeps searching past invalid UTF-8', async () => {
    const bytes = new Uint8Array([
      0xef,
      0xbb,
      0xbf,
      ...enc.encode('hit first\n'),
      0xe2,
      0x84,
      0x0a,
      ...enc.encode('\ufeffhit\n'),
      0xff,
      ...enc.encode('HIT\n'),
    ]);
    for (let batch = 1; batch <= bytes.length; batch++) {
      const r = await agree(bytes, opts({ terms: ['hit'], contextLines: 0 }), batch, [batch]);
      expect(r.matchCount).toBe(3);
      expect(r.excerpts[0].content).toBe('hit first');
    }
  });

  it('honours limits, offsets of context and capped long lines across batches', async () => {
    const long = 'y'.repeat(LINE_CAP * 3) + ' needle';
    const lines = Array.from({ length: 400 }, (_, i) => (i % 37 === 5 ? `line ${i} Needle` : i === 200 ? long : `line ${i}`));
    const bytes = enc.encode(lines.join('\n') + '\n');
    for (const batch of [16, 333, 4096]) {
      for (const [maxExcerpts, contextLines] of [
        [1, 0],
        [3, 2],
        [50, 10],
      ]) {
        await agree(bytes, opts({ terms: ['needle'], maxExcerpts, contextLines }), batch);
      }
    }
  });

  it('agrees for random inputs, batchings and terms', async () => {
    const alphabet = ['a', 'B', 'e', 'r', 'o', 'R', ' ', '\n', '\n', '\r\n', 'é', '🚀', 'İ', '\u212A', 'k', 'i', '\ufeff'];
    let seed = 7;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
    for (let round = 0; round < 300; round++) {
      let text = '';
      const len = rnd(300);
      for (let i = 0; i < len; i++) text += alphabet[rnd(alphabet.length)];
      const terms = [['err'], ['ro', 'k'], ['i'], ['e r'], ['aB', 'Rr']][rnd(5)];
      await agree(enc.encode(text), opts({ terms, maxExcerpts: 1 + rnd(4), contextLines: rnd(4) }), 1 + rnd(40), [1 + rnd(20)]);
    }
  });
});

describe('byte-level helpers', () => {
  it('applies only when every lowercased term is ASCII', () => {
    expect(asciiNeedles(['Error', 'x'])?.length).toBe(2);
    // 'kill', plus the byte forms of the Kelvin sign and 'İ' as candidates.
    expect(asciiNeedles(['Kill'])?.length).toBe(3);
    expect(asciiNeedles(['wörld'])).toBeNull();
  });

  it('folds A–Z onto a–z and no byte onto another letter, at every alignment', () => {
    const all = Uint8Array.from({ length: 256 * 3 + 5 }, (_, i) => i % 256);
    const isLetter = (c: number) => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
    for (let from = 0; from < 9; from++) {
      const src = all.slice(from);
      const dst = new Uint8Array(src.length + 16).subarray(from % 3);
      foldCaseLoosely(src, dst);
      src.forEach((c, i) => {
        // Letters fold to lowercase; every other byte lands on a byte that is no letter, so a term's letters match only letters.
        if (isLetter(c)) expect(dst[i]).toBe(c | 0x20);
        else expect(isLetter(dst[i])).toBe(false);
        expect(dst[i]).toBe(c | 0x20);
      });
    }
  });

  it('counts exactly the newline bytes, at every alignment, in short lines and long ones', () => {
    const all = Uint8Array.from({ length: 256 * 3 + 5 }, (_, i) => i % 256);
    const short = new TextEncoder().encode(Array.from({ length: 3000 }, (_, i) => String(i)).join('\n'));
    for (const bytes of [all, short]) {
      for (let from = 0; from < 9; from++) {
        for (const to of [from, from + 1, bytes.length - 3, bytes.length]) {
          const want = [...bytes.subarray(from, to)].filter((c) => c === 10).length;
          expect(countNewlines(bytes, from, to)).toBe(want);
          // An unaligned view: the word loop starts at the first aligned byte.
          const odd = bytes.subarray(1);
          const end = Math.min(to, odd.length);
          expect(countNewlinesByWord(odd, from, end)).toBe([...odd.subarray(from, Math.max(from, end))].filter((c) => c === 10).length);
        }
      }
    }
  });
});
