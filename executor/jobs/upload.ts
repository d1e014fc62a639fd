/**
 * Uploads a spooled stream as the job's artifact: `PUT {url}/agent/v1/artifacts/{handle}/{stream}`
 * with a file stream body and an exact Content-Length (the edge takes no chunked uploads).
 * Retries network errors and 5xx/408/429 with backoff; other 4xx are final.
 */
import { createReadStream } from 'node:fs';
import { request } from 'undici';
import { ARTIFACT_UPLOAD_PATH, type StreamName } from '../../src/contracts/agent-protocol.ts';
import type { Result } from '../../src/contracts/errors.ts';

export interface UploadTarget {
  /** Gateway base URL, e.g. http://127.0.0.1:8787 */
  url: string;
  token: string;
}

export interface UploadItem {
  jobId: string;
  handle: string;
  stream: StreamName;
  file: string;
  bytes: number;
  lines: number;
  truncated: boolean;
}

export async function uploadArtifact(target: UploadTarget, item: UploadItem, attempts = 5): Promise<Result<void>> {
  const url = `${target.url.replace(/\/+$/, '')}${ARTIFACT_UPLOAD_PATH}/${encodeURIComponent(item.handle)}/${item.stream}`;
  let last = '';
  for (let i = 0; i < attempts; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, Math.min(8000, 250 * 2 ** i) * (0.5 + Math.random())));
    try {
      const res = await request(url, {
        method: 'PUT',
        body: createReadStream(item.file),
        headers: {
          'content-length': String(item.bytes),
          'content-type': 'application/octet-stream',
          authorization: `Bearer ${target.token}`,
          'x-gatehouse-job': item.jobId,
          'x-gatehouse-lines': String(item.lines),
          'x-gatehouse-truncated': item.truncated ? '1' : '0',
        },
        headersTimeout: 60_000,
        bodyTimeout: 60_000,
      });
      const text = (await res.body.text()).slice(0, 500);
      if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, value: undefined };
      last = `HTTP ${res.statusCode}: ${text}`;
      const retryable = res.statusCode >= 500 || res.statusCode === 408 || res.statusCode === 429;
      if (!retryable) return { ok: false, error: { code: 'upstream_error', message: `artifact upload of ${item.stream} refused: ${last}` } };
    } catch (e) {
      last = (e as Error).message;
    }
  }
  return { ok: false, error: { code: 'upstream_error', message: `artifact upload of ${item.stream} failed after ${attempts} attempts: ${last}` } };
}
