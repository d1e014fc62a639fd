/**
 * One output stream of a job: counts every byte and line, spools the first `artifactBytes`
 * to a file (the artifact), keeps the first `inlineBytes` in memory (the inline result), and
 * tells the live relay how much of the spool file it may send. Memory stays bounded by those
 * caps: reading pauses while a chunk is written to disk, so a job printing 50 MB is held back,
 * not buffered.
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { StreamName } from '../../src/contracts/agent-protocol.ts';

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

  /** Reads `src` to its end (or until it is destroyed); safe to call once per phase. */
  async consume(src: Readable): Promise<void> {
    try {
      for await (const chunk of src as AsyncIterable<Buffer>) await this.take(chunk);
    } catch {
      // Destroyed by the runner after the drain deadline, or the pipe broke: what we have is kept.
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

function countNewlines(b: Buffer): number {
  let n = 0;
  let i = b.indexOf(0x0a);
  while (i !== -1) {
    n++;
    i = b.indexOf(0x0a, i + 1);
  }
  return n;
}
