/**
 * Uploads a spooled stream as the job's artifact. Up to one part's size it is one
 * `PUT {url}/agent/v1/artifacts/{handle}/{stream}` with a file stream body and an exact
 * Content-Length (the edge takes no chunked uploads). Above it, the stream goes in parts
 * (`src/contracts/artifact-upload.ts`): Cloudflare refuses a request body over
 * REQUEST_BODY_MAX_BYTES, and a part that fails is sent again alone, not the whole stream.
 * Starting a multipart upload resumes the one the edge holds (its stored parts are skipped), so
 * when a part still fails after its retries (a gateway restart, a dropped connection) the upload
 * starts again from where it stopped, up to MULTIPART_PASSES times. Network errors and
 * 5xx/408/429 are retried with backoff; other 4xx are final. An upload given up is aborted, so
 * the edge keeps none of its parts. Every request names the agent and carries the job's upload
 * grant from its `job.start`: the edge takes a job's artifacts from the agent it sent the job to only.
 * A large stream's search index (search-index.ts) goes before its body.
 */
import { rmSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { request } from 'undici';
import {
  ARTIFACT_UPLOAD_PATH,
  UPLOAD_AGENT_HEADER,
  UPLOAD_TOKEN_HEADER,
  type JobArtifact,
  type StreamName,
  type UploadGrant,
} from '../../src/contracts/agent-protocol.ts';
import { MULTIPART_SEGMENT, MultipartState, partRange, type MultipartStart } from '../../src/contracts/artifact-upload.ts';
import { ARTIFACT_PART_BYTES, ARTIFACT_SINGLE_PUT_MAX_BYTES } from '../../src/contracts/limits.ts';
import type { Result } from '../../src/contracts/errors.ts';
import type { Logger } from '../log.ts';
import { fileChunks } from './file-chunks.ts';
import { uploadSearchIndex } from './search-index.ts';

export interface UploadTarget {
  /** Gateway base URL, e.g. http://127.0.0.1:8787 */
  url: string;
  token: string;
  /**
   * Streams larger than this go in parts of this size. Unset: one PUT up to
   * ARTIFACT_SINGLE_PUT_MAX_BYTES, parts of ARTIFACT_PART_BYTES above it.
   */
  partBytes?: number;
}

export interface UploadItem {
  jobId: string;
  handle: string;
  stream: StreamName;
  file: string;
  bytes: number;
  lines: number;
  truncated: boolean;
  /** The job's upload grant from its `job.start`: the edge takes the job's artifacts from the agent that holds it only. */
  grant?: UploadGrant;
}

type Attempt = { ok: true; text: string } | { ok: false; retryable: boolean; why: string };
const failed = (message: string): Result<void> => ({ ok: false, error: { code: 'upstream_error', message } });

export async function uploadArtifact(target: UploadTarget, item: UploadItem, attempts = 5): Promise<Result<void>> {
  const partBytes = target.partBytes ?? ARTIFACT_PART_BYTES;
  const wholeUpTo = target.partBytes ?? ARTIFACT_SINGLE_PUT_MAX_BYTES;
  // The search index goes first: once the body is stored, nothing of the stream is written any more.
  const noIndex = await uploadSearchIndex({ target, item });
  if (noIndex) console.warn(`job ${item.jobId}: ${noIndex}`);
  return item.bytes > wholeUpTo ? uploadInParts(target, item, partBytes, attempts) : uploadWhole(target, item, attempts);
}

/** Uploads each of a job's spooled streams (one after the other) and says how each ended; spools of failed uploads stay on disk. */
export async function uploadStreams(
  target: UploadTarget,
  job: { jobId: string; handle: string },
  items: Omit<UploadItem, 'jobId' | 'handle'>[],
  log: Logger,
): Promise<JobArtifact[]> {
  const out: JobArtifact[] = [];
  for (const it of items) {
    const r = await uploadArtifact(target, { ...it, jobId: job.jobId, handle: job.handle });
    if (r.ok) {
      rmSync(it.file, { force: true });
      out.push({ type: 'job.artifact', jobId: job.jobId, stream: it.stream, state: 'complete', bytes: it.bytes });
    } else {
      log.error(`job ${job.jobId}: ${r.error.message} (spool kept at ${it.file})`);
      out.push({ type: 'job.artifact', jobId: job.jobId, stream: it.stream, state: 'failed', bytes: it.bytes, error: r.error.message.slice(0, 1000) });
    }
  }
  return out;
}

async function uploadWhole(target: UploadTarget, item: UploadItem, attempts: number): Promise<Result<void>> {
  const r = await withRetries(attempts, () =>
    send(target, item, 'PUT', '', {
      body: () => fileChunks(item.file, 0, item.bytes),
      length: item.bytes,
      headers: { 'content-type': 'application/octet-stream', 'x-gatehouse-lines': String(item.lines), 'x-gatehouse-truncated': item.truncated ? '1' : '0' },
    }),
  );
  if (r.ok) return { ok: true, value: undefined };
  return failed(
    r.retryable ? `artifact upload of ${item.stream} failed after ${attempts} attempts: ${r.why}` : `artifact upload of ${item.stream} refused: ${r.why}`,
  );
}

/** Passes over a multipart upload: each starts again from what the edge holds (after a gateway restart, say). */
const MULTIPART_PASSES = 3;

async function uploadInParts(target: UploadTarget, item: UploadItem, partBytes: number, attempts: number): Promise<Result<void>> {
  let last: Attempt = { ok: false, retryable: true, why: 'not attempted' };
  for (let pass = 1; pass <= MULTIPART_PASSES; pass++) {
    if (pass > 1) await new Promise((r) => setTimeout(r, 2000 * pass));
    last = await multipartPass(target, item, partBytes, attempts);
    if (last.ok) return { ok: true, value: undefined };
    if (!last.retryable) break;
  }
  // Given up: the edge aborts the R2 upload, so none of its parts stay stored. Best effort: if this
  // does not get through, the edge aborts it itself once the agent reports the upload failed.
  await withRetries(2, () => send(target, item, 'DELETE', `/${MULTIPART_SEGMENT}`, {}));
  return failed(`artifact upload of ${item.stream} in parts of ${partBytes} bytes: ${last.ok ? '' : last.why}`);
}

/** Starts or resumes the upload, sends the parts the edge does not hold (each with its retries), completes. */
async function multipartPass(target: UploadTarget, item: UploadItem, partBytes: number, attempts: number): Promise<Attempt> {
  const start: MultipartStart = { bytes: item.bytes, partBytes, lines: item.lines, truncated: item.truncated };
  const begun = await withRetries(attempts, () => send(target, item, 'POST', `/${MULTIPART_SEGMENT}`, { json: start }));
  if (!begun.ok) return { ...begun, why: `it could not start: ${begun.why}` };
  let state: MultipartState;
  try {
    state = MultipartState.parse(JSON.parse(begun.text));
  } catch {
    return { ok: false, retryable: false, why: `the gateway's answer to the start is not a multipart state: ${begun.text.slice(0, 200)}` };
  }
  const done = new Set(state.done);
  for (let n = 1; n <= state.parts; n++) {
    if (done.has(n)) continue;
    const { start: from, end } = partRange(item.bytes, partBytes, n);
    const r = await withRetries(attempts, () =>
      send(target, item, 'PUT', `/${MULTIPART_SEGMENT}/${n}`, {
        // Only this part's bytes are read, as they are sent: memory stays flat whatever the part size.
        body: () => fileChunks(item.file, from, end),
        length: end - from,
        headers: { 'content-type': 'application/octet-stream' },
      }),
    );
    if (!r.ok) return { ...r, why: `part ${n} of ${state.parts} ${r.retryable ? `failed after ${attempts} attempts` : 'was refused'}: ${r.why}` };
  }
  const r = await withRetries(attempts, () => send(target, item, 'POST', `/${MULTIPART_SEGMENT}/complete`, {}));
  return r.ok ? r : { ...r, why: `completing it failed: ${r.why}` };
}

async function withRetries(attempts: number, once: () => Promise<Attempt>): Promise<Attempt> {
  let last: Attempt = { ok: false, retryable: true, why: 'not attempted' };
  for (let i = 0; i < attempts; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, Math.min(8000, 250 * 2 ** i) * (0.5 + Math.random())));
    last = await once();
    if (last.ok || !last.retryable) return last;
  }
  return last;
}

