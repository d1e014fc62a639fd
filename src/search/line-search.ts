/**
 * Searching a job's output without loading it: the body streams through once, line by line,
 * and only a ring buffer of context lines plus the excerpts being kept stay in memory.
 * Pure (no bindings): used by `query_output` on R2 bodies and by the output shaper on inline text.
 */
import { LINE_CAP, TRUNCATED_SUFFIX, type Excerpt } from '../contracts/tools.ts';
import type { StreamName } from '../contracts/agent-protocol.ts';
import { asciiNeedles, ByteLineScan, type LineSink } from './byte-line-scan.ts';
import { Batches } from './batches.ts';

export interface SearchOptions {
  terms: string[];
  maxExcerpts: number;
  contextLines: number;
  source: StreamName;
  /**
   * Longest excerpt kept; a longer run of matches continues in a new excerpt. Bounds memory
   * when every line matches. Default 200.
   */
  maxExcerptLines?: number;
}

export interface SearchResult {
  excerpts: Excerpt[];
  /** Matching lines (a line with several hits counts once), including those past maxExcerpts. */
  matchCount: number;
  totalLines: number;
  totalBytes: number;
}

const DEFAULT_MAX_EXCERPT_LINES = 200;

/** > LINE_CAP chars → first LINE_CAP chars + TRUNCATED_SUFFIX (never splitting a surrogate pair). */
export function capLine(line: string): string {
  if (line.length <= LINE_CAP) return line;
  let end = LINE_CAP;
  const c = line.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end -= 1;
  return line.slice(0, end) + TRUNCATED_SUFFIX;
}

interface Window {
  start: number;
  lines: string[];
  lastMatch: number;
}

/**
 * The search state machine, fed decoded text in any chunking. `push` may split a line
 * anywhere (even inside a term or between '\r' and '\n'); results do not depend on chunking.
 */
export class LineSearch implements LineSink {
  private readonly terms: string[];
  private readonly carryLen: number;
  private readonly options: Required<SearchOptions>;

  private lineNo = 0;
  matchCount = 0;
  private readonly excerpts: Excerpt[] = [];
  private cur: Window | null = null;
  // Last line of the last closed excerpt: a new window never reaches back into it.
  private closedEnd = 0;
  // Ring of the last `contextLines` capped lines: leading context for the next match.
  private readonly ring: string[];
  private ringPos = 0;

  // The line being assembled across pushes: a capped head, its length, and a lowercased tail
  // long enough to catch a term that straddles two pushes.
  private partHead = '';
  private partLen = 0;
  private partMatched = false;
  private partCarry = '';

  constructor(o: SearchOptions) {
    // Case-insensitive by lowercasing both sides; a term spanning lines can never match.
    this.terms = [...new Set(o.terms.map((t) => t.toLowerCase()).filter((t) => t.length > 0 && !t.includes('\n')))];
    this.carryLen = Math.max(0, ...this.terms.map((t) => t.length)) - 1;
    this.options = {
      ...o,
      maxExcerpts: Math.max(0, Math.floor(o.maxExcerpts)),
      contextLines: Math.max(0, Math.floor(o.contextLines)),
      maxExcerptLines: Math.max(1, Math.floor(o.maxExcerptLines ?? DEFAULT_MAX_EXCERPT_LINES)),
    };
    this.ring = new Array<string>(this.options.contextLines).fill('');
  }

  push(text: string): void {
    if (text.length === 0) return;
    const lower = text.toLowerCase();
    // Lowercasing rarely changes length (e.g. 'İ'); only then must positions be recomputed per line.
    const aligned = lower.length === text.length;
    // Next hit of each term at or after the current line (Infinity: none left in this push).
    const nextHit = this.terms.map(() => -1);
    let pos = 0;
    for (;;) {
      if (aligned && this.cur === null && this.partLen === 0) pos = this.skipQuietLines(text, lower, pos, nextHit);
      const nl = text.indexOf('\n', pos);
      const end = nl === -1 ? text.length : nl;
      if (nl !== -1 && this.partLen === 0) {
        // Fast path: a whole line inside this push.
        let matched = false;
        if (aligned) {
          for (let i = 0; i < this.terms.length; i++) {
            if (nextHit[i] < pos) {
              const h = lower.indexOf(this.terms[i], pos);
              nextHit[i] = h === -1 ? Infinity : h;
            }
            if (nextHit[i] + this.terms[i].length <= end) {
              matched = true;
              break;
            }
          }
        } else {
          const l = text.slice(pos, end).toLowerCase();
          matched = this.terms.some((t) => l.includes(t));
        }
        const lineEnd = end > pos && text.charCodeAt(end - 1) === 13 ? end - 1 : end;
        this.line(text.slice(pos, Math.min(lineEnd, pos + LINE_CAP + 1)), lineEnd - pos, matched);
      } else {
        this.appendPart(text, aligned ? lower : null, pos, end);
        if (nl !== -1) this.finishPart();
      }
      if (nl === -1) return;
      pos = nl + 1;
    }
  }

