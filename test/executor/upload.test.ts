/** Artifact upload: exact Content-Length, headers, retries on 5xx, no retry on a refusal. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uploadArtifact } from '../../executor/jobs/upload.ts';

let server: Server;
let url: string;
let dir: string;
let replies: number[] = [];
const seen: { url: string; headers: Record<string, unknown>; body: string }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gh-upload-'));
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      seen.push({ url: req.url!, headers: req.headers, body });
      res.writeHead(replies.shift() ?? 201).end('{"error":{"code":"x","message":"no"}}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

const item = (file: string, bytes: number) => ({ jobId: 'j1', handle: 'art_abcdefgh', stream: 'stdout' as const, file, bytes, lines: 2, truncated: true });

describe('artifact upload', () => {
  it('PUTs the file with its length and the X-Gatehouse headers, retrying a 503', async () => {
    const f = join(dir, 'a');
    writeFileSync(f, 'one\ntwo\n');
    replies = [503];
    seen.length = 0;
    const r = await uploadArtifact({ url, token: 'tok' }, item(f, 8));
    expect(r.ok).toBe(true);
    expect(seen).toHaveLength(2);
    expect(seen[1]).toMatchObject({
      url: '/agent/v1/artifacts/art_abcdefgh/stdout', body: 'one\ntwo\n',
      headers: { 'content-length': '8', authorization: 'Bearer tok', 'x-gatehouse-job': 'j1', 'x-gatehouse-lines': '2', 'x-gatehouse-truncated': '1' },
    });
  });

  it('does not retry a refusal (413) and says why', async () => {
    const f = join(dir, 'b');
    writeFileSync(f, 'x');
    replies = [413];
    seen.length = 0;
    const r = await uploadArtifact({ url, token: 'tok' }, item(f, 1));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toMatch(/refused: HTTP 413/);
    expect(seen).toHaveLength(1);
  });
});
