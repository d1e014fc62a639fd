/**
 * The search index of an artifact stream: the body cut into line-aligned blocks, and per block its
 * line count, the byte offsets of the few lines at its edges (for context lines across blocks), and
 * a filter of the trigrams it holds. `query_output` reads the index, then only the blocks whose
 * filter holds every trigram of a term (plus the context lines around them): a rare term in 1 GB
 * costs the index and one block, not the whole body. See docs/tools.md ("How search scales").
 *
 * What the filter holds, so that it never misses a match of the line search (line-search.ts, which
 * lowercases text and terms and matches substrings within a line): trigrams of the body's bytes with
 * ASCII letters folded to lowercase, never across a '\n', and never through a non-ASCII byte —
 * except the two non-ASCII characters whose lowercase form starts with an ASCII letter (U+0130 'İ'
 * → 'i̇', U+212A KELVIN SIGN → 'k'), which count as that letter. Only queries whose terms are all
 * ASCII and at least 3 characters long use it; any other query scans the whole body, as without an
 * index. The filter may say yes wrongly (a block is read for nothing), never no wrongly.
 *
 * The index is built by whoever holds the bytes as a stream (the agent, before uploading them):
 * `BlockIndexBuilder` is pure and takes chunks of any size.
 */

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
const TRAILING_LINES = 2 * SEARCH_INDEX_CONTEXT_MAX + 2;
const MAGIC = [0x47, 0x48, 0x53, 0x49]; // 'GHSI'
const VERSION = 1;
/** Filter bits per distinct trigram, at least (rounded up to a power of two): about 1 bit in 5 set or fewer. */
const FILTER_BITS_PER_TRIGRAM = 4;
const FILTER_MIN_LOG2 = 8;
const FILTER_MAX_LOG2 = 17;
const NL = 0x0a;
/** ASCII with 'A'–'Z' folded to 'a'–'z'. */
const FOLD = Uint8Array.from({ length: 128 }, (_, b) => (b >= 0x41 && b <= 0x5a ? b | 0x20 : b));
const POPCOUNT = Uint8Array.from({ length: 256 }, (_, i) => {
  let n = 0;
  for (let x = i; x; x &= x - 1) n++;
  return n;
});

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
}

export interface BlockIndex {
  totalBytes: number;
  totalLines: number;
  contextMax: number;
  blocks: IndexBlock[];
}

/** Filter bit of a trigram (three byte values packed as a 24-bit number) in a filter of 2^log2 bits. */
function trigramBit(t: number, log2: number): number {
  return Math.imul(t, 0x9e3779b1) >>> (32 - log2);
}

interface OpenBlock {
  bytes: number;
  lines: number;
  firstEnds: number[];
  /** The last CONTEXT_MAX line starts (relative), oldest first. */
  lastStarts: number[];
  /** Relative start of the line being read. */
  lineStart: number;
}

/**
 * Builds the index from the body's bytes in chunks of any size; `finish` returns its encoding.
 * Memory: one 16 KiB filter for the open block; the output grows with the body (0.4 % of it for
 * the build log of bench/search.ts).
 */
export class BlockIndexBuilder {
  private readonly blockBytes: number;
  /**
   * The open block's trigrams in a filter of the largest size; a smaller one is folded from it
   * (trigramBit takes a hash's top bits, so bit h of 2^k bits is the OR of bits h·2^(17-k)… of it).
   */
  private readonly full = new Uint8Array((1 << FILTER_MAX_LOG2) >>> 3);
  private t = 0;
  /** Normalized characters since the last line break or non-ASCII byte (capped at 3). */
  private run = 0;
  /** A possible U+212A (1: after E2, 2: after E2 84) or U+0130 (3: after C4) is being read. */
  private pend = 0;
  private total = 0;
  /** Bytes of the blocks closed so far: where the open one starts. */
  private closedBytes = 0;
  private totalLines = 0;
  private block: OpenBlock = newBlock();
  private readonly out: EncodedBlock[] = [];

  constructor(blockBytes: number = SEARCH_BLOCK_BYTES) {
    this.blockBytes = Math.max(1, Math.floor(blockBytes));
  }

