/** The agent's side of the search index: built from the spooled file, sent before the body with the job's upload grant, best effort. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSearchIndex, uploadSearchIndex } from '../../executor/jobs/search-index.ts';
import { uploadArtifact } from '../../executor/jobs/upload.ts';
import { BlockIndexBuilder, decodeBlockIndex, SEARCH_INDEX_MIN_BYTES } from '../../src/search/block-index.ts';

let server: Server;
let url: string;
let dir: string;
let status = 201;
const seen: { method: string; url: string; headers: Record<string, unknown>; body: Buffer }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gh-search-index-'));
  server = createServer((req, res) => {
    const parts: Buffer[] = [];
    let n = 0;
    req.on('data', (d: Buffer) => {
      // Indexes are kept whole; of a body only its start.
      if (req.url!.endsWith('/index') || n < 4096) parts.push(d);
      n += d.length;
    });
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(parts) });
      res.writeHead(req.url!.endsWith('/index') ? status : 201).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A file of `bytes` bytes of log lines. */
function logFile(name: string, bytes: number): { file: string; data: Buffer } {
  const line = Buffer.from('2026-11-26T04:00:00Z INFO request served in 12ms by worker-7\n');
  const data = Buffer.alloc(bytes);
  for (let o = 0; o < bytes; o += line.length) line.copy(data, o);
  const file = join(dir, name);
  writeFileSync(file, data);
  return { file, data };
}

const grant = { agentId: 'agent-1', token: 'upload-token-1' };
const item = (file: string, bytes: number) => ({
  jobId: 'j1',
  handle: 'art_abcdefgh',
  stream: 'stdout' as const,
  file,
  bytes,
  lines: 0,
  truncated: false,
  grant,
});

describe('the agent builds and sends the search index', () => {
  it('builds from the file what the builder builds from the same bytes', async () => {
    const { file, data } = logFile('small', 300_000);
    const b = new BlockIndexBuilder(4096);
    b.push(data.subarray(0, 250_000));
    expect(await buildSearchIndex(file, 250_000, 4096)).toEqual(b.finish());
  });

  it('sends the index before the body, with the job and its upload grant', async () => {
    const { file } = logFile('big', SEARCH_INDEX_MIN_BYTES + 1000);
    seen.length = 0;
    status = 201;
    const r = await uploadArtifact({ url, token: 'tok' }, item(file, SEARCH_INDEX_MIN_BYTES + 1000));
    expect(r.ok).toBe(true);
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'PUT /agent/v1/artifacts/art_abcdefgh/stdout/index',
      'PUT /agent/v1/artifacts/art_abcdefgh/stdout',
    ]);
    expect(seen[0].headers).toMatchObject({
      authorization: 'Bearer tok',
      'x-gatehouse-job': 'j1',
      'x-gatehouse-agent': 'agent-1',
      'x-gatehouse-upload-token': 'upload-token-1',
      'content-length': String(seen[0].body.length),
    });
    const ix = decodeBlockIndex(new Uint8Array(seen[0].body), SEARCH_INDEX_MIN_BYTES + 1000);
    expect(ix.blocks.length).toBeGreaterThan(1);
  });

  it('sends no index for a stream below SEARCH_INDEX_MIN_BYTES', async () => {
    const { file } = logFile('small2', 1000);
    seen.length = 0;
    expect(await uploadSearchIndex({ target: { url, token: 'tok' }, item: item(file, 1000) })).toBeNull();
    expect(seen).toEqual([]);
  });

  it('uploads the body anyway when the gateway refuses the index, and does not retry a refusal', async () => {
    const { file } = logFile('big2', SEARCH_INDEX_MIN_BYTES);
    seen.length = 0;
    status = 404;
    const why = await uploadSearchIndex({ target: { url, token: 'tok' }, item: item(file, SEARCH_INDEX_MIN_BYTES) });
    expect(why).toMatch(/was not stored \(its search scans the whole body\): HTTP 404/);
    expect(seen).toHaveLength(1);
    seen.length = 0;
    const r = await uploadArtifact({ url, token: 'tok' }, item(file, SEARCH_INDEX_MIN_BYTES));
    expect(r.ok).toBe(true);
    expect(seen.map((s) => s.url)).toEqual(['/agent/v1/artifacts/art_abcdefgh/stdout/index', '/agent/v1/artifacts/art_abcdefgh/stdout']);
    status = 201;
  });
});
