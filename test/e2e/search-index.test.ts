/**
 * The search index end to end (real `wrangler dev` with R2, a real agent, the official MCP client):
 * a job's large stdout is uploaded with its index first, and `query_output` answers exactly what a
 * whole scan of the same text answers — for a rare term (narrowed to a few ranged R2 reads) and for
 * queries the index cannot narrow. Nobody writes a stream's index once its body is stored, not even
 * the job's own agent with its grant; another agent of the team cannot write it at all.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { startGateway, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { ARTIFACT_UPLOAD_PATH } from '../../src/contracts/agent-protocol.ts';
import { SEARCH_INDEX_MIN_BYTES } from '../../src/search/block-index.ts';
import { searchText } from '../../src/search/line-search.ts';
import { AgentProxy } from './agent-proxy.ts';
import { Fleet, call } from './fleet.ts';
import { until } from '../support/until.ts';

const POLICY = {
  ...DEFAULT_POLICY,
  shell: { enabled: true, allow: ['/.*/'] },
  executables: { ...DEFAULT_POLICY.executables, allow: [...DEFAULT_POLICY.executables.allow, 'seq', 'sed'] },
  limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: 120_000, maxArtifactBytes: 64 * 1024 * 1024 },
};
/** `seq 1 N` with two lines marked: about 8 MB, over SEARCH_INDEX_MIN_BYTES. */
const N = 400_000;
const COMMAND = `seq 1 ${N} | sed -e 's/^123457$/123457 FATAL out of memory/' -e 's/^345679$/345679 Fatal Out Of Memory again/' -e 's/$/ compiled module ok/'`;
const expectedText = () => {
  const lines: string[] = [];
  for (let i = 1; i <= N; i++) {
    const mark = i === 123_457 ? ' FATAL out of memory' : i === 345_679 ? ' Fatal Out Of Memory again' : '';
    lines.push(`${i}${mark} compiled module ok`);
  }
  return lines.join('\n') + '\n';
};

/** Keys and sizes of the objects the local R2 emulation holds, read from its own SQLite. */
function r2Objects(): { key: string; size: number }[] {
  const dir = join(gw.stateDir, 'state', 'v3', 'r2', 'miniflare-R2BucketObject');
  const out: { key: string; size: number }[] = [];
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.sqlite'))) {
    const db = new DatabaseSync(join(dir, f), { readOnly: true });
    try {
      if (!db.prepare(`SELECT 1 FROM sqlite_master WHERE name = '_mf_objects'`).get()) continue;
      out.push(...(db.prepare('SELECT key, size FROM _mf_objects ORDER BY key').all() as { key: string; size: number }[]));
    } finally {
      db.close();
    }
  }
  return out;
}

let gw: Gateway;
let proxy: AgentProxy;
let fleet: Fleet;
/** The job of the first test, whose stdout is stored. */
let stored: { jobId: string; handle: string } | null = null;

describe('query_output through the search index', () => {
  beforeAll(async () => {
    gw = await startGateway();
    await gw.putPolicy('search', POLICY);
    fleet = new Fleet(gw, { tmpPrefix: 'gatehouse-search-', capacity: 2 });
    proxy = new AgentProxy(gw.url);
    await proxy.start();
  }, 300_000);

  afterAll(async () => {
    await fleet?.close();
    await proxy?.stop();
    await gw?.stop();
  });

  it('uploads the index before the body, and answers as a whole scan of the same text does', async () => {
    await fleet.agentFor('search', 'search-agent', { url: proxy.url });
    const c = await fleet.mcp('search');
    const r = await call(c, 'execute', { command: COMMAND, timeout_ms: 110_000 }, 180_000);
    expect(r.r.isError, r.t).toBeFalsy();
    const handle = r.s.artifact_handle as string;
    expect(handle).toBeTruthy();
    const text = expectedText();
    expect(new TextEncoder().encode(text).length).toBeGreaterThan(SEARCH_INDEX_MIN_BYTES);

    stored = { jobId: r.s.job_id as string, handle };
    const uploads = () =>
      proxy.uploadRequests.filter((u) => u.request.includes(`/${handle}/stdout`)).map((u) => `${u.request.replace(/^(\w+) .*\/stdout/, '$1 …')} ${u.status}`);
    // The call answers once the edge stored the body; the proxy sees the answer a moment later.
    await until(async () => uploads().length >= 2, 10_000, 'the answer to the body upload');
    expect(uploads()).toEqual(['PUT …/index 201', 'PUT … 201']);
    // Stored beside the body in R2 (read from the local R2 emulation's own SQLite).
    expect(r2Objects().filter((o) => o.key.includes(handle))).toEqual([
      { key: `t/search/a/${handle}/stdout`, size: new TextEncoder().encode(text).length },
      { key: `t/search/a/${handle}/stdout.idx`, size: expect.any(Number) },
    ]);

    for (const [terms, contextLines] of [
      [['out of memory'], 3],
      [['FATAL', 'again'], 0],
      [['ok'], 2],
      [['9999 compiled'], 10],
    ] as const) {
      const q = await call(c, 'query_output', { artifactHandle: handle, queryTerms: [...terms], contextLines, stream: 'stdout' });
      expect(q.r.isError, q.t).toBeFalsy();
      const want = searchText(text, { terms: [...terms], contextLines, maxExcerpts: 10, source: 'stdout' });
      expect(gw.logs()).not.toMatch(/search index of artifact \S+ \S+ (disagrees|not used)/);
      expect(q.s).toMatchObject({
        excerpts: want.excerpts,
        matchCount: want.matchCount,
        totalLines: want.totalLines,
        totalBytes: want.totalBytes,
        matchStatus: want.matchCount > 0 ? 'matched' : 'noMatch',
      });
    }
  }, 300_000);

  it('refuses an index for a stream whose body is stored, even from the job’s agent with its grant, and from another agent of the team', async () => {
    expect(stored).toBeTruthy();
    const { handle, jobId } = stored!;
    const grant = proxy.uploadGrants.get(handle);
    expect(grant).toBeTruthy();
    const put = async (subject: string) =>
      fetch(`${gw.url}${ARTIFACT_UPLOAD_PATH}/${handle}/stdout/index`, {
        method: 'PUT',
        headers: {
          Authorization: `Bearer ${await gw.token({ team: 'search', scopes: ['agent'], subject })}`,
          'X-Gatehouse-Job': jobId,
          'Content-Type': 'application/octet-stream',
          ...grant,
        },
        body: new Uint8Array(16),
      });
    const own = await put('agent-search-agent');
    expect(own.status).toBe(409);
    expect(((await own.json()) as { error: { message: string } }).error.message).toMatch(/can no longer be written|written once/);
    const other = await put('agent-someone-else');
    expect(other.status).toBe(404);
  }, 180_000);
});
