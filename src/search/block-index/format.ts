/**
 * What a search index is (src/search/block-index.ts) and its encoding: magic, version, then LEB128 varints, filters as
 * raw bytes. Written by the builder (./builder.ts), read and checked by the edge before a search uses it (./lookup.ts).
 * Version 2 adds each block's digit ranges (./digits.ts); version 1 indexes (uploaded before it) are still read, their
 * blocks without digit ranges (a number is then narrowed by trigrams only, as before).
 */
import { DIGITS_MAX, type DigitRanges } from './digits.ts';

const POW10 = Array.from({ length: DIGITS_MAX + 1 }, (_, k) => 10 ** k);

/** Blocks end at the first line end at or after this many bytes (a longer line makes a longer block). */
export const SEARCH_BLOCK_BYTES = 1024 * 1024;
/**
 * Streams smaller than this get no index: scanning them whole is as fast as reading an index, and
 * costs one R2 read instead of two.
 */
export const SEARCH_INDEX_MIN_BYTES = 4 * 1024 * 1024;
/** The largest index a search reads (it is read whole); a larger one is not uploaded or not used. */
export const SEARCH_INDEX_MAX_BYTES = 32 * 1024 * 1024;
/** The most context lines the index supports (query_output's contextLines maximum). */
export const SEARCH_INDEX_CONTEXT_MAX = 10;
/** Lines after a block that a search reads so an excerpt still open at its end closes: 2C+2 (line-search.ts). */
export const TRAILING_LINES = 2 * SEARCH_INDEX_CONTEXT_MAX + 2;
const MAGIC = [0x47, 0x48, 0x53, 0x49]; // 'GHSI'
const VERSION = 2;
/** Versions this gateway reads: 1 has no digit ranges. */
const READS_VERSIONS = [1, 2];

export interface IndexBlock {
  /** Byte offset of the block's first byte in the body. */
  start: number;
  bytes: number;
  /** Lines before the block (0-based number of its first line). */
  startLine: number;
  /** Lines that end in it (a last line without '\n' counts). */
  lines: number;
  /** Absolute byte offsets just after each of its first lines (up to 2·CONTEXT_MAX+2). */
  firstEnds: number[];
  /** Absolute byte offsets of the starts of its last lines (up to CONTEXT_MAX). */
  lastStarts: number[];
  /** Bit set of hashed trigrams, or null: too many to filter, the block is always read. */
  filter: Uint8Array | null;
  filterLog2: number;
  /** The block's digit runs (./digits.ts), or null (a version 1 index): any number may be there. */
  digits: DigitRanges | null;
}

export interface BlockIndex {
  totalBytes: number;
  totalLines: number;
  contextMax: number;
  blocks: IndexBlock[];
}

/** Filter bit of a trigram (three byte values packed as a 24-bit number) in a filter of 2^log2 bits. */
export function trigramBit(t: number, log2: number): number {
  return Math.imul(t, 0x9e3779b1) >>> (32 - log2);
}

export interface EncodedBlock {
  bytes: number;
  lines: number;
  /** Relative to the block's start. */
  firstEnds: number[];
  lastStarts: number[];
  filter: Uint8Array | null;
  filterLog2: number;
  digits: DigitRanges;
}

// ---- encoding: magic, version, then LEB128 varints; filters as raw bytes ----

