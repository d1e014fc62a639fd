/** The scan's batches: the stream's bytes in order, each batch at most the batch size unless a chunk alone is larger. */
import { describe, expect, it } from 'vitest';
import { Batches } from '../../src/search/batches.ts';

describe('Batches', () => {
  it('hands on every byte in order, in batches of the size, a large chunk whole', () => {
    let seed = 7;
    const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8;
    for (const size of [1, 3, 64, 1000]) {
      const chunks = Array.from({ length: 200 }, () => Uint8Array.from({ length: next() % (next() % 5 === 0 ? 3 * size : size) }, () => next() & 0xff));
      const seen: number[] = [];
      const sizes: number[] = [];
      const b = new Batches(size, (batch) => {
        // Copied now: the batch's memory is reused after this returns.
        seen.push(...batch);
        sizes.push(batch.length);
      });
      for (const c of chunks) b.push(c);
      b.flush();
      expect(seen).toEqual(chunks.flatMap((c) => [...c]));
      const large = new Set(chunks.filter((c) => c.length > size).map((c) => c.length));
      for (const n of sizes) expect(n <= size || large.has(n)).toBe(true);
    }
  });
});
