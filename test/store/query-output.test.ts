/**
 * query_output's logic over the artifact store (in-memory R2, the team's artifact index over
 * node:sqlite; wrangler dev in test/e2e): the same results whether a body is in R2 or kept with the team.
 */
import { describe, expect, it } from 'vitest';
import { putArtifactBody } from '../../src/store/artifacts.ts';
import { indexArtifact } from '../../src/dispatch/artifact-client.ts';
import { queryOutput } from '../../src/governed/query-output.ts';
import type { StreamName } from '../../src/contracts/agent-protocol.ts';
import { bodyOf, fakeEnv } from './fakes.ts';

const T0 = 1_800_000_000_000;
const enc = new TextEncoder();

type Place = 'r2' | 'team';

async function seed(streams: Partial<Record<StreamName, string>>, o: { team?: string; handle?: string; retentionHours?: number; place?: Place } = {}) {
  const f = fakeEnv();
  f.teams.clock.now = T0;
  const team = o.team ?? 'team-a';
  for (const [stream, text] of Object.entries(streams) as [StreamName, string][]) {
    const b = enc.encode(text);
    const entry = {
      handle: o.handle ?? 'art_q',
      jobId: 'job-q',
      stream,
      lines: text.split('\n').length - 1,
      truncated: false,
      retentionHours: o.retentionHours ?? 24,
    };
    if (o.place === 'team') {
      expect(await indexArtifact(f.env, team, { ...entry, r2Key: null, bytes: b.length }, b)).toBe('do');
      continue;
    }
    const r = await putArtifactBody(f.env, { ...entry, team, body: bodyOf(b), contentLength: b.length });
    if (!r.ok) throw new Error(r.error.message);
    expect(await indexArtifact(f.env, team, { ...entry, r2Key: r.value.r2Key, bytes: b.length }, null)).toBe('r2');
  }
  return f;
}

const lines = (n: number, mark: (i: number) => string = () => '') => Array.from({ length: n }, (_, i) => `l${i + 1}${mark(i + 1)}`).join('\n') + '\n';

describe.each<Place>(['r2', 'team'])('queryOutput over a body in %s', (place) => {
  it('searches both streams by default, stdout first, with the defaults (10 excerpts, 3 lines of context)', async () => {
    const { env } = await seed({ stdout: lines(20, (i) => (i === 10 ? ' FAIL' : '')), stderr: lines(5, (i) => (i === 2 ? ' fail' : '')) });
    const r = await queryOutput(env, 'team-a', { artifactHandle: 'art_q', queryTerms: ['fail'] }, T0);
    expect(r).toEqual({
      ok: true,
      value: {
        artifactHandle: 'art_q',
        excerpts: [
          { lineStart: 7, lineEnd: 13, content: 'l7\nl8\nl9\nl10 FAIL\nl11\nl12\nl13', source: 'stdout' },
          { lineStart: 1, lineEnd: 5, content: 'l1\nl2 fail\nl3\nl4\nl5', source: 'stderr' },
        ],
        totalLines: 25,
        totalBytes: enc.encode(lines(20, (i) => (i === 10 ? ' FAIL' : ''))).length + enc.encode(lines(5, (i) => (i === 2 ? ' fail' : ''))).length,
        searchedStreams: ['stdout', 'stderr'],
        matchCount: 2,
        matchStatus: 'matched',
      },
    });
  });

  it('caps excerpts across streams at maxExcerpts, stdout first, and still counts all matches', async () => {
    const { env } = await seed({ stdout: lines(100, (i) => (i % 10 === 0 ? ' x' : '')), stderr: lines(100, (i) => (i % 10 === 0 ? ' x' : '')) }, { place });
    const r = await queryOutput(env, 'team-a', { artifactHandle: 'art_q', queryTerms: [' x'], maxExcerpts: 12, contextLines: 0 }, T0);
    if (!r.ok) throw new Error(r.error.message);
    expect(r.value.excerpts.map((e) => e.source)).toEqual([...Array(10).fill('stdout'), 'stderr', 'stderr']);
    expect(r.value.matchCount).toBe(20);
  });

  it('searches only the requested stream', async () => {
    const { env } = await seed({ stdout: 'a hit\n', stderr: 'b hit\n' }, { place });
    const r = await queryOutput(env, 'team-a', { artifactHandle: 'art_q', queryTerms: ['hit'], stream: 'stderr', contextLines: 0 }, T0);
    expect(r.ok && r.value).toMatchObject({ searchedStreams: ['stderr'], excerpts: [{ content: 'b hit', source: 'stderr' }], totalLines: 1 });
  });

  it('reports noMatch with the stream sizes when nothing matches', async () => {
    const { env } = await seed({ stdout: lines(3) }, { place });
    const r = await queryOutput(env, 'team-a', { artifactHandle: 'art_q', queryTerms: ['zzz'] }, T0);
    expect(r.ok && r.value).toMatchObject({ excerpts: [], matchCount: 0, matchStatus: 'noMatch', totalLines: 3, searchedStreams: ['stdout'] });
  });

  it("answers not found for another team's handle, an unknown handle and an expired one", async () => {
    const { env } = await seed({ stdout: 'secret\n' }, { retentionHours: 1, place });
    const msg = { ok: false, error: { code: 'not_found', message: 'artifact "art_q" not found (it may have expired)' } };
    expect(await queryOutput(env, 'team-b', { artifactHandle: 'art_q', queryTerms: ['secret'] }, T0)).toEqual(msg);
    expect(await queryOutput(env, 'team-a', { artifactHandle: 'art_q', queryTerms: ['secret'] }, T0 + 3_600_000)).toEqual(msg);
    expect(await queryOutput(env, 'team-a', { artifactHandle: 'art_nope', queryTerms: ['secret'] }, T0)).toMatchObject({
      ok: false,
      error: { code: 'not_found' },
    });
  });
});

