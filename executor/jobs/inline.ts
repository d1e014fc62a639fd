/**
 * The inline part of a result, reference 001 semantics: each stream capped at `cap` bytes,
 * then stderr cut so stdout+stderr fit in `cap`; `*Truncated` true whenever anything was
 * left out (the reference implementation forgets stderr's flag in the second cut; we don't).
 * Text is UTF-8 decoded with replacement, and cut only at character boundaries so the
 * decoded text still fits the byte budget.
 */
export interface InlineInput {
  /** The first bytes of the stream (at least min(total, cap) of them). */
  head: Buffer;
  /** Bytes the stream produced in all. */
  total: number;
}

export interface InlineResult {
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

export function inlineResult(out: InlineInput, err: InlineInput, cap: number): InlineResult {
  const o = fit(out, cap);
  const e = fit(err, Math.max(0, cap - Buffer.byteLength(o.text)));
  return { stdout: o.text, stderr: e.text, stdoutTruncated: o.truncated, stderrTruncated: e.truncated };
}

function fit(s: InlineInput, budget: number): { text: string; truncated: boolean } {
  const raw = s.head.subarray(0, Math.min(s.head.length, budget));
  let truncated = raw.length < s.total;
  // stream:true keeps an incomplete trailing sequence back instead of turning it into U+FFFD.
  let text = new TextDecoder('utf-8').decode(raw, { stream: truncated });
  let bytes = Buffer.from(text, 'utf8');
  if (bytes.length > budget) {
    // Replacement characters (3 bytes each for 1 invalid byte) can grow the text past the budget.
    let cut = budget;
    while (cut > 0 && (bytes[cut] & 0xc0) === 0x80) cut--;
    bytes = bytes.subarray(0, cut);
    text = bytes.toString('utf8');
    truncated = true;
  }
  return { text, truncated };
}
