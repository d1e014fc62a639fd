/**
 * Where an artifact's body is kept: a small body in the team's object (artifact-index.ts), a larger
 * one in R2 — whichever is cheaper for as long as the team keeps artifacts, up to a fixed most.
 * The upload route and script mode decide with it before storing a body.
 */

/**
 * Prices (USD, Workers Paid), as of this writing:
 * - Durable Objects SQLite storage $0.20 per GB-month, rows written $1.00 per million
 *   (https://developers.cloudflare.com/durable-objects/platform/pricing/);
 * - R2 Standard storage $0.015 per GB-month, Class A operations (a PUT) $4.50 per million, deletes free
 *   (https://developers.cloudflare.com/r2/pricing/).
 * A body of S bytes kept T months costs 0.20·S·T/1e9 + 1e-6 (one chunk row) in the object and
 * 0.015·S·T/1e9 + 4.5e-6 (one PUT) in R2 (its index row is the object's either way). They break
 * even at S·T = 3.5e-6 / 1.85e-10 ≈ 18,900 byte-months: at the default 24 h retention a body up
 * to ~575 KB is cheaper in the object, at 7 days ~82 KB, at 90 days (the policy's most) ~6.4 KB.
 */
const DO_STORAGE_USD_PER_GB_MONTH = 0.2;
const DO_ROW_WRITTEN_USD = 1 / 1_000_000;
const R2_STORAGE_USD_PER_GB_MONTH = 0.015;
const R2_PUT_USD = 4.5 / 1_000_000;
const HOURS_PER_MONTH = 730;
const BREAK_EVEN_BYTE_MONTHS = (R2_PUT_USD - DO_ROW_WRITTEN_USD) / ((DO_STORAGE_USD_PER_GB_MONTH - R2_STORAGE_USD_PER_GB_MONTH) / 1e9);

/**
 * The most a body kept in the object holds, whatever the retention: one chunk row, one RPC
 * argument, read whole into memory to be searched; and the object's 10 GB (DO_STORAGE_MAX_BYTES)
 * stays far away. A default call's whole output (inline cap 40,000 bytes) fits.
 */
export const SMALL_BODY_MAX_BYTES = 64 * 1024;

/** Bodies up to this many bytes stay in the team's object, larger ones go to R2 (the cheaper place for `retentionHours`). */
export function smallBodyMaxBytes(retentionHours: number): number {
  const months = Math.max(retentionHours, 1) / HOURS_PER_MONTH;
  return Math.min(SMALL_BODY_MAX_BYTES, Math.floor(BREAK_EVEN_BYTE_MONTHS / months));
}
