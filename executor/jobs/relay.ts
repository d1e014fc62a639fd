/**
 * Live output to the edge. The relay reads each stream back from the job's spool file (where
 * capture has already written it) and sends it as binary frames (`src/contracts/output-frame.ts`)
 * at the socket's pace: a frame goes only while the socket holds less than
 * RELAY_MAX_BUFFERED_BYTES unsent, so whatever a job writes, the relay holds one frame in memory
 * and a heartbeat never queues behind more than that bound. The job itself is never slowed: it
 * writes to disk, the relay catches up. Output is coalesced (`intervalMs`) so a chatty job makes a
 * few frames a second, not thousands.
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { StreamName } from '../../src/contracts/agent-protocol.ts';
import { LIVE_FRAME_DATA_BYTES, RELAY_MAX_BUFFERED_BYTES } from '../../src/contracts/limits.ts';
import { allocOutputFrame, outputFrameBytes } from '../../src/contracts/output-frame.ts';

/** Where live frames go: the agent's socket to the edge. */
export interface LiveSink {
  /** Sends one binary frame; false when there is no connected socket (nothing was sent). */
  sendFrame(frame: Uint8Array): boolean;
  /** Bytes queued on the socket and not yet written; null while there is no connected socket. */
  buffered(): number | null;
}

export interface RelayOptions {
  intervalMs?: number;
  frameBytes?: number;
  maxBufferedBytes?: number;
  /** How often a congested (or disconnected) socket is looked at again. */
  pollMs?: number;
}

interface Tail {
  stream: StreamName;
  path: string;
  /** Relayed at most this many bytes of the stream. */
  limit: number;
  /** Bytes of the stream in its spool file so far. */
  available: number;
  /** Bytes sent so far: the next frame's offset. */
  sent: number;
  fh: FileHandle | null;
}

/** A sink that drops every frame: a runner without an edge (tests, benchmarks). */
export const DISCARD_LIVE: LiveSink = { sendFrame: () => true, buffered: () => 0 };

export class OutputRelay {
  private readonly jobId: string;
  private readonly sink: LiveSink;
  private readonly intervalMs: number;
  private readonly frameBytes: number;
  private readonly maxBuffered: number;
  private readonly pollMs: number;
  private readonly tails: Tail[] = [];
  private timer: NodeJS.Timeout | null = null;
  private pumping: Promise<void> | null = null;
  /** Set by `finish`: send what is there, and stop waiting for a socket that is not connected. */
  private final = false;
  private closed = false;
  /** Ends the pump's current wait at once (finish/close must not wait out a poll). */
  private wake: (() => void) | null = null;
  /**
   * One buffer for every frame: a WebSocket's `send` copies the bytes before it returns (undici
   * masks them into its own frame), so reusing it keeps the relay from leaving a frame's worth of
   * garbage per frame — garbage that would grow the agent's RSS until the next collection.
   */
  private buf: Uint8Array | null = null;

  constructor(jobId: string, sink: LiveSink, o: RelayOptions = {}) {
    this.jobId = jobId;
    this.sink = sink;
    this.intervalMs = o.intervalMs ?? 75;
    this.frameBytes = Math.min(o.frameBytes ?? LIVE_FRAME_DATA_BYTES, LIVE_FRAME_DATA_BYTES);
    this.maxBuffered = o.maxBufferedBytes ?? RELAY_MAX_BUFFERED_BYTES;
    this.pollMs = o.pollMs ?? 5;
  }

  /** Relays the first `limit` bytes of `stream`, read from `path` as capture spools them. */
  track(stream: StreamName, path: string, limit: number): void {
    this.tails.push({ stream, path, limit, available: 0, sent: 0, fh: null });
  }

  /** `bytes` of `stream` are now in its spool file (capture calls this after each write). */
  available = (stream: StreamName, bytes: number): void => {
    const t = this.tails.find((x) => x.stream === stream);
    if (!t || this.closed) return;
    t.available = Math.min(bytes, t.limit);
    this.schedule();
  };

  private schedule(): void {
    if (this.closed || this.final || this.timer || this.pumping || !this.tails.some((t) => t.sent < t.available)) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.pump();
    }, this.intervalMs);
  }

  /** Bytes sent of each stream (what the edge was given, unless the socket dropped in between). */
  sent(stream: StreamName): number {
    return this.tails.find((x) => x.stream === stream)?.sent ?? 0;
  }

  /**
   * At the job's end, before its exit is reported: sends everything spooled within the limits, at
   * the socket's pace. With no connected socket it gives up on the rest (the artifact has it all).
   */
  async finish(): Promise<void> {
    this.final = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.wake?.();
    await this.pump();
    await this.close();
  }

  /** Stops relaying and closes the spool files it reads. Safe to call more than once. */
  async close(): Promise<void> {
    this.closed = true;
    this.final = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.wake?.();
    await this.pumping?.catch(() => {});
    for (const t of this.tails) {
      const fh = t.fh;
      t.fh = null;
      await fh?.close().catch(() => {});
    }
  }

  private pump(): Promise<void> {
    this.pumping ??= this.run().finally(() => {
      this.pumping = null;
      this.schedule(); // output spooled while the last frame went out
    });
    return this.pumping;
  }

  private async run(): Promise<void> {
    let turn = 0;
    for (;;) {
      if (this.closed) return;
      // Streams take turns, so a flood on stdout does not hold back stderr's first line.
      const ready = this.tails.filter((t) => t.sent < t.available);
      if (ready.length === 0) return;
      const t = ready[turn++ % ready.length];
      const buffered = this.sink.buffered();
      if (buffered === null) {
        if (this.final) return;
        await this.sleep(Math.max(this.pollMs, 250));
        continue;
      }
      if (buffered >= this.maxBuffered) {
        await this.sleep(this.pollMs);
        continue;
      }
      const n = Math.min(this.frameBytes, t.available - t.sent);
      this.buf ??= new Uint8Array(outputFrameBytes(this.jobId, this.frameBytes));
      const { frame, data } = allocOutputFrame({ jobId: this.jobId, stream: t.stream, offset: t.sent }, n, this.buf);
      let read: number;
      try {
        t.fh ??= await open(t.path, 'r');
        ({ bytesRead: read } = await t.fh.read(data, 0, n, t.sent));
      } catch {
        t.limit = t.available = t.sent; // the spool went away (or cannot be read): nothing more to relay from it
        continue;
      }
      if (read === 0) {
        t.available = t.sent;
        continue;
      }
      if (this.closed) return;
      if (!this.sink.sendFrame(read === n ? frame : frame.subarray(0, frame.byteLength - (n - read)))) continue;
      t.sent += read;
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wake = done;
    }).finally(() => {
      this.wake = null;
    });
  }
}
