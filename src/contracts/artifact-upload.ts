/**
 * How an agent uploads a stream's artifact to the edge. Up to one part's size it is one `PUT`;
 * above it, the stream goes in parts through the edge into an R2 multipart upload:
 *
 *   POST   {ARTIFACT_UPLOAD_PATH}/{handle}/{stream}/multipart         MultipartStart → MultipartState
 *   PUT    {ARTIFACT_UPLOAD_PATH}/{handle}/{stream}/multipart/{n}     part n's bytes (exact Content-Length)
 *   POST   {ARTIFACT_UPLOAD_PATH}/{handle}/{stream}/multipart/complete → the stored artifact
 *   DELETE {ARTIFACT_UPLOAD_PATH}/{handle}/{stream}/multipart         abort: nothing of it is kept
 *
 * Every request carries `X-Gatehouse-Job`. Starting again (after a reconnect, or a retry of the
 * whole upload) resumes: the answer lists the parts the edge already holds. The R2 upload itself
 * never leaves the edge; the agent names an upload by its job and stream.
 */
import { z } from 'zod';
import { R2_MULTIPART_MAX_PARTS, R2_MULTIPART_MAX_PART_BYTES, R2_MULTIPART_MIN_PART_BYTES, REQUEST_BODY_MAX_BYTES } from './limits.ts';

export const MULTIPART_SEGMENT = 'multipart';

export const MultipartStart = z
  .object({
    /** The stream's whole size (the spool file). */
    bytes: z.number().int().min(1),
    /** Size of every part but the last (the last holds the rest). */
    partBytes: z.number().int().min(R2_MULTIPART_MIN_PART_BYTES).max(Math.min(R2_MULTIPART_MAX_PART_BYTES, REQUEST_BODY_MAX_BYTES)),
    lines: z.number().int().min(0),
    truncated: z.boolean(),
  })
  .strict();
export type MultipartStart = z.infer<typeof MultipartStart>;

export const MultipartState = z.object({
  parts: z.number().int().min(1),
  partBytes: z.number().int(),
  /** Part numbers (1-based) the edge already holds: a resumed upload sends only the others. */
  done: z.array(z.number().int().min(1)),
});
export type MultipartState = z.infer<typeof MultipartState>;

/** How many parts a stream of `bytes` takes at `partBytes` per part. */
export function partCount(bytes: number, partBytes: number): number {
  return Math.max(1, Math.ceil(bytes / partBytes));
}

/** Byte range [start, end) of part `n` (1-based). */
export function partRange(bytes: number, partBytes: number, n: number): { start: number; end: number } {
  const start = (n - 1) * partBytes;
  return { start, end: Math.min(bytes, start + partBytes) };
}

/**
 * Why a multipart upload of `bytes` in `partBytes` parts cannot be done, or null. The schema holds
 * the part size; this adds the rules that depend on both (R2's part count, and an upload that fits
 * one part goes as one PUT).
 */
export function multipartProblem(bytes: number, partBytes: number): string | null {
  const n = partCount(bytes, partBytes);
  if (n > R2_MULTIPART_MAX_PARTS)
    return `an artifact of ${bytes} bytes in parts of ${partBytes} bytes takes ${n} parts; R2 allows at most ${R2_MULTIPART_MAX_PARTS}: use larger parts`;
  if (n < 2) return `an artifact of ${bytes} bytes fits one part of ${partBytes} bytes: upload it with one PUT`;
  return null;
}
