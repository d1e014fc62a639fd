/**
 * One output stream of a job: counts every byte and line, spools the first `artifactBytes`
 * to a file (the artifact), keeps the first `inlineBytes` in memory (the inline result), and
 * tells the live relay how much of the spool file it may send. Memory stays bounded by those
 * caps: reading pauses while more than CAPTURE_QUEUE_BYTES wait to be written to disk, so a job
 * printing 50 MB is held back, not buffered; and each chunk read is freed once written (`release`).
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { StreamName } from '../../src/contracts/agent-protocol.ts';

/** Bytes read from a stream and not yet taken (written to the spool) before reading pauses. */
const CAPTURE_QUEUE_BYTES = 1024 * 1024;

export interface CaptureOptions {
  stream: StreamName;
  spoolPath: string;
  artifactBytes: number;
  inlineBytes: number;
  /** After each spool write: how many bytes of this stream the spool file now holds (the relay reads them from there). */
  spooled: (stream: StreamName, bytes: number) => void;
}

export class StreamCapture {
  readonly stream: StreamName;
  readonly spoolPath: string;
  bytes = 0;
  lines = 0;
  spooledBytes = 0;
  spooledLines = 0;
  private lastByte = -1;
  private spoolLastByte = -1;
  private readonly inline: Buffer[] = [];
  private inlineLen = 0;
  private file: FileHandle | null = null;
  private readonly opts: CaptureOptions;
  private writeError: string | null = null;

  constructor(opts: CaptureOptions) {
    this.opts = opts;
    this.stream = opts.stream;
    this.spoolPath = opts.spoolPath;
  }

  /**
   * Lets the stream spool. The file itself is created with the stream's first byte: most short
   * jobs print nothing on one stream or both, and creating and removing it costs more than such a job.
   */
  async open(): Promise<void> {
    this.canSpool = true;
  }

  private canSpool = false;
  /** Whether the spool file exists (created by the first byte). */
  get spoolCreated(): boolean {
    return this.created;
  }

  private created = false;

  /**
   * Reads `src` to its end (or until it is destroyed); safe to call once per phase. Chunks are
   * taken one after the other as they come ('data', not an async iterator, whose `read()` joins the
   * chunks that arrived during a write into a fresh copy); while more than CAPTURE_QUEUE_BYTES wait
   * for the disk, reading pauses. Each chunk's memory is given back once it is taken (`release`).
   */
  async consume(src: Readable): Promise<void> {
    const queue: Buffer[] = [];
    let queued = 0;
    let ended = src.destroyed || src.readableEnded;
    let wake: (() => void) | null = null;
    const onData = (chunk: Buffer) => {
      queue.push(chunk);
      queued += chunk.length;
      if (queued >= CAPTURE_QUEUE_BYTES) src.pause();
      wake?.();
    };
    // Destroyed by the runner after the drain deadline, or the pipe broke: what we have is kept.
    const onEnd = () => {
      ended = true;
      wake?.();
    };
    src.on('data', onData).once('end', onEnd).once('close', onEnd).on('error', onEnd);
    try {
      if (!ended) src.resume();
      for (;;) {
        const chunk = queue.shift();
        if (!chunk) {
          if (ended) return;
          await new Promise<void>((r) => (wake = r));
          wake = null;
          continue;
        }
        await this.take(chunk);
        queued -= chunk.length;
        release(chunk);
        if (queued < CAPTURE_QUEUE_BYTES && !ended && src.isPaused()) src.resume();
      }
    } finally {
      src.off('data', onData).off('end', onEnd).off('close', onEnd);
      // A late error with no listener would be thrown: keep swallowing them.
    }
  }

  private async take(chunk: Buffer): Promise<void> {
    this.bytes += chunk.length;
    this.lines += countNewlines(chunk);
    this.lastByte = chunk[chunk.length - 1];
    if (this.inlineLen < this.opts.inlineBytes) {
      const part = chunk.subarray(0, this.opts.inlineBytes - this.inlineLen);
      this.inline.push(Buffer.from(part)); // copy: the slice would pin the whole chunk
      this.inlineLen += part.length;
    }
    if (this.spooledBytes < this.opts.artifactBytes && this.canSpool && !this.writeError) {
      const part = chunk.subarray(0, this.opts.artifactBytes - this.spooledBytes);
      try {
        if (!this.file) {
          this.file = await open(this.spoolPath, 'w', 0o600);
          this.created = true;
        }
        await this.file.write(part);
        this.spooledBytes += part.length;
        this.spooledLines += countNewlines(part);
        this.spoolLastByte = part[part.length - 1];
        this.opts.spooled(this.stream, this.spooledBytes);
      } catch (e) {
        this.writeError = (e as Error).message; // disk full: keep counting, stop spooling
      }
    }
  }

  async close(): Promise<void> {
    const f = this.file;
    this.file = null;
    this.canSpool = false;
    await f?.close().catch(() => {});
  }

  head(): Buffer {
    return Buffer.concat(this.inline);
  }

  /** A last line without a newline still counts. */
  totalLines(): number {
    return this.lines + (this.bytes > 0 && this.lastByte !== 0x0a ? 1 : 0);
  }

  artifactLines(): number {
    return this.spooledLines + (this.spooledBytes > 0 && this.spoolLastByte !== 0x0a ? 1 : 0);
  }

  artifactTruncated(): boolean {
    return this.spooledBytes < this.bytes;
  }

  spoolError(): string | null {
    return this.writeError;
  }
}

/**
 * Gives a chunk's memory back now, when the chunk is the whole of its ArrayBuffer (as each read of
 * a pipe is) and so nothing else can see it: detaching it (`transfer(0)`) frees it at once. Left to
 * V8, a chunk is freed at the next collection of the young generation, which an agent whose heap
 * grew at start-up (16 MB of young generation) runs every few hundred chunks: tens of MB of dead
 * chunks at a time, a job writing output as fast as it can, and the agent's RSS grows by as much.
 * A chunk that is a slice of a larger buffer (a reused sandbox's frames) is left to the collector.
 */
function release(chunk: Buffer): void {
  const ab = chunk.buffer;
  if (chunk.byteOffset !== 0 || chunk.byteLength !== ab.byteLength || !(ab instanceof ArrayBuffer)) return;
  try {
    (ab as ArrayBuffer & { transfer(n: number): ArrayBuffer }).transfer(0);
  } catch {
    // Not detachable (never the case for a stream's chunks): the collector frees it.
  }
}

function countNewlines(b: Buffer): number {
  let n = 0;
  let i = b.indexOf(0x0a);
  while (i !== -1) {
    n++;
    i = b.indexOf(0x0a, i + 1);
  }
  return n;
}
