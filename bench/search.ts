/**
 * The artifact search at module level on three bodies: `seq 1 12000000` (96.9 MB, numbers only), a build-like log of
 * 110 MB and one of 1 GB. Per body its index is built as the agent builds it (timed: the agent's cost per upload) and
 * measured against the body; per query the whole scan (`searchStream`: what runs when the index cannot narrow a query,
 * the fallback) and the narrowed search (index parse + ranged reads of the candidate blocks) run over the same bytes,
 * handed out in 64 KiB chunks like an R2 body. The results are compared, so a figure never comes from a wrong answer.
 * Wall time (p50) and this process's CPU time over the same runs: on a loaded host the two part. No gateway, no R2
 * emulation (bench/output.ts times query_output end to end); bench/search-targets.ts turns the figures into the
 * target rows, with the previous figures from bench/RESULTS.md.
 *
 * `node bench/search.ts [--runs 5] [--quick] [--no-1gb]` (`npm run bench:search`)
 */
import { BlockIndexBuilder, decodeBlockIndex } from '../src/search/block-index.ts';
import { searchIndexed } from '../src/search/indexed-search.ts';
import { searchStream, type SearchOptions } from '../src/search/line-search.ts';
import { searchTargetRows } from './search-targets.ts';

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

/** A build-like log of `bytes` (rounded down to a whole line), in one array. */
function buildLog(bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  let pos = 0;
  for (const p of buildLogPieces(bytes / 1024 / 1024)) {
    out.set(p, pos);
    pos += p.length;
  }
  return out.subarray(0, pos);
}

