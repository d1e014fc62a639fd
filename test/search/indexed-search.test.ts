/**
 * The search narrowed by the block index gives what the whole scan gives: differential tests on
 * random bodies (multi-byte and invalid UTF-8, CRLF, a BOM, long lines over many block sizes, rare
 * and frequent terms in any case), then `query_output` itself over an R2 bucket with ranged reads,
 * and indexes that do not describe the body.
 */
import { describe, expect, it } from 'vitest';
import { BlockIndexBuilder, decodeBlockIndex, SEARCH_INDEX_MIN_BYTES, termProbes } from '../../src/search/block-index.ts';
import { planRanges, SEARCH_READS_PER_STREAM, searchIndexed } from '../../src/search/indexed-search.ts';
import { searchStream, type SearchOptions } from '../../src/search/line-search.ts';
import { putArtifactBody, searchIndexKey } from '../../src/store/artifacts.ts';
import { indexArtifact } from '../../src/dispatch/artifact-client.ts';
import { queryOutput } from '../../src/governed/query-output.ts';
import type { Env } from '../../src/env.ts';
import { rng, streamOf } from '../support/search-input.ts';
import { FakeD1, FakeR2, FakeTeams } from '../store/fakes.ts';

const enc = new TextEncoder();

const WORDS = ['the', 'and', 'error', 'Error', 'ERROR', 'warn', 'ok', 'build', 'step', '42', 'zebra', 'needle', 'NeEdLe', 'kelvin', '\u212Aelvin', 'İstanbul'];
const WIDE = ['élan', '€uro', '😀', 'straße', 'ünïcödé', 'İ', '\u212A'];
const RARE = 'xylophone-7f3a';
const INVALID = [[0xff], [0xe2], [0xe2, 0x84], [0xc4], [0xed, 0xa0, 0x80], [0xf0, 0x9f]];

