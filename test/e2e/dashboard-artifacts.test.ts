/**
 * The admin artifact API behind the dashboard's output view: listing, ranged reads and tails,
 * download, search — always scoped to the admin token's team. Real gateway, real agent, a job's
 * real output.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, startGateway, type AgentProcess, type Gateway, testSandbox } from './harness.ts';
import { MAX_ARTIFACT_READ_BYTES } from '../../src/contracts/artifact-read.ts';

const SANDBOX = testSandbox();

const TEAM = 'artview';
let gw: Gateway;
let agent: AgentProcess;
let root: string;
let handle: string;
let jobId: string;
/** `seq 1 20000`: lines "1\n" … "20000\n". */
const EXPECTED = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');

async function get(path: string, team = TEAM) {
  const token = await gw.token({ team, scopes: ['admin'] });
  return fetch(`${gw.url}/admin/v1${path}`, { headers: { Authorization: `Bearer ${token}` } });
}
const json = async (r: Response | Promise<Response>): Promise<any> => (await r).json();

beforeAll(async () => {
  gw = await startGateway();
  root = mkdtempSync(join(tmpdir(), 'gatehouse-artview-'));
  agent = startAgent(gw, { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: SANDBOX, capacity: 2 });
  await agent.ready;
  const client = await gw.mcp(TEAM, ['execute']);
  const r = await client.callTool({ name: 'execute', arguments: { command: 'seq', args: ['1', '20000'] } }, undefined, { timeout: 60_000 });
  await client.close();
  const s = r.structuredContent as { artifact_handle: string; job_id: string; exit_code: number };
  expect(s.exit_code).toBe(0);
  handle = s.artifact_handle;
  jobId = s.job_id;
}, 180_000);

