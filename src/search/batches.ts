/**
 * A stream's chunks gathered into batches of about one size in one reused buffer. R2 bodies come in chunks of a few KiB
 * to 64 KiB; the scan's per-batch setup wants larger ones, and a fresh array per batch cost as much as the search
 * itself (zeroed, copied into, collected). The consumer must be done with a batch when `emit` returns.
 */
export class Batches {
  private buf = new Uint8Array(0);
  private used = 0;
  private readonly size: number;
  private readonly emit: (batch: Uint8Array) => void;

  /** `expect`: the bytes to come, when known (a ranged read): the buffer is allocated once at the size it needs. */
  constructor(size: number, emit: (batch: Uint8Array) => void, expect?: number) {
    this.size = Math.max(1, Math.floor(size));
    this.emit = emit;
    if (expect !== undefined) this.buf = new Uint8Array(Math.max(0, Math.min(this.size, Math.floor(expect))));
  }

  push(chunk: Uint8Array): void {
    // A chunk as large as a batch goes as it is, when nothing waits before it.
    if (this.used === 0 && chunk.length >= this.size) {
      this.emit(chunk);
      return;
    }
    let off = 0;
    while (off < chunk.length) {
      // The buffer grows to the batch size only for a body that needs it (most are small).
      if (this.used === this.buf.length) this.grow(chunk.length - off);
      const n = Math.min(this.buf.length - this.used, chunk.length - off);
      this.buf.set(chunk.subarray(off, off + n), this.used);
      this.used += n;
      off += n;
      if (this.used >= this.size) this.flush();
    }
  }

  /** Emits what is gathered, if anything. */
  flush(): void {
    if (this.used === 0) return;
    const batch = this.buf.subarray(0, this.used);
    this.used = 0;
    this.emit(batch);
  }

  private grow(want: number): void {
    const next = new Uint8Array(Math.min(this.size, Math.max(2 * this.buf.length, this.used + want)));
    next.set(this.buf.subarray(0, this.used));
    this.buf = next;
  }
}
