/**
 * Accepts what a script's isolate reports back. The runner's own caps run inside the isolate,
 * after the script, on built-ins the script may have replaced (`JSON.stringify`,
 * `TextEncoder.prototype.encode`, …), so the report is untrusted input: its shape, the console
 * and return-value caps and the return value's JSON are checked again here.
 */
import { z } from 'zod';
import { CONSOLE_MAX_BYTES, ERROR_MAX_BYTES, RETURN_MAX_BYTES } from './limits.ts';
import type { ScriptRunReport } from './protocol.ts';

const RawReport = z.object({
  console: z.string(),
  consoleTruncated: z.boolean(),
  resultJson: z.string().nullable(),
  error: z.string().nullable(),
});

/** The report as the caller sees it: the result parsed, every cap applied. */
export interface AcceptedReport {
  console: string;
  consoleTruncated: boolean;
  /** Present when the script succeeded and returned something. */
  result?: unknown;
  /** Without the `Sandbox error: ` prefix; null on success. */
  error: string | null;
}

export const TRUNCATED_LINE = '[output truncated]';

export function acceptReport(raw: ScriptRunReport | unknown): AcceptedReport {
  const parsed = RawReport.safeParse(raw);
  if (!parsed.success) return { console: '', consoleTruncated: false, error: "the script's isolate returned a malformed report" };
  const r = parsed.data;
  const con = capConsole(r.console, r.consoleTruncated);
  if (r.error !== null) return { ...con, error: sanitizeError(r.error) };
  if (r.resultJson === null) return { ...con, error: null };
  if (byteLength(r.resultJson) > RETURN_MAX_BYTES) return { ...con, error: `Return value exceeds limit (${RETURN_MAX_BYTES} bytes)` };
  try {
    return { ...con, result: JSON.parse(r.resultJson) as unknown, error: null };
  } catch {
    return { ...con, error: 'Return value could not be read back as JSON (did the script replace JSON.stringify?)' };
  }
}

/** Keeps whole lines up to the console cap (the marker line included), then one `[output truncated]`. */
function capConsole(text: string, truncated: boolean): { console: string; consoleTruncated: boolean } {
  if (byteLength(text) <= CONSOLE_MAX_BYTES) return { console: text, consoleTruncated: truncated };
  const bytes = new TextEncoder().encode(text);
  const room = CONSOLE_MAX_BYTES - byteLength(TRUNCATED_LINE) - 1;
  let cut = bytes.lastIndexOf(0x0a, room);
  if (cut < 0) cut = 0;
  const kept = new TextDecoder().decode(bytes.subarray(0, cut));
  return { console: kept === '' ? TRUNCATED_LINE : `${kept}\n${TRUNCATED_LINE}`, consoleTruncated: true };
}

/** No host paths, no stack frames, and a message of reasonable size. */
export function sanitizeError(message: string): string {
  let m = message.replace(/(file:\/\/)?\/[\w.\-/]+\.(m?js|ts)(:\d+)*/g, '<path>').replace(/\n\s+at [^\n]*/g, '');
  if (byteLength(m) > ERROR_MAX_BYTES) {
    const cut = new TextDecoder().decode(new TextEncoder().encode(m).subarray(0, ERROR_MAX_BYTES));
    m = `${cut.replace(/\uFFFD$/, '')}… [error message truncated]`;
  }
  return m;
}

function byteLength(s: string): number {
  return new TextEncoder().encode(s).byteLength;
}