interface SendOptions {
  /**
   * A fresh body per attempt (it is read once): the file's bytes through one reused buffer
   * (file-chunks.ts), which undici's write loop allows, so 1 GB sent leaves no garbage behind.
   */
  body?: () => AsyncIterable<Uint8Array>;
  length?: number;
  json?: unknown;
  headers?: Record<string, string>;
}

async function send(target: UploadTarget, item: UploadItem, method: 'PUT' | 'POST' | 'DELETE', suffix: string, o: SendOptions): Promise<Attempt> {
  const url = `${target.url.replace(/\/+$/, '')}${ARTIFACT_UPLOAD_PATH}/${encodeURIComponent(item.handle)}/${item.stream}${suffix}`;
  const json = o.json === undefined ? undefined : JSON.stringify(o.json);
  try {
    const res = await request(url, {
      method,
      // undici takes an async iterable body (its docs; its types name only Readable).
      body: o.body ? (o.body() as unknown as Readable) : json,
      headers: {
        authorization: `Bearer ${target.token}`,
        'x-gatehouse-job': item.jobId,
        ...(item.grant ? { [UPLOAD_AGENT_HEADER.toLowerCase()]: item.grant.agentId, [UPLOAD_TOKEN_HEADER.toLowerCase()]: item.grant.token } : {}),
        ...(o.length !== undefined ? { 'content-length': String(o.length) } : {}),
        ...(json !== undefined ? { 'content-type': 'application/json' } : {}),
        ...o.headers,
      },
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    const text = (await res.body.text()).slice(0, 2000);
    if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, text };
    return {
      ok: false,
      retryable: res.statusCode >= 500 || res.statusCode === 408 || res.statusCode === 429,
      why: `HTTP ${res.statusCode}: ${text.slice(0, 500)}`,
    };
  } catch (e) {
    return { ok: false, retryable: true, why: (e as Error).message };
  }
}
