/** The search index's encoding: blocks tile the body on line ends, edge offsets, filters, and the checks a decoder makes. */
import { describe, expect, it } from 'vitest';
import {
  BadIndex,
  BlockIndexBuilder,
  decodeBlockIndex,
  lineBoundary,
  mayMatch,
  SEARCH_INDEX_CONTEXT_MAX,
  termProbes,
  type BlockIndex,
} from '../../src/search/block-index.ts';
import { searchText } from '../../src/search/line-search.ts';

const enc = new TextEncoder();

function build(body: Uint8Array, blockBytes: number, chunk = body.length || 1): Uint8Array {
  const b = new BlockIndexBuilder(blockBytes);
  for (let i = 0; i < body.length; i += chunk) b.push(body.subarray(i, i + chunk));
  return b.finish();
}

const indexOf = (text: string, blockBytes: number): { body: Uint8Array; ix: BlockIndex } => {
  const body = enc.encode(text);
  return { body, ix: decodeBlockIndex(build(body, blockBytes), body.length) };
};

/** Byte offset where each 0-based line starts, and the body's size as the start of "line totalLines". */
function lineStarts(body: Uint8Array): number[] {
  const out = [0];
  for (let i = 0; i < body.length; i++) if (body[i] === 0x0a && i + 1 < body.length) out.push(i + 1);
  out.push(body.length);
  return out;
}

describe('BlockIndexBuilder', () => {
  it('cuts blocks at the first line end past the block size, counts lines as the line search does', () => {
    const text = Array.from({ length: 50 }, (_, i) => `line ${i} ${'x'.repeat(i % 7)}`).join('\n') + '\nno newline at the end';
    const { body, ix } = indexOf(text, 40);
    expect(ix.totalBytes).toBe(body.length);
    expect(ix.totalLines).toBe(searchText(text, { terms: ['zzz'], maxExcerpts: 1, contextLines: 0, source: 'stdout' }).totalLines);
    let start = 0;
    let line = 0;
    for (const [i, b] of ix.blocks.entries()) {
      expect(b.start).toBe(start);
      expect(b.startLine).toBe(line);
      const last = i === ix.blocks.length - 1;
      if (!last) {
        expect(body[b.start + b.bytes - 1]).toBe(0x0a);
        // It ends at the first line end at or after 40 bytes, not later.
        expect(b.bytes).toBeGreaterThanOrEqual(40);
        expect(body.subarray(b.start + 39, b.start + b.bytes - 1).includes(0x0a)).toBe(false);
      }
      start += b.bytes;
      line += b.lines;
    }
    expect(start).toBe(body.length);
  });

  it('records the offsets of the lines at each edge of a block, as many as context lines need', () => {
    const text = Array.from({ length: 400 }, (_, i) => `${i}:${'y'.repeat((i * 13) % 50)}`).join('\n') + '\n';
    const { body, ix } = indexOf(text, 1500);
    const starts = lineStarts(body);
    for (const b of ix.blocks) {
      expect(b.firstEnds).toEqual(starts.slice(b.startLine + 1, b.startLine + 1 + Math.min(b.lines, 2 * SEARCH_INDEX_CONTEXT_MAX + 2)));
      expect(b.lastStarts).toEqual(starts.slice(b.startLine + b.lines - Math.min(b.lines, SEARCH_INDEX_CONTEXT_MAX), b.startLine + b.lines));
    }
    // Every line a search asks about (C ≤ 10 before a block, 2C+2 after it) has its boundary.
    for (const b of ix.blocks) {
      for (let k = -SEARCH_INDEX_CONTEXT_MAX; k <= 0; k++) expect(lineBoundary(ix, b.startLine + k)).toBe(starts[Math.max(0, b.startLine + k)]);
      for (let k = 0; k <= 2 * SEARCH_INDEX_CONTEXT_MAX + 2; k++) {
        const l = Math.min(ix.totalLines, b.startLine + b.lines + k);
        expect(lineBoundary(ix, l)).toBe(starts[l]);
      }
    }
  });

  it('gives the same index whatever the chunks it is fed in (a character or a line split anywhere)', () => {
    const text = 'Kelvin \u212A and İstanbul\r\n'.repeat(30) + 'é€😀 tail';
    const body = enc.encode(text);
    const whole = build(body, 64);
    for (const chunk of [1, 2, 3, 7, 64, 1000]) expect(build(body, 64, chunk)).toEqual(whole);
  });

  it('makes one long block of a line longer than the block size', () => {
    const { ix } = indexOf('short\n' + 'z'.repeat(5000) + '\nshort\n', 100);
    expect(ix.blocks.map((b) => b.lines)).toEqual([2, 1]);
    expect(ix.blocks[0].bytes).toBe(5007);
  });

  it('indexes an empty body as no blocks', () => {
    const ix = decodeBlockIndex(build(new Uint8Array(0), 64), 0);
    expect(ix).toMatchObject({ totalBytes: 0, totalLines: 0, blocks: [] });
  });
});