  push(chunk: Uint8Array): void {
    let t = this.t;
    let run = this.run;
    let pend = this.pend;
    const full = this.full;
    const shift = 32 - FILTER_MAX_LOG2;
    const base = this.total;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      let c: number;
      if (pend === 0 && b < 0x80) {
        // The common case: an ASCII byte, no character pending.
        if (b === NL) {
          run = 0;
          this.lineEnd(base + i + 1);
          continue;
        }
        c = FOLD[b];
      } else if (pend === 0) {
        // A lead byte of 'K' or 'İ' keeps the run going until the character turns out otherwise.
        if (b === 0xe2) pend = 1;
        else if (b === 0xc4) pend = 3;
        else run = 0;
        continue;
      } else {
        if (pend === 1 && b === 0x84) {
          pend = 2;
          continue;
        }
        const was = pend;
        pend = 0;
        if (was === 2 && b === 0xaa) c = 0x6b;
        else if (was === 3 && b === 0xb0) c = 0x69;
        else {
          // Not one of the two: what was pending breaks the run; this byte starts afresh.
          run = 0;
          i--;
          continue;
        }
      }
      t = ((t << 8) | c) & 0xffffff;
      if (run < 3) run++;
      if (run === 3) {
        const h = Math.imul(t, 0x9e3779b1) >>> shift;
        full[h >>> 3] |= 1 << (h & 7);
      }
    }
    this.t = t;
    this.run = run;
    this.pend = pend;
    this.total += chunk.length;
    this.block.bytes = this.total - this.closedBytes;
  }

  /** The encoded index of everything pushed. */
  finish(): Uint8Array {
    const bl = this.block;
    if (bl.bytes > 0) {
      if (bl.lineStart < bl.bytes) {
        // A last line without '\n' is a line too.
        bl.lines++;
        this.totalLines++;
        if (bl.firstEnds.length < TRAILING_LINES) bl.firstEnds.push(bl.bytes);
      }
      this.closeBlock();
    }
    return encode(this.total, this.totalLines, this.out);
  }

  /** A '\n' ended a line just before body offset `end`: record it, close the block once it is long enough. */
  private lineEnd(end: number): void {
    const bl = this.block;
    bl.bytes = end - this.closedBytes;
    bl.lines++;
    this.totalLines++;
    if (bl.firstEnds.length < TRAILING_LINES) bl.firstEnds.push(bl.bytes);
    bl.lastStarts.push(bl.lineStart);
    if (bl.lastStarts.length > SEARCH_INDEX_CONTEXT_MAX) bl.lastStarts.shift();
    bl.lineStart = bl.bytes;
    if (bl.bytes >= this.blockBytes) this.closeBlock();
  }

  private closeBlock(): void {
    const bl = this.block;
    if (bl.lineStart < bl.bytes) {
      // The unfinished last line of the body (finish): its start counts among the last ones.
      bl.lastStarts.push(bl.lineStart);
      if (bl.lastStarts.length > SEARCH_INDEX_CONTEXT_MAX) bl.lastStarts.shift();
    }
    const full = this.full;
    let set = 0;
    for (let i = 0; i < full.length; i++) set += POPCOUNT[full[i]];
    // Distinct trigrams, estimated from the bits set in the largest filter.
    const M = 1 << FILTER_MAX_LOG2;
    const n = set >= M ? Infinity : -M * Math.log(1 - set / M);
    let log2 = FILTER_MIN_LOG2;
    while (log2 < FILTER_MAX_LOG2 && 1 << log2 < n * FILTER_BITS_PER_TRIGRAM) log2++;
    let filter: Uint8Array | null = null;
    // Past about two fifths of the bits set, a filter would pass nearly every query: the block is simply always read.
    if (n * 2 <= M) {
      filter = new Uint8Array((1 << log2) >>> 3);
      if (log2 === FILTER_MAX_LOG2) filter.set(full);
      else
        for (let i = 0; i < full.length; i++) {
          const x = full[i];
          if (x === 0) continue;
          for (let j = 0; j < 8; j++) {
            if ((x & (1 << j)) === 0) continue;
            const h = ((i << 3) | j) >>> (FILTER_MAX_LOG2 - log2);
            filter[h >>> 3] |= 1 << (h & 7);
          }
        }
    }
    full.fill(0);
    this.out.push({ bytes: bl.bytes, lines: bl.lines, firstEnds: bl.firstEnds, lastStarts: bl.lastStarts, filter, filterLog2: filter ? log2 : 0 });
    this.closedBytes += bl.bytes;
    this.block = newBlock();
  }
}

