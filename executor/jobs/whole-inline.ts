/**
 * Whether a stream's inline text in the `job.exit` is every byte of it, so its upload can be left
 * out (agent protocol v4: the edge keeps the stream's artifact in the exit). The edge checks the same
 * with `exitHoldsStream` from the byte count alone; only the agent has the bytes, so only it can
 * tell text that decoded cleanly from text where invalid bytes became U+FFFD of the same length.
 */
import { exitHoldsStream, type ExitStreams } from '../../src/contracts/inline-result.ts';
import type { StreamName } from '../../src/contracts/agent-protocol.ts';

const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** `head` holds the stream's first bytes (all of them when the exit holds it whole). */
export function inlineHoldsWhole(exit: ExitStreams, stream: StreamName, head: Uint8Array): boolean {
  if (!exitHoldsStream({ ...exit, pendingArtifacts: [] }, stream)) return false;
  const bytes = exit.streams[stream].bytes;
  if (head.byteLength < bytes) return false;
  try {
    return strict.decode(head.subarray(0, bytes)) === exit[stream];
  } catch {
    return false;
  }
}