  /**
   * Fast-forward over whole lines that cannot be part of an excerpt: no window is open and no
   * term occurs before the line of the next hit, so only the last `contextLines` of them (the
   * ring) matter. They are counted, never sliced — this is what makes a large artifact cheap.
   */
  private skipQuietLines(text: string, lower: string, pos: number, nextHit: number[]): number {
    let hit = Infinity;
    for (let i = 0; i < this.terms.length; i++) {
      if (nextHit[i] < pos) {
        const h = lower.indexOf(this.terms[i], pos);
        nextHit[i] = h === -1 ? Infinity : h;
      }
      if (nextHit[i] < hit) hit = nextHit[i];
    }
    // Start of the line holding the hit (or of the unfinished last line): lines before it are quiet.
    const limit = text.lastIndexOf('\n', (hit === Infinity ? text.length : hit) - 1) + 1;
    if (limit <= pos) return pos;
    // Keep the last C quiet lines for the ring; skip the ones before them.
    let keepFrom = limit;
    for (let j = 0; j < this.options.contextLines && keepFrom > pos; j++) keepFrom = keepFrom >= 2 ? text.lastIndexOf('\n', keepFrom - 2) + 1 : 0;
    if (keepFrom < pos) keepFrom = pos;
    let skipped = 0;
    for (let p = text.indexOf('\n', pos); p !== -1 && p < keepFrom; p = text.indexOf('\n', p + 1)) skipped++;
    this.lineNo += skipped;
    return keepFrom;
  }

  /** No excerpt is open and no line is half read: whole lines may be skipped (see `skipLines`). */
  get idle(): boolean {
    return this.cur === null && this.partLen === 0;
  }

  /**
   * Counts n whole lines the caller knows hold no term, without their text. Only while idle,
   * and the caller pushes the last `contextLines` lines before the next hit as text (the ring).
   */
  skipLines(n: number): void {
    this.lineNo += n;
  }

  /** End of input: a last line without '\n' still counts. */
  finish(totalBytes: number): SearchResult {
    if (this.partLen > 0) this.finishPart();
    this.closeWindow();
    return { excerpts: this.excerpts, matchCount: this.matchCount, totalLines: this.lineNo, totalBytes };
  }

  private appendPart(text: string, lower: string | null, from: number, to: number): void {
    if (to === from) return;
    if (this.partHead.length < LINE_CAP + 2) this.partHead += text.slice(from, Math.min(to, from + LINE_CAP + 2 - this.partHead.length));
    this.partLen += to - from;
    if (this.partMatched || this.terms.length === 0) return;
    const seg = lower ? lower.slice(from, to) : text.slice(from, to).toLowerCase();
    const s = this.partCarry + seg;
    if (this.terms.some((t) => s.includes(t))) this.partMatched = true;
    else this.partCarry = this.carryLen > 0 ? s.slice(-this.carryLen) : '';
  }

  private finishPart(): void {
    let len = this.partLen;
    let head = this.partHead;
    // A '\r' ending the line (CRLF) is not content. On a line longer than the head the '\r' is
    // not shown and the line is capped either way.
    if (len > 0 && len <= head.length && head.charCodeAt(len - 1) === 13) {
      head = head.slice(0, len - 1);
      len -= 1;
    }
    this.line(head, len, this.partMatched);
    this.partHead = '';
    this.partLen = 0;
    this.partMatched = false;
    this.partCarry = '';
  }