describe('queryOutput over R2', () => {
  it('answers not found when the body is gone although the row is still there', async () => {
    const { env, r2 } = await seed({ stdout: 'x\n' });
    r2.objects.clear();
    expect(await queryOutput(env, 'team-a', { artifactHandle: 'art_q', queryTerms: ['x'] }, T0)).toMatchObject({ ok: false, error: { code: 'not_found' } });
  });

  it('turns a failing read into an upstream_error value', async () => {
    const { env, r2 } = await seed({ stdout: 'x\n' });
    r2.get = async () =>
      ({
        body: new ReadableStream<Uint8Array>({ pull: (c) => c.error(new Error('R2 read reset')) }),
      }) as never;
    expect(await queryOutput(env, 'team-a', { artifactHandle: 'art_q', queryTerms: ['x'] }, T0)).toEqual({
      ok: false,
      error: { code: 'upstream_error', message: 'searching artifact "art_q" failed: R2 read reset' },
    });
  });

  it('validates its input with the tool schema', async () => {
    const { env } = await seed({ stdout: 'x\n' });
    const bad = [
      { artifactHandle: 'art_q', queryTerms: [] },
      { artifactHandle: 'art_q', queryTerms: ['x'], maxExcerpts: 0 },
      { artifactHandle: 'art_q', queryTerms: ['x'], contextLines: 11 },
      { artifactHandle: '', queryTerms: ['x'] },
      { artifactHandle: 'art_q', queryTerms: ['x'], stream: 'stdin' },
    ];
    for (const input of bad) {
      expect(await queryOutput(env, 'team-a', input as never, T0), JSON.stringify(input)).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
    }
  });

  it('streams the body from R2 once per stream', async () => {
    const { env, r2 } = await seed({ stdout: 'a\n', stderr: 'b\n' });
    r2.calls.length = 0;
    await queryOutput(env, 'team-a', { artifactHandle: 'art_q', queryTerms: ['a'] }, T0);
    expect(r2.calls).toEqual(['get t/team-a/a/art_q/stdout', 'get t/team-a/a/art_q/stderr']);
  });
});