/** `seq 1 n`: the numbers 1 to n, one a line, written digit by digit (a decimal counter, no strings). */
export function seqBody(n: number): Uint8Array {
  let bytes = 0;
  for (let d = 1, lo = 1; lo <= n; d++, lo *= 10) bytes += (Math.min(n, lo * 10 - 1) - lo + 1) * (d + 1);
  const out = new Uint8Array(bytes);
  const digits = [0x31];
  let pos = 0;
  for (let i = 1; i <= n; i++) {
    for (const c of digits) out[pos++] = c;
    out[pos++] = 0x0a;
    let k = digits.length - 1;
    while (k >= 0 && digits[k] === 0x39) digits[k--] = 0x30;
    if (k >= 0) digits[k]++;
    else digits.unshift(0x31);
  }
  return out;
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

/** Wall and CPU time (ms) of one call; this process does nothing else meanwhile, so its CPU time is the call's. */
async function timed<T>(f: () => Promise<T>): Promise<{ value: T; wall: number; cpu: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await f();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { value, wall, cpu: (c.user + c.system) / 1000 };
}

export interface QueryFigures {
  terms: string[];
  matches: number;
  /** The whole scan (the fallback): p50 wall and CPU ms, and its rate in MB/s (10^6 bytes) of wall time. */
  whole: { wallMs: number; cpuMs: number; mbPerS: number } | null;
  /** Through the index: p50 wall and CPU ms (index parse included), bytes read, and whether it narrowed at all. */
  indexed: { wallMs: number; cpuMs: number; readBytes: number; narrowed: boolean };
}

export interface CorpusFigures {
  name: string;
  bytes: number;
  indexBytes: number;
  /** Building the index, as the agent does before the upload (its CPU). */
  indexBuildMs: number;
  queries: QueryFigures[];
}

/**
 * Builds the body's index and times each query `runs` times both ways (the whole scan `wholeRuns` times: 0 leaves it
 * out, and the indexed result is then checked against one untimed scan).
 */
async function benchCorpus(name: string, body: Uint8Array, queries: string[][], runs: number, wholeRuns: number): Promise<CorpusFigures> {
  const built = await timed(async () => {
    const builder = new BlockIndexBuilder();
    for (let i = 0; i < body.length; i += CHUNK) builder.push(body.subarray(i, i + CHUNK));
    return builder.finish();
  });
  const encoded = built.value;
  const out: QueryFigures[] = [];
  for (const terms of queries) {
    const o: SearchOptions = { terms, maxExcerpts: 10, contextLines: 3, source: 'stdout' };
    const whole: { wall: number; cpu: number }[] = [];
    let expected = '';
    for (let r = 0; r < Math.max(1, wholeRuns); r++) {
      const t = await timed(() => searchStream(chunked(body), o));
      if (r < wholeRuns) whole.push(t);
      expected = JSON.stringify(t.value);
    }
    const indexed: { wall: number; cpu: number }[] = [];
    let readBytes = body.length;
    let narrowed = false;
    for (let r = 0; r < runs; r++) {
      const t = await timed(async () => {
        const ix = decodeBlockIndex(encoded, body.length);
        const got = await searchIndexed(async (offset, length) => chunked(body.subarray(offset, offset + length)), ix, o);
        // A query the index cannot narrow is scanned whole, as query_output does.
        return { got, result: got.kind === 'searched' ? got.result : await searchStream(chunked(body), o) };
      });
      if (JSON.stringify(t.value.result) !== expected) throw new Error(`${name}: the indexed search of ${JSON.stringify(terms)} differs from the whole scan`);
      indexed.push(t);
      narrowed = t.value.got.kind === 'searched';
      readBytes = t.value.got.kind === 'searched' ? t.value.got.ranges.reduce((n, x) => n + x.toByte - x.fromByte, 0) : body.length;
    }
    const wholeWall = whole.length ? p50(whole.map((x) => x.wall)) : 0;
    out.push({
      terms,
      matches: (JSON.parse(expected) as { matchCount: number }).matchCount,
      whole: whole.length ? { wallMs: round(wholeWall), cpuMs: round(p50(whole.map((x) => x.cpu))), mbPerS: Math.round(body.length / 1e3 / wholeWall) } : null,
      indexed: { wallMs: round(p50(indexed.map((x) => x.wall))), cpuMs: round(p50(indexed.map((x) => x.cpu))), readBytes, narrowed },
    });
  }
  return { name, bytes: body.length, indexBytes: encoded.length, indexBuildMs: Math.round(built.cpu), queries: out };
}

/** The number `seq` holds once: no longer number in 1..12,000,000 contains it. */
export const RARE_NUMBER = '7654321';
/** A line number of the build log, zero-padded as it prints them: its digit runs share lengths with hash fragments. */
const LOG_NUMBER = '00612345';
export const SEQ_N = 12_000_000;
export const LOG_BYTES = 110_000_000;
export const BIG_LOG_BYTES = 1_000_000_000;

export interface SearchBench {
  seq: CorpusFigures;
  log: CorpusFigures;
  big: CorpusFigures | null;
}

/** The three bodies, one after the other (one in memory at a time). `big`: include the 1 GB log. */
export async function benchSearchCorpora(runs: number, big = true): Promise<SearchBench> {
  // Warm-up: the same code paths on a small body, so the first timed run is not the JIT's.
  await benchCorpus('warm-up', buildLog(4e6), [[RARE_TERM], [LOG_NUMBER]], 2, 1);
  const seq = await benchCorpus(`seq 1 ${SEQ_N}`, seqBody(SEQ_N), [[RARE_NUMBER]], runs, runs);
  const log = await benchCorpus('build log', buildLog(LOG_BYTES), [[RARE_TERM], [LOG_NUMBER]], runs, runs);
  // The whole scan of 1 GB once, as the baseline: seconds per run.
  const large = big ? await benchCorpus('build log', buildLog(BIG_LOG_BYTES), [[RARE_TERM]], runs, 1) : null;
  return { seq, log, big: large };
}

/** `npm run bench`'s search rows: the three bodies measured, as target rows. */
export async function searchRows(runs: number): Promise<string[][]> {
  return searchTargetRows(await benchSearchCorpora(runs));
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const runsAt = args.indexOf('--runs');
  const quick = args.includes('--quick');
  const runs = runsAt >= 0 ? Number(args[runsAt + 1]) : quick ? 3 : 5;
  const b = await benchSearchCorpora(runs, !args.includes('--no-1gb'));
  const rows = searchTargetRows(b);
  for (const r of rows) console.log(r.join(' | '));
  console.log('\nMarkdown:\n');
  console.log(rows.map((r, i) => `| ${r.join(' | ')} |${i === 0 ? `\n|${r.map(() => '---').join('|')}|` : ''}`).join('\n'));
  console.log(`\n${JSON.stringify(b)}`);
}
