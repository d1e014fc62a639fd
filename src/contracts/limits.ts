/**
 * Sizes both sides of the agent protocol keep to, derived from Cloudflare's limits (which live in
 * src/platform/limits.ts, each with its source). The local emulator (workerd under `wrangler dev`)
 * does not enforce all of them, so code checks against these constants and tests prove it stays below them.
 */
import { REQUEST_BODY_MAX_BYTES, WEBSOCKET_MESSAGE_MAX_BYTES } from '../platform/limits.ts';

/** The agent sizes its uploads by these (src/platform/limits.ts). */
export { REQUEST_BODY_MAX_BYTES, R2_MULTIPART_MAX_PART_BYTES, R2_MULTIPART_MAX_PARTS, R2_MULTIPART_MIN_PART_BYTES } from '../platform/limits.ts';

/**
 * Characters per stored chunk of a large text (job spec, inline output). A JS string character
 * is at most 3 UTF-8 bytes, so 512 Ki characters stay below the row limit with room for the
 * other columns.
 */
export const STORED_CHUNK_CHARS = 512 * 1024;

/**
 * Largest agent message the agent sends as one frame; above it the inline output travels as
 * `job.exit.part` messages first. Half the platform limit: JSON escaping and framing stay inside.
 */
export const AGENT_MESSAGE_BUDGET_BYTES = WEBSOCKET_MESSAGE_MAX_BYTES / 2;

/** Characters of inline output per `job.exit.part` message (≤ 6 bytes per char once JSON-escaped). */
export const EXIT_PART_CHARS = 1024 * 1024;

/**
 * Bytes of each stream the agent relays live and the team's Durable Object keeps (in rows of
 * STORED_CHUNK_CHARS): what `job_output` reads while a job runs, while its artifact uploads, and
 * after an upload failed or the agent was lost (kill -9). Kept only until the stream's artifact is
 * stored. 64 jobs × 2 streams × 16 MiB = 2 GiB, a fifth of DO_STORAGE_MAX_BYTES; at least the
 * largest inline cap a policy allows (10 MiB), so the live tail always covers the inline result.
 */
export const LIVE_OUTPUT_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Output bytes per live output frame (binary, `output-frame.ts`): far below
 * WEBSOCKET_MESSAGE_MAX_BYTES, and one frame is one row of the DO's live table (below
 * SQLITE_ROW_MAX_BYTES), so a frame never has to be split.
 */
export const LIVE_FRAME_DATA_BYTES = 256 * 1024;

/**
 * The agent's relay sends another live frame only while its socket holds less than this many
 * bytes not yet written (`WebSocket.bufferedAmount`): the relay's memory stays bounded whatever a
 * job writes, and a heartbeat never queues behind more than this.
 */
export const RELAY_MAX_BUFFERED_BYTES = 1024 * 1024;

/** Bytes per stored row of live output (a BLOB): below SQLITE_ROW_MAX_BYTES with room for the other columns. */
export const STORED_OUTPUT_CHUNK_BYTES = 1024 * 1024;

/** Sanity check used by tests and by the DO before it serializes an attachment. */
export function attachmentBytes(value: unknown): number {
  return new TextEncoder().encode(JSON.stringify(value)).byteLength;
}

/**
 * Splits `text` into pieces of at most `n` characters, never between the two halves of a
 * surrogate pair (SQLite stores UTF-8, where a lone half would be replaced). Always ≥ 1 piece.
 */
export function splitText(text: string, n: number): string[] {
  const out: string[] = [];
  let i = 0;
  do {
    let end = Math.min(text.length, i + n);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
    out.push(text.slice(i, end));
    i = end;
  } while (i < text.length);
  return out;
}

// ---- artifact uploads ----

/**
 * The agent's default part size: one part is one request, far below REQUEST_BODY_MAX_BYTES; an
 * artifact above it goes in parts. 64 MiB × 10,000 parts = 640 GiB per stream, far above any cap.
 */
export const ARTIFACT_PART_BYTES = 64 * 1024 * 1024;

/**
 * The largest `limits.maxArtifactBytes` a policy may set (per stream of a job): 160 parts of
 * ARTIFACT_PART_BYTES, its search index (about 0.4 % of a log) far below SEARCH_INDEX_MAX_BYTES.
 * The agent's own ceiling (`--max-artifact-bytes`) applies as well.
 */
export const POLICY_MAX_ARTIFACT_BYTES = 10 * 1024 * 1024 * 1024;

/**
 * Without a part size set on the agent, a stream goes in ONE PUT while it fits one request
 * (REQUEST_BODY_MAX_BYTES), and in ARTIFACT_PART_BYTES parts only above that: one request
 * instead of two parts plus start and complete, and an object stored in one piece, which
 * `query_output` reads back faster (locally ~3× for a ~90 MB artifact). The cost: a failed
 * PUT of up to 100 MB is sent again whole, where a part would be sent again alone.
 */
export const ARTIFACT_SINGLE_PUT_MAX_BYTES = REQUEST_BODY_MAX_BYTES;
