/**
 * Output capture (executor/jobs/capture.ts): every byte and line counted and spooled in order from a
 * real pipe; each chunk that owns its ArrayBuffer freed once spooled, a slice of a larger buffer
 * left alone; a stream destroyed midway keeps what was read.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { StreamCapture } from '../../../executor/jobs/capture.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gh-capture-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function capture(name: string, o: { artifactBytes?: number; inlineBytes?: number } = {}) {
  const spooled: number[] = [];
  const c = new StreamCapture({
    stream: 'stdout',
    spoolPath: join(dir, name),
    artifactBytes: o.artifactBytes ?? 1e9,
    inlineBytes: o.inlineBytes ?? 100,
    spooled: (_s, n) => spooled.push(n),
  });
  return { c, spooled };
}

describe('StreamCapture', () => {
  it("counts and spools a pipe's output byte for byte, however fast it comes", async () => {
    const { c, spooled } = capture('pipe');
    await c.open();
    // 9 MB of 'abcdefgh\n' lines, faster than one chunk at a time reaches the disk.
    const child = spawn('sh', ['-c', 'yes abcdefgh | head -c 9000000'], { stdio: ['ignore', 'pipe', 'ignore'] });
    await c.consume(child.stdout);
    await c.close();
    expect(c.bytes).toBe(9_000_000);
    expect(c.totalLines()).toBe(1_000_000);
    expect(c.spooledBytes).toBe(9_000_000);
    expect(spooled.at(-1)).toBe(9_000_000);
    expect(readFileSync(c.spoolPath).equals(Buffer.from('abcdefgh\n'.repeat(1_000_000)))).toBe(true);
    expect(c.head().toString()).toBe('abcdefgh\n'.repeat(12).slice(0, 100));
  });

  it('frees a chunk that owns its ArrayBuffer once spooled, and leaves a slice of a larger buffer alone', async () => {
    const { c } = capture('free', { artifactBytes: 6 });
    await c.open();
    const src = new PassThrough();
    const own = Buffer.allocUnsafeSlow(4).fill('a');
    const big = Buffer.allocUnsafeSlow(8);
    big.write('xxbbbbxx');
    const slice = big.subarray(2, 6);
    const done = c.consume(src);
    src.write(own);
    src.end(slice);
    await done;
    await c.close();
    // Counted and spooled before it was freed; the spool took the first 6 bytes only.
    expect(c.bytes).toBe(8);
    expect(readFileSync(c.spoolPath, 'utf8')).toBe('aaaabb');
    expect(own.byteLength).toBe(0);
    expect(big.toString()).toBe('xxbbbbxx');
  });

  it('keeps what it read from a stream destroyed midway', async () => {
    const { c } = capture('destroyed');
    await c.open();
    const src = new PassThrough();
    const done = c.consume(src);
    src.write(Buffer.from('one\n'));
    await new Promise((r) => setTimeout(r, 20));
    src.destroy(new Error('the pipe broke'));
    await done;
    await c.close();
    expect(c.bytes).toBe(4);
    expect(readFileSync(c.spoolPath, 'utf8')).toBe('one\n');
  });
});
