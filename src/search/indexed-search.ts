/**
 * The artifact search narrowed by the stream's block index (block-index.ts): only the blocks whose
 * filter may hold a term are read — each with the context lines before it and the lines after it
 * that an open excerpt needs to close — through the same line search as a whole scan; the lines in
 * between are counted from the index, never read. Results are the same as `searchStream` over
 * the whole body; a query the index cannot narrow, or ranges that disagree with the index, give
 * `unusable` and the caller scans the whole body instead.
 */
import { asciiNeedles, ByteLineScan, countNewlines } from './byte-line-scan.ts';
import { type BlockIndex, lineBoundary, mayMatch, termProbes } from './block-index.ts';
import { Batches } from './batches.ts';
import { LineSearch, type SearchOptions, type SearchResult } from './line-search.ts';

/**
 * Ranged reads of one stream's body at most: candidate ranges further apart are joined (the bytes
 * between are read too). Each read is a subrequest, and a Worker has 50 per request on the Free plan
 * (src/script/request-budget.ts counts them).
 */
const SEARCH_MAX_RANGES = 4;
/** R2 reads of one stream's search at most: its index, its ranges, and a whole scan if a range disagrees with the index. */
export const SEARCH_READS_PER_STREAM = 1 + SEARCH_MAX_RANGES + 1;
/** Past this share of the body in candidate ranges, one whole scan is as cheap. */
const MAX_READ_SHARE = 0.5;
const BATCH_BYTES = 1024 * 1024;
const NL = 0x0a;

/** Bytes [offset, offset+length) of the body as a stream, or null when the body is gone. */
export type ReadRange = (offset: number, length: number) => Promise<ReadableStream<Uint8Array> | null>;

/** Lines [fromLine, toLine) of the body, which are bytes [fromByte, toByte). */
interface LineRange {
  fromLine: number;
  toLine: number;
  fromByte: number;
  toByte: number;
}

export type SearchPlan = { ok: true; ranges: LineRange[] } | { ok: false; why: string };

/** `unusable` with `mismatch`: what was read contradicts the index (a corrupt or lying index, worth a warning); without: the query is not one it narrows. */
export type IndexedOutcome =
  | { kind: 'searched'; result: SearchResult; ranges: LineRange[] }
  | { kind: 'unusable'; why: string; mismatch?: true }
  | { kind: 'gone' };

/** Which ranges of the body a query must read, or why the index cannot narrow it (`maxReadShare`: of the body, past which a whole scan is the better plan). */
export function planRanges(ix: BlockIndex, terms: string[], contextLines: number, maxReadShare: number = MAX_READ_SHARE): SearchPlan {
  const probes = termProbes(terms);
  if (!probes) return { ok: false, why: 'a term is shorter than 3 characters or not ASCII' };
  const C = Math.max(0, Math.floor(contextLines));
  if (C > ix.contextMax) return { ok: false, why: `the index keeps ${ix.contextMax} context lines, the query asks for ${C}` };
  const spans: { from: number; to: number }[] = [];
  for (const b of ix.blocks) {
    if (!mayMatch(b, probes)) continue;
    // Leading context before the block; after it, the 2C+2 lines through which an excerpt still open closes (line-search.ts).
    const from = Math.max(0, b.startLine - C);
    const to = Math.min(ix.totalLines, b.startLine + b.lines + 2 * C + 2);
    const last = spans[spans.length - 1];
    if (last && from <= last.to) last.to = Math.max(last.to, to);
    else spans.push({ from, to });
  }
  const ranges: LineRange[] = [];
  for (const s of spans) {
    const fromByte = lineBoundary(ix, s.from);
    const toByte = lineBoundary(ix, s.to);
    if (fromByte === null || toByte === null) return { ok: false, why: 'the index does not record the offsets of the lines around a block' };
    ranges.push({ fromLine: s.from, toLine: s.to, fromByte, toByte });
  }
  while (ranges.length > SEARCH_MAX_RANGES) {
    let best = 0;
    for (let i = 1; i + 1 < ranges.length; i++) if (ranges[i + 1].fromByte - ranges[i].toByte < ranges[best + 1].fromByte - ranges[best].toByte) best = i;
    const [a, b] = [ranges[best], ranges[best + 1]];
    ranges.splice(best, 2, { fromLine: a.fromLine, toLine: b.toLine, fromByte: a.fromByte, toByte: b.toByte });
  }
  const read = ranges.reduce((n, r) => n + r.toByte - r.fromByte, 0);
  if (read > ix.totalBytes * maxReadShare) return { ok: false, why: 'the terms may occur in most blocks' };
  return { ok: true, ranges };
}

