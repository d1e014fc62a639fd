/**
 * Reads a range of a spool file through one reused buffer. A stream of fresh chunks
 * (`createReadStream`) leaves every chunk behind as an ArrayBuffer that V8 frees only at its next
 * collection, which an agent reading 1 GB (the search index, the upload) reaches late: tens of MB
 * of dead chunks at a time, and the agent's RSS grows by as much. One buffer keeps it flat.
 */
import { open } from 'node:fs/promises';

/**
 * Bigger than a socket's write high-water mark (64 KiB in Node 22), so an HTTP client writing a
 * chunk always waits for the socket to drain before it asks for the next one (see `fileChunks`).
 */
const FILE_CHUNK_BYTES = 256 * 1024;

/**
 * Bytes `start`…`end` (exclusive) of `file`, in chunks of `size` bytes (the last may be shorter).
 * Each chunk is a view of the same buffer: it is overwritten when the next one is asked for, so a
 * consumer must be done with a chunk by then — a synchronous one (the index builder), or undici
 * writing a body, which waits for its socket's 'drain' (all written) after a chunk larger than the
 * socket's high-water mark before it pulls the next. The file is opened on the first chunk asked
 * for and closed when the iteration ends or is abandoned (`return`). Throws when it ends early.
 */
export async function* fileChunks(file: string, start: number, end: number, size: number = FILE_CHUNK_BYTES): AsyncGenerator<Uint8Array, void, undefined> {
  if (end <= start) return;
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.allocUnsafeSlow(Math.min(size, end - start));
    for (let at = start; at < end; ) {
      // Fill the whole buffer (a read may return less): only the last chunk may be short.
      const want = Math.min(buf.byteLength, end - at);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await fh.read(buf, got, want - got, at + got);
        if (bytesRead === 0) throw new Error(`${file} ends at ${at + got} bytes, before ${end}`);
        got += bytesRead;
      }
      at += got;
      yield buf.subarray(0, got);
    }
  } finally {
    await fh.close();
  }
}