class Writer {
  private buf = new Uint8Array(1024);
  len = 0;
  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const grown = new Uint8Array(Math.max(this.buf.length * 2, this.len + n));
    grown.set(this.buf.subarray(0, this.len));
    this.buf = grown;
  }
  byte(b: number): void {
    this.room(1);
    this.buf[this.len++] = b;
  }
  varint(v: number): void {
    this.room(10);
    while (v >= 0x80) {
      this.buf[this.len++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.len++] = v;
  }
  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
  done(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

/** Increasing offsets as the differences between neighbours (small numbers, short varints). */
function deltas(w: Writer, xs: number[]): void {
  w.varint(xs.length);
  let prev = 0;
  for (const x of xs) {
    w.varint(x - prev);
    prev = x;
  }
}

export function encode(totalBytes: number, totalLines: number, blocks: EncodedBlock[]): Uint8Array {
  const w = new Writer();
  for (const b of MAGIC) w.byte(b);
  w.byte(VERSION);
  w.varint(totalBytes);
  w.varint(totalLines);
  w.varint(blocks.length);
  w.varint(SEARCH_INDEX_CONTEXT_MAX);
  for (const b of blocks) {
    w.varint(b.bytes);
    w.varint(b.lines);
    deltas(w, b.firstEnds);
    deltas(w, b.lastStarts);
    w.byte(b.filterLog2);
    if (b.filter) w.bytes(b.filter);
    writeDigits(w, b.digits);
  }
  return w.done();
}

/** Bit k−1 set: runs of k digits occur (k ≤ DIGITS_MAX), each such length then as least and greatest − least; bit DIGITS_MAX: longer runs occur. */
function writeDigits(w: Writer, d: DigitRanges): void {
  let mask = d.long ? 1 << DIGITS_MAX : 0;
  for (let i = 0; i < d.runs.length; i += 3) mask |= 1 << (d.runs[i] - 1);
  w.varint(mask);
  for (let i = 0; i < d.runs.length; i += 3) {
    w.varint(d.runs[i + 1]);
    w.varint(d.runs[i + 2] - d.runs[i + 1]);
  }
}

function readDigits(r: Reader): DigitRanges {
  const mask = r.varint();
  if (mask >= 2 ** (DIGITS_MAX + 1)) throw new BadIndex('digit ranges of unknown lengths');
  const runs: number[] = [];
  for (let k = 1; k <= DIGITS_MAX; k++) {
    if ((mask & (1 << (k - 1))) === 0) continue;
    const lo = r.varint();
    const hi = lo + r.varint();
    if (hi >= POW10[k]) throw new BadIndex(`a range of ${k}-digit numbers reaches past ${k} digits`);
    runs.push(k, lo, hi);
  }
  return { runs, long: (mask & (1 << DIGITS_MAX)) !== 0 };
}

/** Why an index cannot be used: it is not one, or does not describe a body of this size. */
export class BadIndex extends Error {}

class Reader {
  pos = 0;
  private readonly input: Uint8Array;
  constructor(b: Uint8Array) {
    this.input = b;
  }
  byte(): number {
    if (this.pos >= this.input.length) throw new BadIndex('the index ends early');
    return this.input[this.pos++];
  }
  varint(): number {
    let v = 0;
    let scale = 1;
    // 8 groups of 7 bits: up to 2^56, past every offset and every 15-digit number.
    for (let i = 0; i < 8; i++) {
      const x = this.byte();
      v += (x & 0x7f) * scale;
      if (x < 0x80) return v;
      scale *= 0x80;
    }
    throw new BadIndex('a number in the index is too long');
  }
  bytes(n: number): Uint8Array {
    if (this.pos + n > this.input.length) throw new BadIndex('the index ends early');
    const out = this.input.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

/** Absolute offsets from deltas, each in (lo, hi] when `ends`, else [lo, hi), strictly increasing. */
function readOffsets(r: Reader, base: number, lo: number, hi: number, ends: boolean): number[] {
  const n = r.varint();
  const out: number[] = [];
  let prev = base;
  for (let i = 0; i < n; i++) {
    const x = prev + r.varint();
    if ((i > 0 && x <= prev) || (ends ? x <= lo || x > hi : x < lo || x >= hi)) throw new BadIndex('line offsets out of order or outside their block');
    out.push(x);
    prev = x;
  }
  return out;
}

/**
 * Parses and checks an index against the size of the body it claims to describe. Everything an
 * index states is checked for consistency (blocks tile the body, offsets lie in their blocks,
 * counts add up); what cannot be checked without reading the body is discussed in docs/tools.md.
 */
export function decodeBlockIndex(b: Uint8Array, bodyBytes: number): BlockIndex {
  const r = new Reader(b);
  for (const m of MAGIC) if (r.byte() !== m) throw new BadIndex('not a search index');
  const version = r.byte();
  if (!READS_VERSIONS.includes(version))
    throw new BadIndex(`search index version ${version} is not known (this gateway reads versions ${READS_VERSIONS.join(', ')})`);
  const totalBytes = r.varint();
  const totalLines = r.varint();
  const count = r.varint();
  const contextMax = r.varint();
  if (totalBytes !== bodyBytes) throw new BadIndex(`the index describes ${totalBytes} bytes, the body has ${bodyBytes}`);
  if (count > totalBytes) throw new BadIndex('more blocks than bytes');
  const blocks: IndexBlock[] = [];
  let start = 0;
  let startLine = 0;
  for (let i = 0; i < count; i++) {
    const bytes = r.varint();
    const lines = r.varint();
    if (bytes === 0 || lines === 0 || lines > bytes) throw new BadIndex('an empty block, or more lines than bytes');
    const end = start + bytes;
    const firstEnds = readOffsets(r, start, start, end, true);
    const lastStarts = readOffsets(r, start, start, end, false);
    if (firstEnds.length !== Math.min(lines, 2 * contextMax + 2) || lastStarts.length !== Math.min(lines, contextMax))
      throw new BadIndex('a block lists the wrong number of line offsets');
    if (firstEnds.length === lines && firstEnds[lines - 1] !== end) throw new BadIndex("a block's lines do not end at its end");
    const filterLog2 = r.byte();
    if (filterLog2 !== 0 && (filterLog2 < 3 || filterLog2 > 24)) throw new BadIndex(`filter size 2^${filterLog2} is out of range`);
    const filter = filterLog2 === 0 ? null : r.bytes((1 << filterLog2) >>> 3);
    const digits = version >= 2 ? readDigits(r) : null;
    blocks.push({ start, bytes, startLine, lines, firstEnds, lastStarts, filter, filterLog2, digits });
    start = end;
    startLine += lines;
  }
  if (start !== totalBytes || startLine !== totalLines) throw new BadIndex('the blocks do not add up to the body');
  if (r.pos !== b.length) throw new BadIndex('bytes after the end of the index');
  return { totalBytes, totalLines, contextMax, blocks };
}
