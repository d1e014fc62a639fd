/** Inputs for the artifact search's tests: a body cut into chunks of chosen sizes, and options with defaults. */
import type { SearchOptions } from '../../src/search/line-search.ts';

/** A stream of `bytes` cut into chunks of the given sizes (cycled), as an R2 body hands them out. */
export function streamOf(bytes: Uint8Array, sizes: number[] = [65536]): ReadableStream<Uint8Array> {
  let pos = 0;
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (pos >= bytes.length) return c.close();
      const n = Math.max(1, sizes[i++ % sizes.length]);
      c.enqueue(bytes.slice(pos, pos + n));
      pos += n;
    },
  });
}

export const opts = (o: Partial<SearchOptions> & { terms: string[] }): SearchOptions => ({ maxExcerpts: 10, contextLines: 3, source: 'stdout', ...o });

/** A seeded pseudo-random source (mulberry32): the differential tests' random bodies, the same on every run. */
export function rng(seed: number): () => number {
  let s = seed | 0;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
