/**
 * The byte-level front of the artifact search, for queries whose terms are all ASCII (after
 * lowercasing): it finds candidate hits in the raw UTF-8 bytes (ASCII case folded, native
 * `Buffer.indexOf`), counts the lines between them without decoding, and hands the line search
 * only the text around hits. Which lines match is still decided by the line search (a `LineSink`)
 * on decoded text, so results are the same as decoding everything; only the quiet stretches are skipped.
 *
 * Why bytes are enough: in UTF-8 an ASCII byte is always that character (also after invalid
 * sequences, which decode to U+FFFD), and '\n' bytes are exactly the line breaks. Lowercasing
 * turns only two non-ASCII characters into ASCII ones ('İ' → 'i̇', Kelvin sign 'K' → 'k'); their
 * byte forms are searched as candidates too when a term holds that letter.
 */
import { Buffer } from 'node:buffer';

/** What the scan feeds: the line search (`LineSearch` in line-search.ts), declared here so the scan imports nothing of it. */
export interface LineSink {
  /** Decoded text in any chunking (a line may be split anywhere). */
  push(text: string): void;
  /** No excerpt is open and no line is half read: whole lines may be skipped. */
  readonly idle: boolean;
  /** Counts n whole lines that hold no term, without their text (only while idle). */
  skipLines(n: number): void;
}

const NL = 0x0a;
const UTF8_BOM = [0xef, 0xbb, 0xbf];
/** Non-ASCII characters whose lowercase form contains an ASCII letter, with that letter. */
const FOLDS_TO_ASCII: { letter: string; bytes: number[] }[] = [
  { letter: 'i', bytes: [0xc4, 0xb0] }, // U+0130 'İ'
  { letter: 'k', bytes: [0xe2, 0x84, 0xaa] }, // U+212A KELVIN SIGN
];
/** Text handed to the line search after a hit is at least this long, so dense hits cost one decode per span, not per line. */
const MIN_TEXT_SPAN = 4096;

/** Lowercased, deduplicated terms as the line search uses them; null when one is not ASCII (the byte path does not apply). */
export function asciiNeedles(terms: string[]): Uint8Array[] | null {
  const lowered = [...new Set(terms.map((t) => t.toLowerCase()).filter((t) => t.length > 0 && !t.includes('\n')))];
  if (lowered.some((t) => /[^\x00-\x7f]/.test(t))) return null;
  const needles = lowered.map((t) => Uint8Array.from(t, (c) => c.charCodeAt(0)));
  for (const f of FOLDS_TO_ASCII) if (lowered.some((t) => t.includes(f.letter))) needles.push(Uint8Array.from(f.bytes));
  return needles;
}

const CASE_BIT = 0x20;
const CASE_BITS_64 = 0x2020202020202020n;

/**
 * dst[i] = src[i] | 0x20 for i < src.length: every ASCII letter folds to lowercase. A few other
 * bytes fold together too ('@' and '`', '[' and '{', '\n' and '*', control bytes and punctuation…), so a
 * needle folded the same way finds every case-insensitive match plus a few candidates that the line
 * search, which decides on decoded text, turns down. One OR per 8 bytes (V8 keeps BigUint64 array
 * arithmetic unboxed), about twice as fast as an exact A–Z fold.
 */
export function foldCaseLoosely(src: Uint8Array, dst: Uint8Array): void {
  const len = src.length;
  let i = 0;
  if ((dst.byteOffset & 7) === 0) {
    const words = len >>> 3;
    const d = new BigUint64Array(dst.buffer, dst.byteOffset, words);
    if ((src.byteOffset & 7) === 0) {
      const s = new BigUint64Array(src.buffer, src.byteOffset, words);
      for (let k = 0; k < words; k++) d[k] = s[k] | CASE_BITS_64;
    } else {
      dst.set(src.subarray(0, words << 3));
      for (let k = 0; k < words; k++) d[k] |= CASE_BITS_64;
    }
    i = words << 3;
  }
  for (; i < len; i++) dst[i] = src[i] | CASE_BIT;
}

/** Past this many line ends per KiB, counting them word by word beats finding each one natively. */
const DENSE_LINES_PER_KIB = 24;

/**
 * Number of '\n' bytes in b[from, to). Lines of ordinary length are found one by one with the native
 * byte search; once they turn out short (numbers, one per line), the rest is counted four bytes at a time.
 */
export function countNewlines(b: Uint8Array, from: number, to: number): number {
  if (to <= from) return 0;
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  let n = 0;
  let p = from;
  for (;;) {
    const start = p;
    for (let k = 0; k < 64; k++) {
      const nl = buf.indexOf(NL, p);
      if (nl === -1 || nl >= to) return n;
      n++;
      p = nl + 1;
    }
    if ((p - start) * DENSE_LINES_PER_KIB < 64 * 1024) return n + countNewlinesByWord(b, p, to);
  }
}

/** Number of '\n' bytes in b[from, to), four bytes at a time (any alignment). */
export function countNewlinesByWord(b: Uint8Array, from: number, to: number): number {
  if (to <= from) return 0;
  let n = 0;
  let i = from;
  for (; i < to && ((b.byteOffset + i) & 3) !== 0; i++) if (b[i] === NL) n++;
  const words = (to - i) >>> 2;
  if (words > 0) {
    const w32 = new Int32Array(b.buffer, b.byteOffset + i, words);
    // Per byte, bit 7 of `z` is set iff that byte is '\n' (no carry crosses bytes); the bits are
    // summed per byte lane and the lanes added up every 64 words, before a lane can overflow.
    let lanes = 0;
    for (let k = 0; k < words; k++) {
      const t = w32[k] ^ 0x0a0a0a0a;
      lanes += (~(((t & 0x7f7f7f7f) + 0x7f7f7f7f) | t) & 0x80808080) >>> 7;
      if ((k & 63) === 63) {
        n += (lanes & 0xff) + ((lanes >>> 8) & 0xff) + ((lanes >>> 16) & 0xff) + (lanes >>> 24);
        lanes = 0;
      }
    }
    n += (lanes & 0xff) + ((lanes >>> 8) & 0xff) + ((lanes >>> 16) & 0xff) + (lanes >>> 24);
    i += words << 2;
  }
  for (; i < to; i++) if (b[i] === NL) n++;
  return n;
}