/** A random body as bytes: mostly short lines, some very long, multi-byte and broken characters, a rare term. */
function randomBody(r: () => number): Uint8Array {
  const parts: Uint8Array[] = [];
  if (r() < 0.3) parts.push(Uint8Array.of(0xef, 0xbb, 0xbf));
  const lines = 100 + Math.floor(r() * 1500);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  for (let l = 0; l < lines; l++) {
    const words = r() < 0.01 ? 300 + Math.floor(r() * 3000) : Math.floor(r() * 14);
    let line = '';
    for (let w = 0; w < words; w++) {
      const x = r();
      line += x < 0.0003 ? RARE : x < 0.1 ? pick(WIDE) : pick(WORDS);
      line += pick([' ', ' ', ' ', ':', ',', '\t', '-']);
      if (r() < 0.003) {
        parts.push(enc.encode(line));
        parts.push(Uint8Array.from(pick(INVALID)));
        line = '';
      }
    }
    if (r() < 0.1) line += '\r';
    parts.push(enc.encode(line + (l < lines - 1 || r() < 0.7 ? '\n' : '')));
  }
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function randomQuery(r: () => number): SearchOptions {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const term = (): string => {
    const x = r();
    if (x < 0.2) return pick([RARE, RARE.toUpperCase(), 'lophone-7', 'ylo']);
    if (x < 0.55) return pick(WORDS).toLowerCase();
    if (x < 0.7) return pick(['RRO', 'elv', 'KELVIN', 'd i', 'stan', 'ISTANBUL', 'r:', 'ror,', 'p\t4', 'a\r', 'l\rn']);
    if (x < 0.8) return pick(WORDS).toUpperCase();
    if (x < 0.9) return Array.from({ length: 3 + Math.floor(r() * 4) }, () => String.fromCharCode(97 + Math.floor(r() * 26))).join('');
    return pick(['ok', 'é', 'straße', '😀', 'İ']);
  };
  const n = 1 + Math.floor(r() * 3);
  return {
    terms: Array.from({ length: n }, term),
    contextLines: Math.floor(r() * 11),
    maxExcerpts: 1 + Math.floor(r() * 50),
    maxExcerptLines: pick([undefined, 1, 3, 200]),
    source: 'stdout',
  };
}

const chunks = (r: () => number) => Array.from({ length: 4 }, () => 1 + Math.floor(r() * 70_000));

function indexOf(body: Uint8Array, blockBytes: number) {
  const b = new BlockIndexBuilder(blockBytes);
  b.push(body);
  return b.finish();
}

describe('searchIndexed: the same result as the whole scan', () => {
  it('on random bodies, block sizes, terms, cases and context lengths', async () => {
    const r = rng(0x5eed);
    let narrowed = 0;
    let searched = 0;
    for (let round = 0; round < 30; round++) {
      const body = randomBody(r);
      const blockBytes = [16, 60, 300, 2000, 16_384][round % 5];
      const ix = decodeBlockIndex(indexOf(body, blockBytes), body.length);
      for (let q = 0; q < 25; q++) {
        const o = randomQuery(r);
        const sizes = chunks(r);
        const full = await searchStream(streamOf(body, sizes), o);
        // Every share of the body may be read, so the narrowed path runs for every query it can serve.
        const got = await searchIndexed(async (offset, length) => streamOf(body.subarray(offset, offset + length), sizes), ix, o, 1);
        const usable = termProbes(o.terms) !== null;
        expect({ round, q, kind: got.kind }).toEqual({ round, q, kind: usable ? 'searched' : 'unusable' });
        if (got.kind !== 'searched') continue;
        expect(got.result, JSON.stringify({ round, q, o })).toEqual(full);
        searched++;
        const read = got.ranges.reduce((n, x) => n + x.toByte - x.fromByte, 0);
        if (read < body.length) narrowed++;
      }
    }
    // The test exercises the narrowing, not only whole reads (how little a rare term reads: the tests below).
    expect(searched).toBeGreaterThan(400);
    expect(narrowed).toBeGreaterThan(searched / 4);
  }, 120_000);

  it('finds a term inside a line many blocks long, with the context lines of the blocks around it', async () => {
    const long = 'pad '.repeat(5000) + 'the NEEDLE sits here ' + 'pad '.repeat(5000);
    const lines = [...Array.from({ length: 40 }, (_, i) => `before ${i}`), long, ...Array.from({ length: 40 }, (_, i) => `after ${i} needl? no: neeedle`)];
    const body = enc.encode(lines.join('\n') + '\n');
    const ix = decodeBlockIndex(indexOf(body, 64), body.length);
    for (const contextLines of [0, 1, 10]) {
      const o: SearchOptions = { terms: ['needle'], contextLines, maxExcerpts: 5, source: 'stdout' };
      // The long line is most of the body: allow reading all of it, so the narrowed path runs.
      const got = await searchIndexed(async (offset, length) => streamOf(body.subarray(offset, offset + length), [1000]), ix, o, 1);
      expect(got.kind).toBe('searched');
      if (got.kind === 'searched') expect(got.result).toEqual(await searchStream(streamOf(body), o));
    }
  });

  it('reads only the candidate blocks for a rare term, in at most SEARCH_READS_PER_STREAM - 2 ranges', () => {
    const lines = Array.from({ length: 20_000 }, (_, i) => (i === 777 || i === 15_000 ? `line ${i} RARE-term-xq9` : `line ${i} ordinary text`));
    const body = enc.encode(lines.join('\n') + '\n');
    const ix = decodeBlockIndex(indexOf(body, 4096), body.length);
    const plan = planRanges(ix, ['rare-term-xq9'], 3);
    expect(plan.ok).toBe(true);
    if (!plan.ok) return;
    expect(plan.ranges.length).toBeLessThanOrEqual(SEARCH_READS_PER_STREAM - 2);
    expect(plan.ranges.reduce((n, x) => n + x.toByte - x.fromByte, 0)).toBeLessThan(4 * 4096 + 2000);
  });

  it('leaves a query it cannot narrow to the whole scan', () => {
    const body = enc.encode('a b c\n'.repeat(100));
    const ix = decodeBlockIndex(indexOf(body, 64), body.length);
    expect(planRanges(ix, ['ab'], 0)).toMatchObject({ ok: false, why: /shorter than 3/ });
    expect(planRanges(ix, ['é!é'], 0)).toMatchObject({ ok: false, why: /not ASCII/ });
    expect(planRanges(ix, ['a b'], 0)).toMatchObject({ ok: false, why: /most blocks/ });
  });
});

/** An R2 bucket that also answers ranged reads and `arrayBuffer()`, as R2 does. */
class RangedR2 extends FakeR2 {
  override async get(key: string, o?: { range?: { suffix?: number; offset?: number; length?: number } }) {
    const got = await super.get(key, o);
    if (!got) return null;
    let data = this.objects.get(key)!.data;
    if (o?.range?.offset !== undefined) data = data.subarray(o.range.offset, o.range.offset + (o.range.length ?? data.length));
    return { ...got, body: streamOf(data.slice(), [65_536]), arrayBuffer: async () => data.slice().buffer };
  }
}

const T0 = 1_800_000_000_000;

async function seeded(body: Uint8Array, index: Uint8Array | null) {
  const r2 = new RangedR2();
  const teams: FakeTeams = new FakeTeams(() => env);
  teams.clock.now = T0;
  const env = { DB: new FakeD1(), ARTIFACTS: r2, TEAM_DISPATCHER: teams } as unknown as Env;
  const entry = { handle: 'art_search', jobId: 'job-s', stream: 'stdout' as const, lines: 0, truncated: false, retentionHours: 24 };
  const put = await putArtifactBody(env, { ...entry, team: 'team-a', body: streamOf(body), contentLength: body.length });
  if (!put.ok) throw new Error(put.error.message);
  await indexArtifact(env, 'team-a', { ...entry, r2Key: put.value.r2Key, bytes: body.length }, null);
  if (index) await r2.put(searchIndexKey('t/team-a/a/art_search/stdout'), index);
  r2.calls.length = 0;
  return { env, r2 };
}

/** A build log over SEARCH_INDEX_MIN_BYTES with a rare error twice. */
function bigLog(lineOf: (i: number) => string = (i) => `[${i}] INFO compiled module_${i % 1013}.ts in ${i % 250}ms`): Uint8Array {
  const lines: string[] = [];
  let bytes = 0;
  for (let i = 0; bytes < SEARCH_INDEX_MIN_BYTES + 500_000; i++) {
    const l = i === 12_345 || i === 70_000 ? `[${i}] ERROR TS2322: Type 'string' is not assignable` : lineOf(i);
    lines.push(l);
    bytes += l.length + 1;
  }
  return enc.encode(lines.join('\n') + '\n');
}

describe('query_output with a search index', () => {
  const body = bigLog();
  const index = indexOf(body, 64 * 1024);
  const ask = { artifactHandle: 'art_search', queryTerms: ['ts2322'], contextLines: 2, stream: 'stdout' as const };

  it('answers as the whole scan does, reading the index and the candidate ranges only', async () => {
    const plain = await seeded(body, null);
    const expected = await queryOutput(plain.env, 'team-a', ask, T0);
    expect(expected.ok && expected.value.matchCount).toBe(2);

    const { env, r2 } = await seeded(body, index);
    expect(await queryOutput(env, 'team-a', ask, T0)).toEqual(expected);
    expect(r2.calls[0]).toBe('get t/team-a/a/art_search/stdout.idx');
    const ranged = r2.calls.slice(1);
    expect(ranged.length).toBeGreaterThan(0);
    expect(ranged.length).toBeLessThanOrEqual(SEARCH_READS_PER_STREAM - 2);
    for (const c of ranged) expect(c).toMatch(/^get t\/team-a\/a\/art_search\/stdout \{"offset":\d+,"length":\d+\}$/);
  });

  it('scans the whole body for a query the index cannot narrow, with the same result', async () => {
    const q = { ...ask, queryTerms: ['ms'] };
    const plain = await seeded(body, null);
    const { env, r2 } = await seeded(body, index);
    expect(await queryOutput(env, 'team-a', q, T0)).toEqual(await queryOutput(plain.env, 'team-a', q, T0));
    expect(r2.calls).toEqual(['get t/team-a/a/art_search/stdout.idx', 'get t/team-a/a/art_search/stdout']);
  });

  it('looks for no index on a stream too small to get one', async () => {
    const small = enc.encode('one ERROR TS2322 line\n');
    const { env, r2 } = await seeded(small, indexOf(small, 16));
    const r = await queryOutput(env, 'team-a', { ...ask, contextLines: 0 }, T0);
    expect(r.ok && r.value.matchCount).toBe(1);
    expect(r2.calls).toEqual(['get t/team-a/a/art_search/stdout']);
  });
});

describe('an index that does not describe the body (attacks)', () => {
  const body = bigLog();
  const ask = { artifactHandle: 'art_search', queryTerms: ['ts2322', 'module_7.'], contextLines: 3, stream: 'stdout' as const };

  it('an index of another body of the same size, whose lines fall elsewhere, is caught by the ranges it reads', async () => {
    // Same size, other line lengths: what the index says is on each line is not.
    const other = body.slice();
    for (let i = 100; i < other.length - 100; i += 97) {
      if (other[i] === 0x0a) other[i] = 0x20;
      else if (other[i] === 0x20) other[i] = 0x0a;
    }
    const lying = indexOf(other, 64 * 1024);
    const q = { ...ask, queryTerms: ['ts2322'] };
    const o: SearchOptions = { terms: q.queryTerms, contextLines: q.contextLines, maxExcerpts: 10, source: 'stdout' };
    const direct = await searchIndexed(async (offset, length) => streamOf(body.subarray(offset, offset + length)), decodeBlockIndex(lying, body.length), o);
    expect(direct).toMatchObject({ kind: 'unusable', why: /do not hold lines/, mismatch: true });
    const plain = await seeded(body, null);
    const { env } = await seeded(body, lying);
    expect(await queryOutput(env, 'team-a', q, T0)).toEqual(await queryOutput(plain.env, 'team-a', q, T0));
  });

  it('asks for every range at once, and lets go of those not scanned when one disagrees with the index or a read fails', async () => {
    const marked = bigLog((i) => (i % 20_000 === 5 ? `[${i}] zzqx marker` : `[${i}] INFO compiled module_${i % 1013}.ts in ${i % 250}ms`));
    const ix = decodeBlockIndex(indexOf(marked, 64 * 1024), marked.length);
    const o: SearchOptions = { terms: ['zzqx'], contextLines: 2, maxExcerpts: 10, source: 'stdout' };
    const plan = planRanges(ix, o.terms, o.contextLines);
    expect(plan.ok && plan.ranges.length).toBeGreaterThanOrEqual(3);
    const asked: number[] = [];
    const cancelled: number[] = [];
    const watched = (s: ReadableStream<Uint8Array>, n: number) => {
      const r = s.getReader();
      return new ReadableStream<Uint8Array>({
        async pull(c) {
          const { done, value } = await r.read();
          if (done) c.close();
          else c.enqueue(value);
        },
        cancel: (why) => {
          cancelled.push(n);
          return r.cancel(why);
        },
      });
    };
    const got = await searchIndexed(
      async (offset, length) => {
        const n = asked.push(offset) - 1;
        // The first range holds other bytes than the index says; the third read fails while the first is scanned.
        if (n === 2) throw new Error('connection reset');
        return watched(streamOf(marked.subarray(offset + (n === 0 ? 1 : 0), offset + length + (n === 0 ? 1 : 0))), n);
      },
      ix,
      o,
    );
    expect(got).toMatchObject({ kind: 'unusable', mismatch: true });
    if (!plan.ok) return;
    // Every read was started before the first range was scanned; the ones never scanned were let go (the failed one has no body).
    expect(asked).toHaveLength(plan.ranges.length);
    await new Promise((r) => setTimeout(r, 0));
    expect(cancelled.sort()).toEqual(Array.from({ length: plan.ranges.length - 1 }, (_, i) => i + 1).filter((n) => n !== 2));
  });

  it('an index of a body of another size, or bytes that are no index, are not used', async () => {
    const plain = await seeded(body, null);
    const expected = await queryOutput(plain.env, 'team-a', ask, T0);
    for (const bad of [indexOf(body.subarray(1), 64 * 1024), enc.encode('GHSI not really'), new Uint8Array(0)]) {
      const { env, r2 } = await seeded(body, bad);
      expect(await queryOutput(env, 'team-a', ask, T0)).toEqual(expected);
      expect(r2.calls).toEqual(['get t/team-a/a/art_search/stdout.idx', 'get t/team-a/a/art_search/stdout']);
    }
  });
});
