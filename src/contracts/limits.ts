/**
 * Cloudflare platform limits the dispatch path relies on. The local emulator (workerd under
 * `wrangler dev`) does not enforce all of them, so code checks against these constants and tests
 * prove it stays below them.
 *
 * Sources (as of 2026-11):
 * - Durable Objects limits: https://developers.cloudflare.com/durable-objects/platform/limits/
 * - WebSocket hibernation API (serializeAttachment):
 *   https://developers.cloudflare.com/durable-objects/api/websockets/
 */

/** `WebSocket.serializeAttachment()` throws above this many bytes (structured-clone size). */
export const HIBERNATION_ATTACHMENT_MAX_BYTES = 16_384;

/** Largest WebSocket message a Durable Object receives. */
export const WEBSOCKET_MESSAGE_MAX_BYTES = 32 * 1024 * 1024;

/** Largest row, and largest string or BLOB value, in a SQLite-backed Durable Object. */
export const SQLITE_ROW_MAX_BYTES = 2 * 1000 * 1000;

/** Bound parameters per SQL statement in a SQLite-backed Durable Object. */
export const SQL_MAX_BOUND_PARAMS = 100;

/** Length of one SQL statement's text in a SQLite-backed Durable Object. */
export const SQL_STATEMENT_MAX_BYTES = 100 * 1000;

/** CPU time per request (or per alarm / WebSocket event) by default. */
export const CPU_MS_PER_REQUEST = 30_000;

/** Storage of one SQLite-backed Durable Object. */
export const DO_STORAGE_MAX_BYTES = 10 * 1000 * 1000 * 1000;

// ---- Gatehouse's own budgets, derived from the limits above ----

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
 * Largest request body Cloudflare lets through to a Worker on the Free and Pro plans (Business:
 * 200 MB, Enterprise: 500 MB by default); a larger one is refused with HTTP 413 before the Worker
 * runs. The smallest plan's figure, so an upload that fits here fits everywhere.
 * Workers limits (request limits): https://developers.cloudflare.com/workers/platform/limits/
 */
export const REQUEST_BODY_MAX_BYTES = 100 * 1000 * 1000;

/**
 * R2 multipart uploads: every part but the last is the same size and at least 5 MiB (the last may
 * be smaller, not larger), a part is at most 5 GiB, an upload has at most 10,000 parts.
 * R2 limits: https://developers.cloudflare.com/r2/platform/limits/ and multipart objects:
 * https://developers.cloudflare.com/r2/objects/multipart-objects/
 */
export const R2_MULTIPART_MIN_PART_BYTES = 5 * 1024 * 1024;
export const R2_MULTIPART_MAX_PART_BYTES = 5 * 1024 * 1024 * 1024;
export const R2_MULTIPART_MAX_PARTS = 10_000;

/**
 * The agent's default part size: one part is one request, far below REQUEST_BODY_MAX_BYTES; an
 * artifact above it goes in parts. 64 MiB × 10,000 parts = 640 GiB per stream, far above any cap.
 */
export const ARTIFACT_PART_BYTES = 64 * 1024 * 1024;

/**
 * Without a part size set on the agent, a stream goes in ONE PUT while it fits one request
 * (REQUEST_BODY_MAX_BYTES), and in ARTIFACT_PART_BYTES parts only above that: one request
 * instead of two parts plus start and complete, and an object stored in one piece, which
 * `query_output` reads back faster (locally ~3× for a ~90 MB artifact). The cost: a failed
 * PUT of up to 100 MB is sent again whole, where a part would be sent again alone.
 */
export const ARTIFACT_SINGLE_PUT_MAX_BYTES = REQUEST_BODY_MAX_BYTES;