/**
 * Feeds one `LineSink` from raw bytes in batches of any size. Lines that span batches, and
 * everything near a hit, go through the line search as decoded text; whole quiet lines are only
 * counted. Memory: one case-folded copy of the current batch, when a term has a letter.
 */
export class ByteLineScan {
  private readonly decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  private readonly needles: Uint8Array[];
  private readonly fold: boolean;
  private readonly contextLines: number;
  private scratch = new Uint8Array(0);
  /** The first bytes, held until there are enough to tell whether they are a BOM. */
  private head: Uint8Array | null = new Uint8Array(0);
  /** The last byte given to the decoder was '\n' (or none yet): it holds no partial character. */
  private clean = true;

  private readonly sink: LineSink;

  /** `bodyStart`: the bytes start the body (a leading BOM is dropped); false for a range from its middle. */
  constructor(s: LineSink, needles: Uint8Array[], contextLines: number, bodyStart = true) {
    this.sink = s;
    if (!bodyStart) this.head = null;
    this.fold = needles.some((n) => n.some((c) => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)));
    // Folded as the batch is (foldCaseLoosely), when it is.
    this.needles = needles.map((n) => Buffer.from(this.fold ? n.map((c) => c | CASE_BIT) : n));
    this.contextLines = Math.max(0, Math.floor(contextLines));
  }

  push(batch: Uint8Array): void {
    if (this.head) {
      // A leading BOM is not content (as a decoder that honours it would drop it); later ones are.
      const h = this.head.length ? concat2(this.head, batch) : batch;
      if (h.length < UTF8_BOM.length) {
        // Kept past this push: a copy, as the caller may reuse the batch's memory (./batches.ts).
        this.head = h.slice();
        return;
      }
      this.head = null;
      batch = UTF8_BOM.every((c, i) => h[i] === c) ? h.subarray(UTF8_BOM.length) : h;
    }
    this.scan(batch);
  }

  finish(): void {
    if (this.head?.length) {
      const h = this.head;
      this.head = null;
      this.sink.push(new TextDecoder('utf-8', { fatal: false, ignoreBOM: false }).decode(h));
      return;
    }
    this.sink.push(this.decoder.decode());
  }

  private text(b: Uint8Array, from: number, to: number): void {
    if (to <= from) return;
    this.sink.push(this.decoder.decode(b.subarray(from, to), { stream: true }));
    this.clean = b[to - 1] === NL;
  }

  private scan(batch: Uint8Array): void {
    const len = batch.length;
    if (len === 0) return;
    // `f` is what hits are searched in (case folded when a needle has a letter); `b`, the batch
    // itself, is where line ends are found and what gets decoded. Without letters nothing is copied.
    const b = Buffer.from(batch.buffer, batch.byteOffset, len);
    let f = b;
    if (this.fold) {
      if (this.scratch.length < len) this.scratch = new Uint8Array(Math.max(len, this.scratch.length * 2));
      foldCaseLoosely(batch, this.scratch);
      f = Buffer.from(this.scratch.buffer, 0, len);
    }
    const C = this.contextLines;
    const nextHit = this.needles.map(() => -1);
    let pos = 0;
    while (pos < len) {
      if (!this.clean || !this.sink.idle) {
        // Inside a line begun earlier, or an excerpt is still open: text, through at least
        // the 2C+2 lines after which an excerpt without further matches has closed.
        let end = pos;
        for (let k = 0; k < 2 * C + 2 && end < len; k++) {
          const nl = b.indexOf(NL, end);
          end = nl === -1 ? len : nl + 1;
        }
        if (end < len && end - pos < MIN_TEXT_SPAN) {
          const nl = b.indexOf(NL, pos + MIN_TEXT_SPAN - 1);
          end = nl === -1 ? len : nl + 1;
        }
        this.text(b, pos, end);
        pos = end;
        continue;
      }
      let hit = Infinity;
      for (let i = 0; i < this.needles.length; i++) {
        if (nextHit[i] < pos) {
          const h = f.indexOf(this.needles[i], pos);
          nextHit[i] = h === -1 ? Infinity : h;
        }
        if (nextHit[i] < hit) hit = nextHit[i];
      }
      // Lines before `limit` are quiet: the hit's line start, or the unfinished last line's.
      const limit = Math.max(pos, lineStart(b, hit === Infinity ? len : hit));
      let keepFrom = limit;
      for (let j = 0; j < C && keepFrom > pos; j++) keepFrom = lineStart(b, keepFrom - 1);
      if (keepFrom < pos) keepFrom = pos;
      this.sink.skipLines(countNewlines(b, pos, keepFrom));
      // The last C quiet lines (leading context) and the hit's line, or the unfinished tail.
      let end = len;
      if (hit !== Infinity) {
        const nl = b.indexOf(NL, hit);
        end = nl === -1 ? len : nl + 1;
      }
      this.text(b, keepFrom, end);
      pos = end;
    }
  }
}

/** Index of the first byte of the line that holds position p (the byte after the previous '\n'). */
function lineStart(b: Buffer, p: number): number {
  if (p <= 0) return 0;
  return b.lastIndexOf(NL, p - 1) + 1;
}

function concat2(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
