/**
 * Numbers through the block index's digit ranges (src/search/block-index/digits.ts): the ranges never rule out a block
 * that holds a match (checked against brute force), and the narrowed search gives what a plain scan gives on numeric,
 * mixed and edge-case bodies — sequences, padded and long numbers, numbers at block edges, terms in any case — while
 * it does read less than the whole body. A version 1 index (no digit ranges) is still read.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BlockIndexBuilder, decodeBlockIndex, type BlockIndex } from '../../src/search/block-index.ts';
import { DIGITS_MAX, type DigitPlace, DigitRangeBuilder, digitProbes, digitsMayHold } from '../../src/search/block-index/digits.ts';
import { planRanges, searchIndexed } from '../../src/search/indexed-search.ts';
import { searchStream, type SearchOptions } from '../../src/search/line-search.ts';
import { rng, streamOf } from '../support/search-input.ts';

const enc = new TextEncoder();

const digitsOf = (r: () => number, n: number) => Array.from({ length: n }, () => String(Math.floor(r() * 10))).join('');

/** Does a run `run` of a line hold `probe` where `place` says (brute force, on strings)? */
function holds(run: string, probe: string, place: DigitPlace): boolean {
  if (place === 'whole') return run === probe;
  if (place === 'prefix') return run.startsWith(probe);
  if (place === 'suffix') return run.endsWith(probe);
  return run.includes(probe);
}

/**
 * A plain reference: the body's lines (split on '\n', a leading BOM dropped, invalid UTF-8 replaced), a line matching
 * when its lowercased text holds a lowercased term.
 */
function referenceMatches(body: Uint8Array, terms: string[]): number {
  const text = new TextDecoder('utf-8', { fatal: false, ignoreBOM: false }).decode(body);
  const lines = text.split('\n');
  if (text.endsWith('\n')) lines.pop();
  const ts = terms.map((t) => t.toLowerCase()).filter((t) => t.length > 0 && !t.includes('\n'));
  return lines.filter((l) => ts.some((t) => l.toLowerCase().includes(t))).length;
}

function indexOf(body: Uint8Array, blockBytes: number, chunk = body.length || 1): BlockIndex {
  const b = new BlockIndexBuilder(blockBytes);
  for (let i = 0; i < body.length; i += chunk) b.push(body.subarray(i, i + chunk));
  return decodeBlockIndex(b.finish(), body.length);
}

/** Searches both ways and checks they agree with each other and with the reference; returns the share of the body read. */
async function agree(body: Uint8Array, ix: BlockIndex, o: SearchOptions, label: unknown): Promise<number> {
  const full = await searchStream(streamOf(body, [4096, 977]), o);
  expect(full.matchCount, JSON.stringify(label)).toBe(referenceMatches(body, o.terms));
  // Every share of the body may be read, so the narrowed path runs for every query it can serve.
  const got = await searchIndexed(async (offset, length) => streamOf(body.subarray(offset, offset + length), [3000]), ix, o, 1);
  if (got.kind !== 'searched') {
    expect(got.kind, JSON.stringify(label)).toBe('unusable');
    return 1;
  }
  expect(got.result, JSON.stringify(label)).toEqual(full);
  return got.ranges.reduce((n, x) => n + x.toByte - x.fromByte, 0) / Math.max(1, body.length);
}

/** A random slice of a random line, of 3 to 20 characters, its letters in a random case: a term that matches. */
function sliceTerm(r: () => number, lines: string[]): string {
  const line = lines[Math.floor(r() * lines.length)];
  const len = Math.min(line.length, 3 + Math.floor(r() * 18));
  const from = Math.floor(r() * (line.length - len + 1));
  const t = line.slice(from, from + len);
  return r() < 0.5 ? t.toUpperCase() : t;
}

