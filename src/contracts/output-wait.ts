/**
 * `job_output`'s wait (`wait_ms`, `until`): how long a read may wait for new output, and what `until` matches.
 * Defined once: the tool validates it, the team's object applies it (src/dispatch/output-wait.ts).
 */
import { z } from 'zod';

/** Longest `wait_ms`: below the 60 s most MCP clients allow a request, so the answer comes before they give up. */
export const OUTPUT_WAIT_MAX_MS = 30_000;
/** Longest `until`. */
const UNTIL_MAX_CHARS = 200;
/**
 * Bytes of the output `until` is looked for in: the last this many of what is readable from the offset. Bounds the
 * work a pattern costs the team's object, whatever the output.
 */
export const UNTIL_WINDOW_BYTES = 64 * 1024;

export const OutputWaitInput = {
  wait_ms: z
    .number()
    .int()
    .min(0)
    .max(OUTPUT_WAIT_MAX_MS)
    .optional()
    .describe(`Wait up to this long (≤ ${OUTPUT_WAIT_MAX_MS} ms) for output past offset (or for until) before answering; the job's end answers at once`),
  until: z
    .string()
    .min(1)
    .max(UNTIL_MAX_CHARS)
    .optional()
    .describe(
      `With wait_ms: wait until the output past offset contains this text (e.g. ">>> "); /…/ is a regular expression (JavaScript, flags none), looked for in the last ${UNTIL_WINDOW_BYTES} bytes`,
    ),
};

/** A matcher for `until`, or an error naming what is wrong with its regular expression. */
export function untilMatcher(until: string): { ok: true; test: (text: string) => boolean } | { ok: false; message: string } {
  if (until.length > 2 && until.startsWith('/') && until.endsWith('/')) {
    try {
      const re = new RegExp(until.slice(1, -1));
      return { ok: true, test: (t) => re.test(t) };
    } catch (e) {
      return { ok: false, message: `until: not a valid regular expression: ${(e as Error).message}` };
    }
  }
  return { ok: true, test: (t) => t.includes(until) };
}
