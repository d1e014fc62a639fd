/**
 * Artifact search with and without the block index (src/search/block-index.ts), in one run: a
 * build-like log of the given size is generated in memory, its index built as the agent builds it
 * (timed: that is the agent's cost per upload), then `query_output`'s per-stream search runs both
 * ways over the same bytes handed out in 64 KiB chunks like an R2 body — the whole scan
 * (`searchStream`) and the narrowed one (index parse + ranged reads of the candidate blocks). The
 * results are compared, so a figure never comes from a wrong answer. Module level: no gateway, no
 * R2 emulation (bench/output.ts measures query_output end to end).
 *
 * `node bench/search.ts [megabytes…=100 1000] [--runs 5]`
 */
import { BlockIndexBuilder, decodeBlockIndex } from '../src/search/block-index.ts';
import { searchIndexed } from '../src/search/indexed-search.ts';
import { searchStream, type SearchOptions } from '../src/search/line-search.ts';

const CHUNK = 64 * 1024;
/** Lines of the rare term: three in the whole log, wherever its size. */
const RARE_AT = [0.137, 0.5, 0.861];
/** The rare term, and how many lines of the log hold it. */
export const RARE_TERM = 'out of memory';
export const RARE_LINES = RARE_AT.length;

/** Line `i` of the build-like log; `rare` makes it one of the rare-term lines ("out of memory"). */
function logLine(i: number, rare: boolean): string {
  if (rare) return `[${String(i).padStart(8, '0')}] FATAL worker_${i % 16} ${RARE_TERM}: heap limit reached (oom-kill id ${i.toString(16)})\n`;
  if (i % 20_000 === 0) return `src/pkg_${i % 97}/mod_${i % 1013}.ts(${i % 400},${i % 80}): error TS2322: Type 'string' is not assignable to type 'number'.\n`;
  if (i % 7 === 0) return `[${String(i).padStart(8, '0')}] WARN  deprecated option --legacy-peer-deps used by workspace pkg_${i % 97}\n`;
  return `[${String(i).padStart(8, '0')}] INFO  compiled src/pkg_${i % 97}/mod_${i % 1013}.ts in ${i % 250}ms (cache ${i % 3 ? 'hit' : 'miss'}) sha ${((i * 2654435761) >>> 0).toString(16)}\n`;
}

/**
 * A build-like log of about `megabytes` MiB in pieces of up to `pieceBytes`: mostly distinct INFO
 * lines, a TS2322 error every 20,000 lines and "out of memory" on exactly three lines (RARE_AT).
 */
export function* buildLogPieces(megabytes: number, pieceBytes: number = 4 * 1024 * 1024): Generator<Uint8Array> {
  const total = Math.floor(megabytes * 1024 * 1024);
  const rareAt = RARE_AT.map((f) => Math.floor(f * total));
  const enc = new TextEncoder();
  let piece = new Uint8Array(Math.min(pieceBytes, total));
  let used = 0;
  let next = 0;
  let pos = 0;
  for (let i = 1; pos < total; i++) {
    const rare = next < rareAt.length && pos >= rareAt[next];
    const line = logLine(i, rare);
    // The last line may not fit the total: the log ends before it, as a whole line.
    if (pos + line.length > total) break;
    if (used + line.length > piece.length) {
      yield piece.subarray(0, used);
      piece = new Uint8Array(Math.min(pieceBytes, total - pos));
      used = 0;
    }
    used += enc.encodeInto(line, piece.subarray(used)).written;
    pos += line.length;
    if (rare) next++;
  }
  if (used > 0) yield piece.subarray(0, used);
}

function buildLog(megabytes: number): Uint8Array {
  const out = new Uint8Array(Math.floor(megabytes * 1024 * 1024));
  let pos = 0;
  for (const p of buildLogPieces(megabytes)) {
    out.set(p, pos);
    pos += p.length;
  }
  return out.subarray(0, pos);
}

