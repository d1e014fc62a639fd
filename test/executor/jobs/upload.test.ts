/**
 * Artifact upload: exact Content-Length, headers, retries on 5xx, no retry on a refusal; above the
 * part size, in parts (start or resume, each part retried alone, complete), aborted when given up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uploadArtifact } from '../../../executor/jobs/upload.ts';
import { ARTIFACT_PART_BYTES, REQUEST_BODY_MAX_BYTES } from '../../../src/contracts/limits.ts';

let server: Server;
let url: string;
let dir: string;
let replies: number[] = [];
/** Answers by request ("METHOD path"), consumed in order, before `replies`; a body for 2xx answers. */
let scripted: { match: string; status: number; body?: unknown }[] = [];
const seen: { method: string; url: string; headers: Record<string, unknown>; body: string }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gh-upload-'));
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => {
      if (body.length < 4096) body += d;
    }); // the start of a big body is enough to check
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const i = scripted.findIndex((x) => `${req.method} ${req.url}` === x.match);
      if (i >= 0) {
        const [x] = scripted.splice(i, 1);
        res.writeHead(x.status).end(JSON.stringify(x.body ?? { error: { code: 'x', message: 'no' } }));
        return;
      }
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
      url: '/agent/v1/artifacts/art_abcdefgh/stdout',
      body: 'one\ntwo\n',
      headers: { 'content-length': '8', authorization: 'Bearer tok', 'x-gatehouse-job': 'j1', 'x-gatehouse-lines': '2', 'x-gatehouse-truncated': '1' },
    });
  });

  it("names the agent and carries the job's upload grant on every request, single PUT and in parts", async () => {
    const f = join(dir, 'g');
    writeFileSync(f, 'x'.repeat(2048));
    const grant = { agentId: 'worker-1', token: 'T'.repeat(43) };
    const expected = { 'x-gatehouse-agent': 'worker-1', 'x-gatehouse-upload-token': 'T'.repeat(43), 'x-gatehouse-job': 'j1' };
    seen.length = 0;
    replies = [];
    expect((await uploadArtifact({ url, token: 'tok' }, { ...item(f, 2048), grant })).ok).toBe(true);
    expect(seen[0]).toMatchObject({ method: 'PUT', headers: expected });
    seen.length = 0;
    scripted = [{ match: 'POST /agent/v1/artifacts/art_abcdefgh/stdout/multipart', status: 201, body: { parts: 2, partBytes: 1024, done: [] } }];
    expect((await uploadArtifact({ url, token: 'tok', partBytes: 1024 }, { ...item(f, 2048), grant })).ok).toBe(true);
    expect(seen.map((r) => `${r.method} ${r.url.replace(/^.*\/stdout/, '…')}`)).toEqual([
      'POST …/multipart',
      'PUT …/multipart/1',
      'PUT …/multipart/2',
      'POST …/multipart/complete',
    ]);
    for (const r of seen) expect(r.headers).toMatchObject(expected);
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

  it('without a part size of its own, sends one PUT while the stream fits one request (100 MB), parts of 64 MiB above', async () => {
    const sparse = (name: string, bytes: number) => {
      const f = join(dir, name);
      writeFileSync(f, '');
      truncateSync(f, bytes);
      return f;
    };
    seen.length = 0;
    replies = [];
    const whole = await uploadArtifact({ url, token: 'tok' }, item(sparse('fits', REQUEST_BODY_MAX_BYTES), REQUEST_BODY_MAX_BYTES));
    expect(whole.ok).toBe(true);
    // A stream this large has its search index sent first (executor/jobs/search-index.ts).
    expect(seen.map((x) => `${x.method} ${x.url}`)).toEqual([
      'PUT /agent/v1/artifacts/art_abcdefgh/stdout/index',
      'PUT /agent/v1/artifacts/art_abcdefgh/stdout',
    ]);
    expect(seen[1].headers['content-length']).toBe(String(REQUEST_BODY_MAX_BYTES));
    seen.length = 0;
    scripted = [{ match: 'POST /agent/v1/artifacts/art_abcdefgh/stdout/multipart', status: 409 }];
    await uploadArtifact({ url, token: 'tok' }, item(sparse('over', REQUEST_BODY_MAX_BYTES + 1), REQUEST_BODY_MAX_BYTES + 1), 1);
    expect(seen[1]).toMatchObject({ method: 'POST', url: '/agent/v1/artifacts/art_abcdefgh/stdout/multipart' });
    expect(JSON.parse(seen[1].body)).toMatchObject({ bytes: REQUEST_BODY_MAX_BYTES + 1, partBytes: ARTIFACT_PART_BYTES });
    scripted = [];
    rmSync(join(dir, 'fits'));
    rmSync(join(dir, 'over'));
  }, 60_000);

  describe('in parts', () => {
    const base = '/agent/v1/artifacts/art_abcdefgh/stdout/multipart';
    const file = () => {
      const f = join(dir, 'big');
      writeFileSync(f, Buffer.from(Array.from({ length: 25 }, (_, i) => String.fromCharCode(97 + i)).join(''))); // a..y
      return f;
    };
    const start = (done: number[] = []) => ({ match: `POST ${base}`, status: 201, body: { parts: 3, partBytes: 10, done } });

    it('starts, sends each part with its exact bytes (a part failing once is sent again alone), then completes', async () => {
      seen.length = 0;
      scripted = [start(), { match: `PUT ${base}/2`, status: 503 }];
      replies = [];
      const r = await uploadArtifact({ url, token: 'tok', partBytes: 10 }, { ...item(file(), 25) });
      expect(r.ok).toBe(true);
      expect(seen.map((x) => `${x.method} ${x.url.replace(base, '…')}`)).toEqual(['POST …', 'PUT …/1', 'PUT …/2', 'PUT …/2', 'PUT …/3', 'POST …/complete']);
      expect(JSON.parse(seen[0].body)).toEqual({ bytes: 25, partBytes: 10, lines: 2, truncated: true });
      expect(seen.filter((x) => x.method === 'PUT').map((x) => [x.body, x.headers['content-length']])).toEqual([
        ['abcdefghij', '10'],
        ['klmnopqrst', '10'],
        ['klmnopqrst', '10'],
        ['uvwxy', '5'],
      ]);
      expect(seen.every((x) => x.headers['x-gatehouse-job'] === 'j1' && x.headers.authorization === 'Bearer tok')).toBe(true);
    });

    it('resumes: parts the gateway already holds are not sent again', async () => {
      seen.length = 0;
      scripted = [start([1, 3])];
      const r = await uploadArtifact({ url, token: 'tok', partBytes: 10 }, item(file(), 25));
      expect(r.ok).toBe(true);
      expect(seen.map((x) => `${x.method} ${x.url.replace(base, '…')}`)).toEqual(['POST …', 'PUT …/2', 'POST …/complete']);
    });

    it('gives up on a refused part without trying the rest, and aborts the upload so nothing of it stays stored', async () => {
      seen.length = 0;
      scripted = [start(), { match: `PUT ${base}/2`, status: 400 }];
      const r = await uploadArtifact({ url, token: 'tok', partBytes: 10 }, item(file(), 25));
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.message).toMatch(/part 2 of 3 was refused: HTTP 400/);
      expect(seen.map((x) => `${x.method} ${x.url.replace(base, '…')}`)).toEqual(['POST …', 'PUT …/1', 'PUT …/2', 'DELETE …']);
    });

    it('sends a stream no larger than one part as one PUT', async () => {
      seen.length = 0;
      scripted = [];
      const r = await uploadArtifact({ url, token: 'tok', partBytes: 25 }, item(file(), 25));
      expect(r.ok).toBe(true);
      expect(seen.map((x) => `${x.method} ${x.url}`)).toEqual(['PUT /agent/v1/artifacts/art_abcdefgh/stdout']);
    });
  });
});