describe('digit ranges', () => {
  it("read a term's digit runs with what they must be of a line's run", () => {
    expect(digitProbes('4711')).toEqual([{ digits: 4, value: 4711, place: 'inside' }]);
    expect(digitProbes('id 0042 ok')).toEqual([{ digits: 4, value: 42, place: 'whole' }]);
    expect(digitProbes('id=42')).toEqual([{ digits: 2, value: 42, place: 'prefix' }]);
    expect(digitProbes('42ms')).toEqual([{ digits: 2, value: 42, place: 'suffix' }]);
    expect(digitProbes('7:05:3')).toEqual([
      { digits: 1, value: 7, place: 'suffix' },
      { digits: 2, value: 5, place: 'whole' },
      { digits: 1, value: 3, place: 'prefix' },
    ]);
    expect(digitProbes('error')).toEqual([]);
    expect(digitProbes('x12345678901234567y')).toEqual([{ digits: 17, value: 123456789012345, place: 'whole' }]);
  });

  it('never rule out a block whose runs hold the probe (random runs against brute force)', () => {
    const r = rng(0xd161);
    let ruledOut = 0;
    for (let round = 0; round < 3000; round++) {
      // A block's runs: a few lengths, values clustered (a sequence) or spread, leading zeros kept.
      const runs: string[] = [];
      const base = Math.floor(r() * 1e9);
      const n = 1 + Math.floor(r() * 20);
      for (let i = 0; i < n; i++) {
        const len = 1 + Math.floor(r() * (r() < 0.1 ? 18 : 9));
        runs.push(
          r() < 0.5
            ? String(base + i)
                .padStart(len, '0')
                .slice(-len)
            : digitsOf(r, len),
        );
      }
      const builder = new DigitRangeBuilder();
      for (const run of runs) builder.add(run.length, run.length <= DIGITS_MAX ? Number(run) : 0);
      const ranges = builder.take();
      for (let q = 0; q < 20; q++) {
        // A probe cut from a run (so often held), or random digits (rarely).
        const src = runs[Math.floor(r() * runs.length)];
        const from = Math.floor(r() * src.length);
        const probe = r() < 0.7 ? src.slice(from, from + 1 + Math.floor(r() * (src.length - from))) : digitsOf(r, 1 + Math.floor(r() * 8));
        for (const place of ['whole', 'prefix', 'suffix', 'inside'] as const) {
          const p = { digits: probe.length, value: Number(probe.slice(0, DIGITS_MAX)), place };
          const truth = runs.some((run) => holds(run, probe, place));
          const said = digitsMayHold(ranges, p);
          if (truth) expect(said, JSON.stringify({ runs, probe, place })).toBe(true);
          else if (!said) ruledOut++;
        }
      }
    }
    // And they do rule out: most probes a block does not hold.
    expect(ruledOut).toBeGreaterThan(20_000);
  });

  it('rule out a rare number in every block of a sequence but its own', () => {
    const body = enc.encode(Array.from({ length: 200_000 }, (_, i) => String(i + 1)).join('\n') + '\n');
    const ix = indexOf(body, 16 * 1024);
    for (const term of ['123457', '199999', '87654', '100000']) {
      const plan = planRanges(ix, [term], 0);
      expect(plan.ok, term).toBe(true);
      if (!plan.ok) continue;
      // The number itself, and every longer number holding it, lie in one or two blocks.
      const read = plan.ranges.reduce((n, x) => n + x.toByte - x.fromByte, 0);
      expect(read, term).toBeLessThan(body.length / 20);
    }
  });
});