function chunked(bytes: Uint8Array): ReadableStream<Uint8Array> {
  let pos = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (pos >= bytes.length) return c.close();
      c.enqueue(bytes.subarray(pos, pos + CHUNK));
      pos += CHUNK;
    },
  });
}

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const round = (x: number) => Math.round(x * 10) / 10;

export interface SearchFigures {
  megabytes: number;
  indexBuildMs: number;
  indexBytes: number;
  queries: { terms: string[]; fullScanMs: number; indexedMs: number; ratio: number; readMb: number; matches: number; narrowed: boolean }[];
}

export async function benchIndexedSearch(megabytes: number, runs: number): Promise<SearchFigures> {
  const log = buildLog(megabytes);
  const t0 = performance.now();
  const builder = new BlockIndexBuilder();
  for (let i = 0; i < log.length; i += CHUNK) builder.push(log.subarray(i, i + CHUNK));
  const encoded = builder.finish();
  const indexBuildMs = performance.now() - t0;
  const queries: SearchFigures['queries'] = [];
  for (const terms of [['out of memory'], ['error TS2322']]) {
    const o: SearchOptions = { terms, maxExcerpts: 10, contextLines: 3, source: 'stdout' };
    const full: number[] = [];
    const indexed: number[] = [];
    let readMb = 0;
    let matches = 0;
    let narrowed = false;
    for (let r = 0; r < runs; r++) {
      const a = performance.now();
      const whole = await searchStream(chunked(log), o);
      full.push(performance.now() - a);
      const b = performance.now();
      const ix = decodeBlockIndex(encoded, log.length);
      const got = await searchIndexed(async (offset, length) => chunked(log.subarray(offset, offset + length)), ix, o);
      // A query the index cannot narrow is scanned whole, as query_output does.
      const result = got.kind === 'searched' ? got.result : await searchStream(chunked(log), o);
      indexed.push(performance.now() - b);
      if (JSON.stringify(result) !== JSON.stringify(whole)) throw new Error(`indexed search of ${JSON.stringify(terms)} differs from the whole scan`);
      narrowed = got.kind === 'searched';
      readMb = got.kind === 'searched' ? got.ranges.reduce((n, x) => n + x.toByte - x.fromByte, 0) / 1024 / 1024 : log.length / 1024 / 1024;
      matches = whole.matchCount;
    }
    queries.push({
      terms,
      fullScanMs: round(p50(full)),
      indexedMs: round(p50(indexed)),
      ratio: round(p50(full) / p50(indexed)),
      readMb: round(readMb),
      matches,
      narrowed,
    });
  }
  return { megabytes: round(log.length / 1024 / 1024), indexBuildMs: round(indexBuildMs), indexBytes: encoded.length, queries };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const runsAt = args.indexOf('--runs');
  const runs = runsAt >= 0 ? Number(args[runsAt + 1]) : 5;
  const sizes = args.filter((a, i) => !a.startsWith('--') && i !== runsAt + 1 && Number(a) > 0).map(Number);
  await benchIndexedSearch(4, 2); // warm-up
  for (const mb of sizes.length ? sizes : [100, 1000]) {
    const f = await benchIndexedSearch(mb, runs);
    console.log(
      `${f.megabytes} MB: index built in ${f.indexBuildMs} ms, ${(f.indexBytes / 1024).toFixed(0)} KiB (${((100 * f.indexBytes) / (f.megabytes * 1024 * 1024)).toFixed(2)} % of the body)`,
    );
    for (const q of f.queries) {
      console.log(
        `  ${JSON.stringify(q.terms)} (${q.matches} matches): whole scan p50 ${q.fullScanMs} ms, indexed p50 ${q.indexedMs} ms (${q.ratio}×, ${q.narrowed ? `${q.readMb} MB read` : 'not narrowed: whole scan'})`,
      );
    }
    console.log(JSON.stringify(f));
  }
}
