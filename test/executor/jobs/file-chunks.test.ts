/**
 * Reading a spool file through one reused buffer (executor/jobs/file-chunks.ts): the exact bytes of
 * a range, an early end as an error, and — what makes reusing the buffer safe as an upload body —
 * undici sends every byte intact to a reader slower than the disk.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { request } from 'undici';
import { fileChunks } from '../../../executor/jobs/file-chunks.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gh-chunks-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('fileChunks', () => {
  it('yields the bytes of the range in chunks of one buffer, the last one shorter', async () => {
    const f = join(dir, 'a');
    const data = randomBytes(1000);
    writeFileSync(f, data);
    const seen: Buffer[] = [];
    const buffers = new Set<ArrayBufferLike>();
    for await (const c of fileChunks(f, 100, 950, 300)) {
      seen.push(Buffer.from(c));
      buffers.add(c.buffer);
    }
    expect(seen.map((c) => c.length)).toEqual([300, 300, 250]);
    expect(Buffer.concat(seen).equals(data.subarray(100, 950))).toBe(true);
    expect(buffers.size).toBe(1);
    const empty: Uint8Array[] = [];
    for await (const c of fileChunks(f, 5, 5)) empty.push(c);
    expect(empty).toEqual([]);
  });

  it('throws when the file ends before the range does', async () => {
    const f = join(dir, 'short');
    writeFileSync(f, 'abc');
    const read = async () => {
      for await (const _ of fileChunks(f, 0, 10)) {
        /* drain */
      }
    };
    await expect(read()).rejects.toThrow(/ends at 3 bytes, before 10/);
  });

  describe('as an undici request body', () => {
    let server: Server;
    let url: string;
    beforeAll(async () => {
      // A reader much slower than the disk: the client's socket fills, its writes complete late.
      server = createServer((req, res) => {
        const hash = createHash('sha256');
        let n = 0;
        req.on('data', (d: Buffer) => {
          hash.update(d);
          n += d.length;
          req.pause();
          setTimeout(() => req.resume(), 1);
        });
        req.on('end', () => res.end(JSON.stringify({ n, sha: hash.digest('hex') })));
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
    });
    afterAll(() => server.close());

    it('arrives intact although each chunk overwrites the last one in the same buffer', async () => {
      const f = join(dir, 'big');
      const data = randomBytes(24 * 1024 * 1024 + 123);
      writeFileSync(f, data);
      const from = 77;
      const res = await request(url, {
        method: 'PUT',
        body: fileChunks(f, from, data.length) as unknown as Readable,
        headers: { 'content-length': String(data.length - from) },
      });
      const got = (await res.body.json()) as { n: number; sha: string };
      expect(got).toEqual({ n: data.length - from, sha: createHash('sha256').update(data.subarray(from)).digest('hex') });
    }, 60_000);
  });
});