/**
 * Searches the body through its index. Each range is read with the byte before it, which must be a
 * line end, and must hold exactly the lines the index says: a range that does not is `unusable`
 * (the caller scans the whole body), so a wrong index cannot shift what is read, only what is skipped.
 */
export async function searchIndexed(read: ReadRange, ix: BlockIndex, o: SearchOptions, maxReadShare: number = MAX_READ_SHARE): Promise<IndexedOutcome> {
  const plan = planRanges(ix, o.terms, o.contextLines, maxReadShare);
  if (!plan.ok) return { kind: 'unusable', why: plan.why };
  const needles = asciiNeedles(o.terms);
  if (!needles) return { kind: 'unusable', why: 'a term is not ASCII' };
  const s = new LineSearch(o);
  // Each range is read with the byte before it (a line end, checked below), if it has one.
  const lead = (r: LineRange) => (r.fromByte > 0 ? 1 : 0);
  // Every range is asked for at once, so the reads' round trips overlap; they are scanned in order.
  const reads = plan.ranges.map((r) => read(r.fromByte - lead(r), r.toByte - r.fromByte + lead(r)));
  // A read that fails while an earlier range is scanned is reported when its turn comes, or let go.
  for (const p of reads) p.catch(() => {});
  let line = 0;
  let taken = 0;
  try {
    for (const r of plan.ranges) {
      if (r.fromLine > line) {
        if (!s.idle) return { kind: 'unusable', why: 'an excerpt is still open where the index skips lines', mismatch: true };
        s.skipLines(r.fromLine - line);
      }
      const body = await reads[taken++];
      if (!body) return { kind: 'gone' };
      const got = await scanRange(body, new ByteLineScan(s, needles, o.contextLines, r.fromByte === 0), lead(r), r.toByte - r.fromByte);
      const lines = r.toLine - r.fromLine;
      const atEnd = r.toByte === ix.totalBytes;
      const linesOk = got.newlines === lines || (atEnd && got.last !== NL && got.newlines === lines - 1);
      if (got.bytes !== r.toByte - r.fromByte || !got.leadOk || !linesOk || (!atEnd && got.last !== NL)) {
        return { kind: 'unusable', why: `bytes ${r.fromByte}..${r.toByte} do not hold lines ${r.fromLine + 1}..${r.toLine} as the index says`, mismatch: true };
      }
      line = r.toLine;
    }
  } finally {
    // Ranges never scanned (the search ended early) are let go.
    for (const p of reads.slice(taken))
      p.then(
        (b) => b?.cancel(),
        () => {},
      ).catch(() => {});
  }
  if (line < ix.totalLines) {
    if (!s.idle) return { kind: 'unusable', why: 'an excerpt is still open where the index skips lines', mismatch: true };
    s.skipLines(ix.totalLines - line);
  }
  return { kind: 'searched', result: s.finish(ix.totalBytes), ranges: plan.ranges };
}

/** Feeds a range to the scan in batches; reports its size (without the lead byte), line ends and last byte. */
async function scanRange(
  body: ReadableStream<Uint8Array>,
  scan: ByteLineScan,
  lead: number,
  expect: number,
): Promise<{ bytes: number; newlines: number; last: number; leadOk: boolean }> {
  const reader = body.getReader();
  let bytes = -lead;
  let newlines = 0;
  let last = -1;
  let leadOk = lead === 0;
  const batches = new Batches(
    BATCH_BYTES,
    (batch) => {
      newlines += countNewlines(batch, 0, batch.length);
      last = batch[batch.length - 1];
      scan.push(batch);
    },
    expect,
  );
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let chunk = value;
      if (bytes < 0 && chunk.length > 0) {
        leadOk = chunk[0] === NL;
        chunk = chunk.subarray(1);
        bytes = 0;
      }
      bytes += chunk.length;
      if (chunk.length === 0) continue;
      batches.push(chunk);
    }
    batches.flush();
    scan.finish();
  } catch (e) {
    await reader.cancel(e).catch(() => {});
    throw e;
  } finally {
    reader.releaseLock();
  }
  return { bytes: Math.max(0, bytes), newlines, last, leadOk };
}
