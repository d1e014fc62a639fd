/**
 * Bounds on one JSON-RPC POST, checked after parsing and before anything is routed (no DO call,
 * no server built): a batch holds at most MAX_BATCH_MESSAGES messages, and at most
 * MAX_CANCELLATIONS_PER_REQUEST of them may be `notifications/cancelled` (each one is a call to
 * the team's Durable Object). The body's byte size is capped before parsing (MAX_BODY_BYTES).
 */

/** The MCP TypeScript SDK refuses larger batches too; here the refusal comes before any work. */
export const MAX_BATCH_MESSAGES = 100;
/** A client cancels the calls it has in flight; more than this in one request is not a client. */
export const MAX_CANCELLATIONS_PER_REQUEST = 10;

/** Null when `body` is within bounds, else the message for a 400. */
export function batchProblem(body: unknown): string | null {
  if (!Array.isArray(body)) return null;
  if (body.length === 0) return 'Invalid Request: an empty batch';
  if (body.length > MAX_BATCH_MESSAGES) return `Invalid Request: the batch has ${body.length} messages; at most ${MAX_BATCH_MESSAGES} are accepted per request`;
  const cancels = body.filter((m) => !!m && typeof m === 'object' && (m as { method?: unknown }).method === 'notifications/cancelled').length;
  if (cancels > MAX_CANCELLATIONS_PER_REQUEST) {
    return `Invalid Request: the batch has ${cancels} notifications/cancelled; at most ${MAX_CANCELLATIONS_PER_REQUEST} are accepted per request`;
  }
  return null;
}
