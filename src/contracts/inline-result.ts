/**
 * The inline part of a result, as the shell-exec contract has it (docs/architecture.md): each stream capped at `cap` bytes,
 * then stderr cut so stdout+stderr fit in `cap`; `*Truncated` true whenever anything was
 * left out (the contract's public implementation forgets stderr's flag in the second cut; we don't).
 * Text is UTF-8 decoded with replacement, and cut only at character boundaries so the
 * decoded text still fits the byte budget.
 *
 * One definition for both sides: the agent builds the result from the first bytes it captured,
 * and the edge rebuilds it from the live output it kept when a `job.exit` says `inlineFromLive`
 * (agent-protocol.ts), so both get the same text from the same bytes. Uint8Array and
 * TextEncoder/TextDecoder only: it runs in workerd as well as in Node.
 */
export interface InlineInput {
  /** The first bytes of the stream (at least min(total, cap) of them; fewer count as left out). */
  head: Uint8Array;
  /** Bytes the stream produced in all. */
  total: number;
}

export interface InlineResult {
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

const enc = new TextEncoder();

export function inlineResult(out: InlineInput, err: InlineInput, cap: number): InlineResult {
  const o = fit(out, cap);
  const e = fit(err, Math.max(0, cap - o.bytes));
  return { stdout: o.text, stderr: e.text, stdoutTruncated: o.truncated, stderrTruncated: e.truncated };
}

function fit(s: InlineInput, budget: number): { text: string; bytes: number; truncated: boolean } {
  const raw = s.head.subarray(0, Math.min(s.head.length, budget));
  let truncated = raw.length < s.total;
  // stream:true keeps an incomplete trailing sequence back instead of turning it into U+FFFD.
  let text = new TextDecoder('utf-8').decode(raw, { stream: truncated });
  let bytes = enc.encode(text);
  if (bytes.length > budget) {
    // Replacement characters (3 bytes each for 1 invalid byte) can grow the text past the budget.
    let cut = budget;
    while (cut > 0 && (bytes[cut] & 0xc0) === 0x80) cut--;
    bytes = bytes.subarray(0, cut);
    // Valid UTF-8 now (our own encoding, cut at a boundary); a leading U+FEFF is text here, not a mark to drop.
    text = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true }).decode(bytes);
    truncated = true;
  }
  return { text, bytes: bytes.length, truncated };
}

/** What `exitHoldsStream` reads of a `job.exit`. */
export interface ExitStreams {
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  streams: Record<'stdout' | 'stderr', { bytes: number; artifactTruncated: boolean }>;
  pendingArtifacts?: readonly ('stdout' | 'stderr')[];
}

/**
 * Whether an exit's inline text is the whole of a stream that produced output, so no upload of it
 * follows (agent protocol v4): nothing cut, and exactly as many UTF-8 bytes as the stream had. The
 * agent leaves such a stream out of its uploads only when those bytes decoded without a replacement
 * (executor/jobs/whole-inline.ts); the edge then keeps the stream's artifact in the exit itself.
 */
export function exitHoldsStream(exit: ExitStreams, stream: 'stdout' | 'stderr'): boolean {
  const s = exit.streams[stream];
  if (s.bytes === 0 || s.artifactTruncated || exit.pendingArtifacts?.includes(stream)) return false;
  if (stream === 'stdout' ? exit.stdoutTruncated : exit.stderrTruncated) return false;
  return enc.encode(exit[stream]).byteLength === s.bytes;
}