afterAll(async () => {
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('admin artifact API', () => {
  it('lists the streams a job wrote', async () => {
    const r = await get(`/artifacts/${handle}`);
    expect(r.status).toBe(200);
    const info = await json(r);
    expect(info).toMatchObject({ artifactHandle: handle, jobId });
    expect(info.streams).toEqual([expect.objectContaining({ stream: 'stdout', bytes: EXPECTED.length, lines: 20000, truncated: false })]);
  });

  it('reads a byte range and a tail, and pages to the end', async () => {
    const a = await json(get(`/artifacts/${handle}/stdout?offset=2&length=6`));
    expect(a).toMatchObject({ offset: 2, length: 6, totalBytes: EXPECTED.length, nextOffset: 8, text: EXPECTED.slice(2, 8) });
    const t = await json(get(`/artifacts/${handle}/stdout?tail=12`));
    expect(t.text).toBe('19999\n20000\n');
    expect(t.nextOffset).toBe(EXPECTED.length);
    // Past the end: an empty page, not an error.
    const end = await json(get(`/artifacts/${handle}/stdout?offset=${EXPECTED.length + 50}`));
    expect(end).toMatchObject({ length: 0, text: '', nextOffset: EXPECTED.length });
    // Without a length a page is at most MAX_ARTIFACT_READ_BYTES; following nextOffset reads everything once.
    let text = '';
    for (let off = 0; off < EXPECTED.length; ) {
      const p = await json(get(`/artifacts/${handle}/stdout?offset=${off}`));
      expect(p.length).toBeLessThanOrEqual(MAX_ARTIFACT_READ_BYTES);
      text += p.text;
      off = p.nextOffset;
    }
    expect(text).toBe(EXPECTED);
  });

  it('downloads the whole stream as a file', async () => {
    const r = await get(`/artifacts/${handle}/stdout/download`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-disposition')).toBe(`attachment; filename="${jobId}-stdout.txt"`);
    expect(await r.text()).toBe(EXPECTED);
  });

  it('searches with the query_output engine', async () => {
    const r = await json(get(`/artifacts/${handle}/search?q=19998&q=12345&contextLines=1&stream=stdout`));
    expect(r.matchStatus).toBe('matched');
    expect(r.totalLines).toBe(20000);
    expect(r.matchCount).toBe(2);
    expect(r.excerpts.find((x: { lineStart: number }) => x.lineStart === 12344)).toMatchObject({ content: '12344\n12345\n12346' });
    expect(r.excerpts.find((x: { lineStart: number }) => x.lineStart === 19997)).toMatchObject({ lineEnd: 19999, content: '19997\n19998\n19999' });
    const none = await json(get(`/artifacts/${handle}/search?q=not-there`));
    expect(none).toMatchObject({ matchStatus: 'noMatch', matchCount: 0, excerpts: [] });
  });

  it('answers another team exactly as for a handle that does not exist', async () => {
    const other = await get(`/artifacts/${handle}`, 'someone-else');
    const missing = await get(`/artifacts/art_${'x'.repeat(43)}`, 'someone-else');
    expect(other.status).toBe(404);
    expect(missing.status).toBe(404);
    const [a, b] = [await json(other), await json(missing)];
    expect(a.error.code).toBe('not_found');
    expect(a.error.message.replace(handle, 'H')).toBe(b.error.message.replace(`art_${'x'.repeat(43)}`, 'H'));
    for (const path of [`/artifacts/${handle}/stdout?tail=10`, `/artifacts/${handle}/stdout/download`, `/artifacts/${handle}/search?q=1`]) {
      expect((await get(path, 'someone-else')).status, path).toBe(404);
    }
    // The explicit team path cannot reach another team either.
    expect((await get(`/teams/${TEAM}/artifacts/${handle}`, 'someone-else')).status).toBe(404);
  });

  it('refuses bad input with what was wrong and what is allowed', async () => {
    const cases: Array<[string, RegExp]> = [
      [`/artifacts/${handle}/stdin`, /stream must be stdout or stderr/],
      [`/artifacts/${handle}/stdout?length=0`, /length must be from 1 to 262144/],
      [`/artifacts/${handle}/stdout?tail=10&offset=3`, /either tail or offset/],
      [`/artifacts/${handle}/stdout?offset=-1`, /offset must be a non-negative integer/],
      [`/artifacts/${handle}/stdout?from=3`, /allowed: offset, length, tail/],
      [`/artifacts/${handle}/search`, /at least one search term/],
      [`/artifacts/${handle}/search?q=a&contextLines=99`, /contextLines/],
      [`/artifacts/${handle}/search?q=a&regex=1`, /unknown query parameter "regex"; allowed: q, stream, contextLines, maxExcerpts/],
      [`/artifacts/${encodeURIComponent('../../etc')}`, /malformed artifact handle/],
    ];
    for (const [path, re] of cases) {
      const r = await get(path);
      expect(r.status, path).toBe(400);
      expect((await json(r)).error.message, path).toMatch(re);
    }
    expect((await get(`/artifacts/${handle}/stderr`)).status).toBe(404);
  });

  it("reads a job's output by job id from a byte offset (the stored artifact once the job ended)", async () => {
    const a = await json(get(`/jobs/${jobId}/output?stream=stdout&offset=0&length=10`));
    expect(a).toMatchObject({
      jobId,
      stream: 'stdout',
      state: 'exited',
      source: 'artifact',
      offset: 0,
      length: 10,
      nextOffset: 10,
      totalBytes: EXPECTED.length,
      eof: false,
      text: EXPECTED.slice(0, 10),
    });
    const end = await json(get(`/jobs/${jobId}/output?stream=stdout&offset=${EXPECTED.length - 6}`));
    expect(end).toMatchObject({ text: '20000\n', eof: true });
    expect((await get(`/jobs/${jobId}/output`, 'someone-else')).status).toBe(404);
    const bad = await get(`/jobs/${jobId}/output?stream=stdin`);
    expect(bad.status).toBe(400);
    expect((await json(bad)).error.message).toMatch(/stream.*(allowed: stream, offset, length)/);
    expect((await json(get(`/jobs/${jobId}/output?length=0`))).error.message).toMatch(/length must be from 1 to 262144/);
  });

  it('requires the admin scope', async () => {
    const token = await gw.token({ team: TEAM, scopes: ['execute', 'artifacts:read'] });
    const r = await fetch(`${gw.url}/admin/v1/artifacts/${handle}`, { headers: { Authorization: `Bearer ${token}` } });
    expect(r.status).toBe(403);
  });
});
