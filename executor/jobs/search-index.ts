/**
 * The search index of a spooled stream (src/search/block-index.ts), built from the file and sent
 * before its body: `PUT {url}/agent/v1/artifacts/{handle}/{stream}/index` with the job's upload
 * grant, like the body. The agent builds it because it reads the bytes anyway; the Worker would pay
 * CPU for every byte (docs/tools.md, "How search scales"). Best effort: without an index the
 * gateway scans the whole body, so a failure here only costs search time, never the upload.
 */
import { request } from 'undici';
import { ARTIFACT_UPLOAD_PATH, UPLOAD_AGENT_HEADER, UPLOAD_TOKEN_HEADER, type StreamName, type UploadGrant } from '../../src/contracts/agent-protocol.ts';
import { BlockIndexBuilder, SEARCH_BLOCK_BYTES, SEARCH_INDEX_MAX_BYTES, SEARCH_INDEX_MIN_BYTES } from '../../src/search/block-index.ts';
import { fileChunks } from './file-chunks.ts';

/** What the index upload needs of an upload (a subset of upload.ts's target and item). */
export interface SearchIndexUpload {
  target: { url: string; token: string };
  item: { jobId: string; handle: string; stream: StreamName; file: string; bytes: number; grant?: UploadGrant };
}

/** The encoded index of the file's first `bytes` bytes. */
export async function buildSearchIndex(file: string, bytes: number, blockBytes: number = SEARCH_BLOCK_BYTES): Promise<Uint8Array> {
  const b = new BlockIndexBuilder(blockBytes);
  // The builder is done with a chunk when push returns: one reused buffer serves the whole file.
  for await (const chunk of fileChunks(file, 0, bytes)) b.push(chunk);
  return b.finish();
}

const ATTEMPTS = 3;

/**
 * Builds and sends the stream's index when it is large enough to be worth one; returns why not
 * when it was not sent (null when it was, or was not needed). Never throws.
 */
export async function uploadSearchIndex({ target, item }: SearchIndexUpload): Promise<string | null> {
  if (item.bytes < SEARCH_INDEX_MIN_BYTES) return null;
  let index: Uint8Array;
  try {
    index = await buildSearchIndex(item.file, item.bytes);
  } catch (e) {
    return `building the search index of ${item.stream} failed: ${(e as Error).message}`;
  }
  if (index.byteLength > SEARCH_INDEX_MAX_BYTES) return `the search index of ${item.stream} is ${index.byteLength} bytes, over ${SEARCH_INDEX_MAX_BYTES}`;
  const url = `${target.url.replace(/\/+$/, '')}${ARTIFACT_UPLOAD_PATH}/${encodeURIComponent(item.handle)}/${item.stream}/index`;
  let why = '';
  for (let i = 0; i < ATTEMPTS; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 250 * 2 ** i));
    try {
      const res = await request(url, {
        method: 'PUT',
        body: index,
        headers: {
          authorization: `Bearer ${target.token}`,
          'x-gatehouse-job': item.jobId,
          ...(item.grant ? { [UPLOAD_AGENT_HEADER.toLowerCase()]: item.grant.agentId, [UPLOAD_TOKEN_HEADER.toLowerCase()]: item.grant.token } : {}),
          'content-length': String(index.byteLength),
          'content-type': 'application/octet-stream',
        },
        headersTimeout: 60_000,
        bodyTimeout: 60_000,
      });
      const text = (await res.body.text()).slice(0, 500);
      if (res.statusCode >= 200 && res.statusCode < 300) return null;
      why = `HTTP ${res.statusCode}: ${text}`;
      // A gateway without the route (404) or a refusal will not change on a retry.
      if (res.statusCode < 500 && res.statusCode !== 408 && res.statusCode !== 429) break;
    } catch (e) {
      why = (e as Error).message;
    }
  }
  return `the search index of ${item.stream} was not stored (its search scans the whole body): ${why}`;
}