describe('the trigram filter', () => {
  const { ix } = indexOf('The Build FAILED at step three\nall good here\n', 1 << 20);
  const block = ix.blocks[0];

  it('holds every term of a line whatever its case', () => {
    for (const t of ['failed', 'FAILED', 'build fai', 'the', 'good here', 'step three']) expect(mayMatch(block, termProbes([t])!)).toBe(true);
  });

  it('rules out a term whose trigrams are not there, and a term across a line break', () => {
    expect(mayMatch(block, termProbes(['qqxzj'])!)).toBe(false);
    expect(mayMatch(block, termProbes(['threeall'])!)).toBe(false);
  });

  it("holds 'k' for the Kelvin sign and 'i' for 'İ', whose lowercase forms hold those letters", () => {
    const { ix: k } = indexOf('\u212Aelvin and İİİ\n', 1 << 20);
    expect('\u212Aelvin'.toLowerCase()).toBe('kelvin');
    expect(mayMatch(k.blocks[0], termProbes(['KELVIN'])!)).toBe(true);
    expect(mayMatch(k.blocks[0], termProbes(['d i'])!)).toBe(true);
  });

  it('cannot narrow a term shorter than 3 characters or one that is not ASCII', () => {
    expect(termProbes(['ab'])).toBeNull();
    expect(termProbes(['fine', 'ab'])).toBeNull();
    expect(termProbes(['éclair'])).toBeNull();
    expect(termProbes(['Fine'])).toEqual([{ trigrams: [0x66696e, 0x696e65], digits: [] }]);
  });

  it('leaves out the filter of a block with too many trigrams to rule anything out', () => {
    let x = 1;
    const noise = Array.from({ length: 200_000 }, () => String.fromCharCode(33 + (((x = (Math.imul(x, 1103515245) + 12345) >>> 0) >>> 16) % 90))).join('');
    const { ix: n } = indexOf(noise + '\n', 1 << 20);
    expect(n.blocks[0].filter).toBeNull();
    expect(mayMatch(n.blocks[0], termProbes(['anything'])!)).toBe(true);
  });
});

describe('decodeBlockIndex', () => {
  const body = enc.encode('alpha\nbeta\ngamma\n'.repeat(20));
  const good = build(body, 32);

  const expectBad = (b: Uint8Array, size: number, msg: RegExp) => {
    expect(() => decodeBlockIndex(b, size)).toThrow(BadIndex);
    expect(() => decodeBlockIndex(b, size)).toThrow(msg);
  };

  it('refuses what is not an index, an unknown version, and an index of another size of body', () => {
    expectBad(enc.encode('hello world'), body.length, /not a search index/);
    const v3 = good.slice();
    v3[4] = 3;
    expectBad(v3, body.length, /version 3/);
    expectBad(good, body.length + 1, /describes \d+ bytes, the body has/);
  });

  it('refuses an index cut short or with bytes after its end', () => {
    expectBad(good.subarray(0, good.length - 3), body.length, /ends early|do not add up|wrong number|out of/);
    const longer = new Uint8Array(good.length + 1);
    longer.set(good);
    expectBad(longer, body.length, /after the end/);
  });

  it('refuses an index whose line offsets leave their block or go backwards', () => {
    // Hand-made: one block of 6 bytes and 2 lines whose second line "ends" before the first.
    // magic, version 1 (no digit ranges), 6 bytes, 2 lines, 1 block, context 10; block: 6 bytes, 2 lines, 2 line ends at 3 and 3+0.
    const bytes = [0x47, 0x48, 0x53, 0x49, 1, 6, 2, 1, 10, 6, 2, 2, 3, 0];
    expectBad(Uint8Array.from(bytes), 6, /out of order|outside/);
  });

  it('refuses digit ranges past their length or of unknown lengths', () => {
    // Hand-made version 2: one block of 3 bytes "42\n", 1 line; line ends [3], line starts [0], no filter, then digit ranges.
    const head = [0x47, 0x48, 0x53, 0x49, 2, 3, 1, 1, 10, 3, 1, 1, 3, 1, 0, 0];
    expect(decodeBlockIndex(Uint8Array.from([...head, 0b10, 42, 0]), 3).blocks[0].digits).toMatchObject({ long: false });
    expectBad(Uint8Array.from([...head, 0b10, 99, 1]), 3, /reaches past 2 digits/);
    expectBad(Uint8Array.from([...head, 0x80, 0x80, 0x04]), 3, /unknown lengths/);
  });

  it('accepts what the builder writes', () => {
    const ix = decodeBlockIndex(good, body.length);
    expect(ix.totalLines).toBe(60);
    expect(ix.blocks.length).toBeGreaterThan(5);
  });
});