  /** One complete line: `head` holds at least its first LINE_CAP+1 chars, `len` its full length. */
  private line(head: string, len: number, matched: boolean): void {
    const n = ++this.lineNo;
    const C = this.options.contextLines;
    if (matched) this.matchCount++;
    const text = len > LINE_CAP ? capLine(head) : head.length > len ? head.slice(0, len) : head;
    const cur = this.cur;
    if (matched) {
      const curEnd = cur ? cur.start + cur.lines.length - 1 : 0;
      if (cur && n - C <= curEnd + 1) {
        // Overlapping or adjacent to the open window: the lines between come from the ring.
        for (let k = curEnd + 1; k < n; k++) this.addToWindow(this.ringLine(n - k), k, false);
        // Filling the gap may have hit maxExcerptLines and closed the window.
        if (this.cur) this.addToWindow(text, n, true);
        else this.openWindow(n, text);
      } else {
        this.closeWindow();
        this.openWindow(n, text);
      }
    } else if (cur && n <= cur.lastMatch + C && cur.start + cur.lines.length === n) {
      this.addToWindow(text, n, false);
    } else if (cur && n > cur.lastMatch + 2 * C + 1) {
      // No later match can merge into it any more.
      this.closeWindow();
    }
    if (C > 0) {
      this.ring[this.ringPos] = text;
      this.ringPos = (this.ringPos + 1) % C;
    }
  }

  /** A new excerpt around the match on line n, with leading context not already in an excerpt. */
  private openWindow(n: number, text: string): void {
    if (this.excerpts.length >= this.options.maxExcerpts) return;
    const first = Math.max(1, n - this.options.contextLines, this.closedEnd + 1, n - this.options.maxExcerptLines + 1);
    const cur: Window = { start: first, lines: [], lastMatch: n };
    for (let k = first; k < n; k++) cur.lines.push(this.ringLine(n - k));
    cur.lines.push(text);
    this.cur = cur;
  }

  /** The line `back` lines before the current one (1 = the previous line), from the ring. */
  private ringLine(back: number): string {
    const C = this.options.contextLines;
    return this.ring[(this.ringPos - back + C * 2) % C];
  }

  private addToWindow(line: string, n: number, matched: boolean): void {
    let cur = this.cur;
    if (!cur) return;
    if (cur.lines.length >= this.options.maxExcerptLines) {
      // A run of matches longer than an excerpt may be: keep going in a fresh excerpt.
      this.closeWindow();
      if (!matched || this.excerpts.length >= this.options.maxExcerpts) return;
      cur = this.cur = { start: n, lines: [], lastMatch: n };
    }
    cur.lines.push(line);
    if (matched) cur.lastMatch = n;
  }

  private closeWindow(): void {
    const cur = this.cur;
    if (!cur) return;
    this.cur = null;
    this.closedEnd = cur.start + cur.lines.length - 1;
    this.excerpts.push({
      lineStart: cur.start,
      lineEnd: cur.start + cur.lines.length - 1,
      content: cur.lines.join('\n'),
      source: this.options.source,
    });
  }
}

/** Bytes of the body the scan takes at once (./batches.ts gathers the stream's chunks into them). */
const SEARCH_BATCH_BYTES = 1024 * 1024;

/**
 * Streams the body once, line by line (1-based line numbers); case-insensitive substring match of
 * any term; windows of ±contextLines around matches, overlapping/adjacent windows merged; keeps at
 * most maxExcerpts windows but counts every matching line; every line capped at LINE_CAP.
 * Invalid UTF-8 is decoded with U+FFFD replacement.
 */
export async function searchStream(body: ReadableStream<Uint8Array>, o: SearchOptions, batchBytes: number = SEARCH_BATCH_BYTES): Promise<SearchResult> {
  const s = new LineSearch(o);
  // All-ASCII terms (the usual query): hits are found in the bytes and only the lines around
  // them are decoded. Otherwise every byte is decoded and searched as text.
  const needles = asciiNeedles(o.terms);
  const scan = needles ? new ByteLineScan(s, needles, o.contextLines) : null;
  const decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: false });
  // Small chunks (R2 streams hand out a few KiB at a time) are batched: the per-push setup then
  // happens once per ~1 MiB instead of once per chunk. Memory stays bounded by the batch.
  const batches = new Batches(batchBytes, (batch) => {
    if (scan) scan.push(batch);
    else s.push(decoder.decode(batch, { stream: true }));
  });
  const reader = body.getReader();
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      batches.push(value);
    }
    batches.flush();
    if (scan) scan.finish();
    else s.push(decoder.decode());
  } catch (e) {
    // Stop the producer (an R2 body) rather than leave it streaming into nothing.
    await reader.cancel(e).catch(() => {});
    throw e;
  } finally {
    reader.releaseLock();
  }
  return s.finish(bytes);
}

/** The same search over text already in memory (inline output). totalBytes is its UTF-8 length. */
export function searchText(text: string, o: SearchOptions): SearchResult {
  const s = new LineSearch(o);
  s.push(text);
  return s.finish(new TextEncoder().encode(text).byteLength);
}