describe('searchIndexed with digit ranges: the same result as a plain scan', () => {
  it('on sequences: steps, padding, numbers of every length, blocks of every size', async () => {
    const r = rng(0x5e9);
    let shares = 0;
    let queries = 0;
    for (let round = 0; round < 16; round++) {
      const start = Math.floor(r() * [10, 1e4, 1e9, 1e15][round % 4]);
      const step = [1, 1, 3, 997][Math.floor(r() * 4)];
      const pad = r() < 0.3 ? 2 + Math.floor(r() * 18) : 0;
      const lines = Array.from({ length: 500 + Math.floor(r() * 3000) }, (_, i) => String(start + i * step).padStart(pad, '0'));
      const body = enc.encode(lines.join('\n') + (r() < 0.8 ? '\n' : ''));
      const ix = indexOf(body, [64, 500, 4096][round % 3], 1 + Math.floor(r() * 5000));
      for (let q = 0; q < 12; q++) {
        const terms = [r() < 0.75 ? sliceTerm(r, lines) : digitsOf(r, 3 + Math.floor(r() * 12))];
        if (r() < 0.2) terms.push(digitsOf(r, 3 + Math.floor(r() * 6)));
        shares += await agree(body, ix, { terms, contextLines: Math.floor(r() * 4), maxExcerpts: 20, source: 'stdout' }, { round, q, terms });
        queries++;
      }
    }
    // A number is rare in a sequence: most queries read a small part of the body.
    expect(shares / queries).toBeLessThan(0.5);
  }, 60_000);

  it('on mixed text and numbers: ids, timestamps, hex, long and padded runs, CRLF, any case', async () => {
    const r = rng(0x317ed);
    const hex = () => Math.floor(r() * 2 ** 32).toString(16);
    for (let round = 0; round < 12; round++) {
      let ts = 1_700_000_000_000 + Math.floor(r() * 1e9);
      const lines: string[] = [];
      for (let i = 0; i < 1500; i++) {
        ts += Math.floor(r() * 50);
        const x = r();
        lines.push(
          x < 0.5
            ? `${ts} INFO req=${100_000 + i} user_${Math.floor(r() * 97)} took ${Math.floor(r() * 900)}ms sha ${hex()}`
            : x < 0.7
              ? `[${String(i).padStart(8, '0')}] Worker-${i % 7}: Processed ${i * 31} items${r() < 0.3 ? '\r' : ''}`
              : x < 0.8
                ? `trace ${digitsOf(r, 16 + Math.floor(r() * 8))} depth ${Math.floor(r() * 20)} Kelvin \u212A${i}`
                : x < 0.9
                  ? `2026-12-06T${String(i % 24).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}:07.${String(i % 1000).padStart(3, '0')}Z ERROR code E${i % 500}`
                  : `${i}`,
        );
      }
      const body = enc.encode(lines.join('\n') + '\n');
      const ix = indexOf(body, [80, 700, 8192][round % 3], 1 + Math.floor(r() * 9000));
      for (let q = 0; q < 15; q++) {
        const x = r();
        const terms = [x < 0.7 ? sliceTerm(r, lines) : x < 0.85 ? digitsOf(r, 3 + Math.floor(r() * 10)) : `req=${100_000 + Math.floor(r() * 3000)}`];
        await agree(body, ix, { terms, contextLines: Math.floor(r() * 11), maxExcerpts: 1 + Math.floor(r() * 30), source: 'stdout' }, { round, q, terms });
      }
    }
  }, 60_000);

  it('at the edges: numbers ending a block, a body without a last line end, runs of 15 and 16 digits, leading zeros', async () => {
    const lines = [
      '0',
      '000',
      '007 bond',
      'x999999999999999y', // 15 digits
      'x1000000000000000y', // 16 digits
      '12345678901234567890',
      'a1b22c333d4444',
      ...Array.from({ length: 300 }, (_, i) => `${i * 1001}`),
      'tail 4242',
    ];
    for (const trailing of ['\n', '']) {
      const body = enc.encode(lines.join('\n') + trailing);
      for (const blockBytes of [1, 5, 13, 64]) {
        const ix = indexOf(body, blockBytes, 7);
        for (const term of [
          '4242',
          'TAIL 4242',
          '999999999999999',
          '99999999999999',
          '1000000000000000',
          'x100000000000000',
          '0000000000000y',
          '567890',
          '00 ',
          '007',
          ' bond',
          'c333d',
          'b22',
          '2c3',
          '299299',
          '300300',
          '000',
        ]) {
          await agree(body, ix, { terms: [term], contextLines: 2, maxExcerpts: 50, source: 'stdout' }, { trailing, blockBytes, term });
        }
      }
    }
  });

  it('fails when the index leaves out a block that holds a match (the comparison is not vacuous)', async () => {
    const body = enc.encode(Array.from({ length: 5000 }, (_, i) => `n ${i}`).join('\n') + '\n');
    const ix = indexOf(body, 1024);
    const o: SearchOptions = { terms: ['4321'], contextLines: 1, maxExcerpts: 5, source: 'stdout' };
    const full = await searchStream(streamOf(body), o);
    expect(full.matchCount).toBe(1);
    // Tamper: every block claims its 4-digit runs lie above 9000.
    for (const b of ix.blocks) {
      const runs = b.digits?.runs ?? [];
      for (let i = 0; i < runs.length; i += 3) if (runs[i] === 4) [runs[i + 1], runs[i + 2]] = [9001, 9999];
    }
    const got = await searchIndexed(async (offset, length) => streamOf(body.subarray(offset, offset + length)), ix, o, 1);
    expect(got.kind).toBe('searched');
    if (got.kind === 'searched') expect(got.result.matchCount).not.toBe(full.matchCount);
  });
});

describe('a version 1 index (before digit ranges)', () => {
  // The body of test/search/fixtures/block-index-v1.bin, which the version 1 builder wrote with blocks of 2048 bytes.
  const lines = Array.from({ length: 3000 }, (_, k) => {
    const i = k + 1;
    return i % 500 === 250 ? `${i} ERROR code ${i * 7} Timeout` : `${i} item-${(i * 7919) % 100000} ok`;
  });
  const body = enc.encode(lines.join('\n') + '\n');
  const v1 = new Uint8Array(readFileSync(join(import.meta.dirname, 'fixtures', 'block-index-v1.bin')));

  it('is read, its blocks without digit ranges, and searched as the whole scan is', async () => {
    expect(v1[4]).toBe(1);
    const ix = decodeBlockIndex(v1, body.length);
    expect(ix.blocks.length).toBeGreaterThan(20);
    expect(ix.blocks.every((b) => b.digits === null)).toBe(true);
    let narrowed = 0;
    for (const term of ['timeout', 'ERROR CODE 1', '2750', 'item-79', 'code 19250']) {
      const share = await agree(body, ix, { terms: [term], contextLines: 2, maxExcerpts: 10, source: 'stdout' }, { term });
      if (share < 0.5) narrowed++;
    }
    // Trigrams still narrow its words.
    expect(narrowed).toBeGreaterThan(0);
  });

  it('is the same index as version 2 but for the digit ranges', () => {
    const v2 = indexOf(body, 2048);
    const old = decodeBlockIndex(v1, body.length);
    expect(v2.blocks.map(({ digits: _, ...b }) => b)).toEqual(old.blocks.map(({ digits: _, ...b }) => b));
  });
});
