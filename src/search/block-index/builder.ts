/**
 * Builds a search index (./format.ts) from a stream's bytes in chunks of any size: whoever holds the bytes as a stream
 * builds it (the agent, before uploading them). Pure: no I/O.
 */
import { DIGITS_MAX, DigitRangeBuilder } from './digits.ts';
import { type EncodedBlock, encode, SEARCH_BLOCK_BYTES, SEARCH_INDEX_CONTEXT_MAX, TRAILING_LINES } from './format.ts';

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
  /** Digits of the digit run being read (0: none), and its value while it has at most DIGITS_MAX. */
  private runDigits = 0;
  private runValue = 0;
  /** The open block's digit runs. */
  private readonly digitRuns = new DigitRangeBuilder();
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
    let digits = this.runDigits;
    let value = this.runValue;
    const full = this.full;
    const shift = 32 - FILTER_MAX_LOG2;
    const base = this.total;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      let c: number;
      if (digits > 0 && (b < 0x30 || b > 0x39)) {
        // Any byte but a digit ends a digit run (a non-ASCII one too: no character it starts is an ASCII digit).
        this.digitRuns.add(digits, value);
        digits = 0;
      }
      if (pend === 0 && b < 0x80) {
        // The common case: an ASCII byte, no character pending.
        if (b === NL) {
          run = 0;
          this.lineEnd(base + i + 1);
          continue;
        }
        if (b >= 0x30 && b <= 0x39) {
          if (digits < DIGITS_MAX) value = digits === 0 ? b - 0x30 : value * 10 + (b - 0x30);
          digits++;
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
    this.runDigits = digits;
    this.runValue = value;
    this.total += chunk.length;
    this.block.bytes = this.total - this.closedBytes;
  }

  /** The encoded index of everything pushed. */
  finish(): Uint8Array {
    const bl = this.block;
    if (this.runDigits > 0) this.digitRuns.add(this.runDigits, this.runValue);
    this.runDigits = 0;
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
    this.out.push({
      bytes: bl.bytes,
      lines: bl.lines,
      firstEnds: bl.firstEnds,
      lastStarts: bl.lastStarts,
      filter,
      filterLog2: filter ? log2 : 0,
      digits: this.digitRuns.take(),
    });
    this.closedBytes += bl.bytes;
    this.block = newBlock();
  }
}

const newBlock = (): OpenBlock => ({ bytes: 0, lines: 0, firstEnds: [], lastStarts: [], lineStart: 0 });
