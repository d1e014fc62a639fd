/**
 * One page of a job's stdout/stderr from a byte offset, for the `job_output` tool and the admin
 * API alike: the stored artifact (in R2, or with the team) once that stream's upload is complete; otherwise what the edge
 * kept — the output relayed live (while the job runs, while its upload runs, and after an upload
 * failed or the agent was lost), or an ended job's inline result when that holds more. Never ends
 * inside a UTF-8 character.
 */
import type { Env } from '../env.ts';
import type { StreamName } from '../contracts/agent-protocol.ts';
import { isTerminal } from '../contracts/job-view.ts';
import type { JobView } from '../contracts/job-view.ts';
import { liveOutput } from './client.ts';
import { artifactRows, readArtifact } from './artifact-client.ts';

export interface OutputPage {
  data: Uint8Array;
  /** Bytes in the stream; null while more can still arrive (the job runs, or its upload does). */
  total: number | null;
  source: 'live' | 'artifact' | 'result' | 'none';
  nextOffset: number;
  eof: boolean;
}

/** `{ expired: true }`: the index names an artifact whose body is gone (retention). */
export async function readJobOutput(
  env: Env,
  team: string,
  job: JobView,
  stream: StreamName,
  offset: number,
  max: number,
): Promise<OutputPage | { expired: true }> {
  let data: Uint8Array = new Uint8Array(0);
  let total: number | null = null;
  let source: OutputPage['source'] = 'none';
  const ended = isTerminal(job.state);
  const art = job.artifacts[stream];
  const row = art.state === 'complete' ? (await artifactRows(env, team, job.artifact_handle)).find((r) => r.stream === stream) : undefined;
  if (row) {
    source = 'artifact';
    total = row.bytes;
    if (offset < row.bytes) {
      const got = await readArtifact(env, team, row, offset, Math.min(max, row.bytes - offset));
      if (!got) return { expired: true };
      data = got;
    }
  } else if (ended && art.state === 'none' && art.bytes === 0) {
    total = 0;
  } else {
    const kept = await liveOutput(env, team, job.job_id, stream, offset, max);
    source = kept?.source ?? 'live';
    data = kept?.data ?? new Uint8Array(0);
    // Settled: nothing more will ever be kept for this stream than what is there now.
    total = ended && art.state !== 'uploading' ? (kept?.total ?? 0) : null;
  }
  // Never cut a UTF-8 character in two: the rest comes with the next read.
  if (total === null || offset + data.byteLength < total) data = data.subarray(0, utf8Boundary(data));
  const nextOffset = offset + data.byteLength;
  return { data, total, source, nextOffset, eof: total !== null && nextOffset >= total };
}

/** Length of the longest prefix of `b` that does not end inside a multi-byte UTF-8 sequence. */
function utf8Boundary(b: Uint8Array): number {
  let i = b.byteLength;
  let back = 0;
  while (i > 0 && back < 4 && (b[i - 1] & 0xc0) === 0x80) i--, back++;
  if (i === 0) return b.byteLength;
  const lead = b[i - 1];
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return need > back + 1 ? i - 1 : b.byteLength;
}