const newBlock = (): OpenBlock => ({ bytes: 0, lines: 0, firstEnds: [], lastStarts: [], lineStart: 0 });

interface EncodedBlock {
  bytes: number;
  lines: number;
  /** Relative to the block's start. */
  firstEnds: number[];
  lastStarts: number[];
  filter: Uint8Array | null;
  filterLog2: number;
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

function encode(totalBytes: number, totalLines: number, blocks: EncodedBlock[]): Uint8Array {
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
  }
  return w.done();
}

/** Why an index cannot be used: it is not one, or does not describe a body of this size. */
export class BadIndex extends Error {}

class Reader {
  pos = 0;
  private readonly b: Uint8Array;
  constructor(b: Uint8Array) {
    this.b = b;
  }
  byte(): number {
    if (this.pos >= this.b.length) throw new BadIndex('the index ends early');
    return this.b[this.pos++];
  }
  varint(): number {
    let v = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      const x = this.byte();
      v += (x & 0x7f) * scale;
      if (x < 0x80) return v;
      scale *= 0x80;
    }
    throw new BadIndex('a number in the index is too long');
  }
  bytes(n: number): Uint8Array {
    if (this.pos + n > this.b.length) throw new BadIndex('the index ends early');
    const out = this.b.subarray(this.pos, this.pos + n);
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
  if (version !== VERSION) throw new BadIndex(`search index version ${version} is not known (this gateway reads version ${VERSION})`);
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
    blocks.push({ start, bytes, startLine, lines, firstEnds, lastStarts, filter, filterLog2 });
    start = end;
    startLine += lines;
  }
  if (start !== totalBytes || startLine !== totalLines) throw new BadIndex('the blocks do not add up to the body');
  if (r.pos !== b.length) throw new BadIndex('bytes after the end of the index');
  return { totalBytes, totalLines, contextMax, blocks };
}

/**
 * The trigrams of each term as the filter holds them, or null when the index cannot narrow this
 * query: a term is not ASCII or shorter than 3 characters (after lowercasing, as the line search
 * does). Terms that can never match (empty, or holding '\n') are left out, as the line search does.
 */
export function termTrigrams(terms: string[]): number[][] | null {
  const lowered = [...new Set(terms.map((t) => t.toLowerCase()).filter((t) => t.length > 0 && !t.includes('\n')))];
  if (lowered.length === 0) return null;
  const out: number[][] = [];
  for (const term of lowered) {
    if (term.length < 3 || /[^\x00-\x7f]/.test(term)) return null;
    const tris = new Set<number>();
    for (let i = 0; i + 3 <= term.length; i++) tris.add((term.charCodeAt(i) << 16) | (term.charCodeAt(i + 1) << 8) | term.charCodeAt(i + 2));
    out.push([...tris]);
  }
  return out;
}

/** May the block hold a line that matches one of the terms (trigrams from `termTrigrams`)? */
export function mayMatch(block: IndexBlock, terms: number[][]): boolean {
  const f = block.filter;
  if (!f) return true;
  return terms.some((tris) =>
    tris.every((t) => {
      const h = trigramBit(t, block.filterLog2);
      return (f[h >>> 3] & (1 << (h & 7))) !== 0;
    }),
  );
}

/** Index of the block holding 0-based line `line` (< totalLines). */
function blockOfLine(ix: BlockIndex, line: number): IndexBlock {
  let lo = 0;
  let hi = ix.blocks.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (ix.blocks[mid].startLine <= line) lo = mid;
    else hi = mid - 1;
  }
  return ix.blocks[lo];
}

/**
 * Byte offset where 0-based line `line` starts (the end of the line before it; totalBytes for
 * totalLines), or null when the index does not record it: only lines near a block's edges are.
 */
export function lineBoundary(ix: BlockIndex, line: number): number | null {
  if (line <= 0) return 0;
  if (line >= ix.totalLines) return ix.totalBytes;
  const b = blockOfLine(ix, line);
  const k = line - b.startLine;
  if (k === 0) return b.start;
  if (k - 1 < b.firstEnds.length) return b.firstEnds[k - 1];
  const fromEnd = k - (b.lines - b.lastStarts.length);
  return fromEnd >= 0 ? b.lastStarts[fromEnd] : null;
}
