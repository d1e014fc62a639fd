/**
 * Throughput of the artifact search (what query_output does per stream): a build-like log of
 * the given size, generated in memory up front so only the search is timed, streamed in 64 KiB
 * chunks like an R2 body. Run alone: `node bench/query.ts [megabytes]`.
 */
import { searchStream } from '../src/search/line-search.ts';

const CHUNK = 64 * 1024;
/** One line in this many is a match: rare, as in real queries for errors. */
const MATCH_EVERY = 20_000;

function buildLog(megabytes: number): Uint8Array {
  const total = Math.floor(megabytes * 1024 * 1024);
  const out = new Uint8Array(total);
  const enc = new TextEncoder();
  let pos = 0;
  for (let i = 1; pos < total; i++) {
    const line =
      i % MATCH_EVERY === 0
        ? `src/pkg_${i % 97}/mod_${i % 1013}.ts(${i % 400},${i % 80}): error TS2322: Type 'string' is not assignable to type 'number'.\n`
        : i % 7 === 0
          ? `[${String(i).padStart(8, '0')}] WARN  deprecated option --legacy-peer-deps used by workspace pkg_${i % 97}\n`
          : `[${String(i).padStart(8, '0')}] INFO  compiled src/pkg_${i % 97}/mod_${i % 1013}.ts in ${i % 250}ms (cache ${i % 3 ? 'hit' : 'miss'})\n`;
    const r = enc.encodeInto(line, out.subarray(pos));
    pos += r.written;
    if (r.read < line.length) break;
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

export async function benchSearch(megabytes: number): Promise<{ ms: number; mbPerS: number; excerpts: number }> {
  const log = buildLog(megabytes);
  const started = performance.now();
  const r = await searchStream(chunked(log), { terms: ['error TS', 'FATAL'], maxExcerpts: 10, contextLines: 3, source: 'stdout' });
  const ms = performance.now() - started;
  return { ms: Math.round(ms * 10) / 10, mbPerS: Math.round((log.length / 1024 / 1024 / (ms / 1000)) * 10) / 10, excerpts: r.excerpts.length };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const mb = Number(process.argv[2] ?? 100);
  await benchSearch(Math.min(mb, 4)); // warm-up
  console.log(JSON.stringify({ megabytes: mb, ...(await benchSearch(mb)) }));
}
