/**
 * Live output travels from agent to edge as binary WebSocket frames, not JSON: output bytes go
 * as they are (a NUL byte stays one byte, where JSON would make it the 6 characters `\u0000`),
 * and each frame says at which byte offset of its stream it starts, so the edge keeps an exact
 * byte-for-byte prefix and ignores anything that would leave a gap. Both sides use only this
 * module to build and read frames. Every other agent message stays JSON (`agent-protocol.ts`).
 *
 * Layout (big-endian):
 *   0      u8   OUTPUT_FRAME_VERSION
 *   1      u8   stream: 0 stdout, 1 stderr
 *   2      u8   N = byte length of the job id (UTF-8), 1..OUTPUT_FRAME_JOB_ID_MAX_BYTES
 *   3..11  f64  byte offset of the first data byte in its stream (an integer)
 *   11..   N    job id
 *   11+N.. data (0..LIVE_FRAME_DATA_BYTES bytes)
 */
import { z } from 'zod';
import { StreamName } from './agent-protocol.ts';
import { LIVE_FRAME_DATA_BYTES } from './limits.ts';
import { describeIssues } from './errors.ts';

const OUTPUT_FRAME_VERSION = 1;
export const OUTPUT_FRAME_JOB_ID_MAX_BYTES = 255;
const HEADER_BYTES = 11;
const STREAMS = ['stdout', 'stderr'] as const;

export const OutputFrameHeader = z.object({
  jobId: z
    .string()
    .min(1)
    .refine((s) => new TextEncoder().encode(s).byteLength <= OUTPUT_FRAME_JOB_ID_MAX_BYTES, `job id is at most ${OUTPUT_FRAME_JOB_ID_MAX_BYTES} bytes`),
  stream: StreamName,
  offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
});
export type OutputFrameHeader = z.infer<typeof OutputFrameHeader>;
export interface OutputFrame extends OutputFrameHeader {
  data: Uint8Array;
}

/** Bytes a frame for `jobId` carrying `dataBytes` of output takes on the wire (before WebSocket framing). */
export function outputFrameBytes(jobId: string, dataBytes: number): number {
  return HEADER_BYTES + new TextEncoder().encode(jobId).byteLength + dataBytes;
}

/**
 * Builds a frame with room for `dataBytes` of output and returns it with a view of that room, so
 * a caller can read output straight into the frame (no second copy). With `into` (at least
 * `outputFrameBytes` long) the frame is a view of it: a sender that reuses one buffer for every
 * frame allocates nothing per frame.
 */
export function allocOutputFrame(h: OutputFrameHeader, dataBytes: number, into?: Uint8Array): { frame: Uint8Array; data: Uint8Array } {
  const header = OutputFrameHeader.parse(h);
  if (!Number.isInteger(dataBytes) || dataBytes < 0 || dataBytes > LIVE_FRAME_DATA_BYTES) {
    throw new RangeError(`a live output frame carries 0..${LIVE_FRAME_DATA_BYTES} bytes, not ${dataBytes}`);
  }
  const id = new TextEncoder().encode(header.jobId);
  const size = HEADER_BYTES + id.byteLength + dataBytes;
  if (into && into.byteLength < size) throw new RangeError(`a buffer of ${into.byteLength} bytes cannot hold a frame of ${size}`);
  const frame = into ? into.subarray(0, size) : new Uint8Array(size);
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  view.setUint8(0, OUTPUT_FRAME_VERSION);
  view.setUint8(1, STREAMS.indexOf(header.stream));
  view.setUint8(2, id.byteLength);
  view.setFloat64(3, header.offset);
  frame.set(id, HEADER_BYTES);
  return { frame, data: frame.subarray(HEADER_BYTES + id.byteLength) };
}

export function encodeOutputFrame(f: OutputFrame): Uint8Array {
  const { frame, data } = allocOutputFrame(f, f.data.byteLength);
  data.set(f.data);
  return frame;
}

export type ParsedFrame = { ok: true; frame: OutputFrame } | { ok: false; reason: string };

/** Reads a frame; anything malformed is a reason to log, never an exception. `data` is a view, not a copy. */
export function decodeOutputFrame(raw: ArrayBuffer | Uint8Array): ParsedFrame {
  const b = raw instanceof Uint8Array ? raw : new Uint8Array(raw);
  if (b.byteLength < HEADER_BYTES)
    return { ok: false, reason: `binary frame of ${b.byteLength} bytes is shorter than the ${HEADER_BYTES}-byte output frame header` };
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const version = view.getUint8(0);
  if (version !== OUTPUT_FRAME_VERSION) return { ok: false, reason: `output frame version ${version} is not ${OUTPUT_FRAME_VERSION}` };
  const stream = STREAMS[view.getUint8(1)];
  if (!stream) return { ok: false, reason: `output frame stream ${view.getUint8(1)} is not 0 (stdout) or 1 (stderr)` };
  const idLen = view.getUint8(2);
  if (b.byteLength < HEADER_BYTES + idLen) return { ok: false, reason: 'output frame ends inside its job id' };
  let jobId: string;
  try {
    jobId = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(b.subarray(HEADER_BYTES, HEADER_BYTES + idLen));
  } catch {
    return { ok: false, reason: 'output frame job id is not UTF-8' };
  }
  const data = b.subarray(HEADER_BYTES + idLen);
  if (data.byteLength > LIVE_FRAME_DATA_BYTES) return { ok: false, reason: `output frame carries ${data.byteLength} bytes; at most ${LIVE_FRAME_DATA_BYTES}` };
  const h = OutputFrameHeader.safeParse({ jobId, stream, offset: view.getFloat64(3) });
  if (!h.success) return { ok: false, reason: `malformed output frame: ${describeIssues(h.error.issues)}` };
  return { ok: true, frame: { ...h.data, data } };
}
