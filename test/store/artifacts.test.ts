/**
 * The R2 side of artifacts (src/store/artifacts.ts): bodies under team-scoped keys, and what D1's
 * `artifacts` table still holds from before the index moved to the team's object — readable by
 * its team until it expires, swept by the cron in bounded rounds.
 */
import { describe, expect, it } from 'vitest';
import {
  artifactKey,
  cleanupLegacyArtifacts,
  getLegacyArtifactRows,
  newArtifactHandle,
  putArtifactBody,
  type ArtifactBody,
} from '../../src/store/artifacts.ts';
import { bodyOf, fakeEnv, type FakeD1 } from './fakes.ts';

const HOUR = 3_600_000;
const T0 = 1_800_000_000_000;

function body(o: Partial<ArtifactBody> = {}, text = 'hello\nworld\n'): ArtifactBody {
  const bytes = new TextEncoder().encode(text);
  return {
    team: 'team-a',
    handle: 'art_handle1',
    jobId: 'job-1',
    stream: 'stdout',
    body: bodyOf(bytes),
    contentLength: bytes.length,
    lines: 2,
    truncated: false,
    ...o,
  };
}

/** A D1 row as the gateway wrote them before the index moved to the team's object. */
function legacyRow(db: FakeD1, o: { team?: string; handle: string; stream?: string; expiresAt: number }): void {
  const team = o.team ?? 'team-a';
  const stream = o.stream ?? 'stdout';
  db.db
    .prepare(
      `INSERT INTO artifacts (handle, team, job_id, stream, r2_key, bytes, lines, truncated, created_at, expires_at) VALUES (?, ?, 'job-1', ?, ?, 12, 2, 0, ?, ?)`,
    )
    .run(o.handle, team, stream, artifactKey(team, o.handle, stream as 'stdout'), o.expiresAt - 24 * HOUR, o.expiresAt);
}

describe('handles and keys', () => {
  it('makes unguessable url-safe handles: art_ + 32 random bytes', () => {
    const hs = new Set(Array.from({ length: 1000 }, () => newArtifactHandle()));
    expect(hs.size).toBe(1000);
    for (const h of hs) expect(h).toMatch(/^art_[A-Za-z0-9_-]{43}$/);
  });
  it('scopes R2 keys by team', () => {
    expect(artifactKey('t1', 'art_x', 'stderr')).toBe('t/t1/a/art_x/stderr');
  });
});

describe('putArtifactBody', () => {
  it('stores the body under the team key with its metadata, and writes no D1 row', async () => {
    const { env, db, r2 } = fakeEnv();
    const r = await putArtifactBody(env, body({ truncated: true }));
    expect(r).toEqual({ ok: true, value: { bytes: 12, r2Key: 't/team-a/a/art_handle1/stdout' } });
    const obj = r2.objects.get('t/team-a/a/art_handle1/stdout')!;
    expect(new TextDecoder().decode(obj.data)).toBe('hello\nworld\n');
    expect(obj.customMetadata).toEqual({ team: 'team-a', jobId: 'job-1', lines: '2', truncated: '1' });
    expect(db.rows()).toEqual([]);
  });

  it('rejects bad arguments as invalid_argument', async () => {
    const { env } = fakeEnv();
    expect(await putArtifactBody(env, body({ contentLength: -1 }))).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
    expect(await putArtifactBody(env, body({ stream: 'stdin' as 'stdout' }))).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
    expect(await putArtifactBody(env, body({ team: '' }))).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
  });
});

describe('getLegacyArtifactRows', () => {
  it("returns D1's unexpired rows of the caller's team, stdout first, and nothing for another team", async () => {
    const { env, db } = fakeEnv();
    legacyRow(db, { handle: 'art_old', stream: 'stderr', expiresAt: T0 + HOUR });
    legacyRow(db, { handle: 'art_old', stream: 'stdout', expiresAt: T0 + HOUR });
    const rows = await getLegacyArtifactRows(env, 'team-a', 'art_old', T0);
    expect(rows.map((r) => r.stream)).toEqual(['stdout', 'stderr']);
    expect(rows[0]).toMatchObject({ handle: 'art_old', jobId: 'job-1', r2Key: 't/team-a/a/art_old/stdout', bytes: 12, lines: 2, truncated: false });
    expect(await getLegacyArtifactRows(env, 'team-b', 'art_old', T0)).toEqual([]);
    expect(await getLegacyArtifactRows(env, 'team-a', 'art_old', T0 + HOUR)).toEqual([]);
  });
});

describe('cleanupLegacyArtifacts', () => {
  it('deletes expired bodies and rows together in rounds of one R2 call and keeps fresh ones', async () => {
    const { env, db, r2 } = fakeEnv();
    for (let i = 0; i < 1200; i++) {
      legacyRow(db, { handle: `art_old${i}`, expiresAt: T0 - 1 });
      await r2.put(artifactKey('team-a', `art_old${i}`, 'stdout'), 'x');
    }
    legacyRow(db, { handle: 'art_fresh', expiresAt: T0 + HOUR });
    await r2.put(artifactKey('team-a', 'art_fresh', 'stdout'), 'fresh');
    r2.calls.length = 0;
    expect(await cleanupLegacyArtifacts(env, T0)).toEqual({ deleted: 1200 });
    expect(db.rows().map((x) => x.handle)).toEqual(['art_fresh']);
    expect([...r2.objects.keys()]).toEqual(['t/team-a/a/art_fresh/stdout']);
    // Each round: one R2 call of ≤ 1000 keys (each row's body and its search index).
    expect(r2.calls.filter((c) => c.startsWith('delete'))).toEqual(['delete 1000', 'delete 1000', 'delete 400']);
  });

  it('keeps the rows when a round fails, so the next run retries', async () => {
    const { env, db, r2 } = fakeEnv();
    legacyRow(db, { handle: 'art_old', expiresAt: T0 - 1 });
    r2.delete = async () => {
      throw new Error('R2 unavailable');
    };
    expect(await cleanupLegacyArtifacts(env, T0)).toEqual({ deleted: 0 });
    expect(db.rows()).toHaveLength(1);
  });

  it('costs one query when D1 holds nothing expired', async () => {
    const { env, db } = fakeEnv();
    let queries = 0;
    const prepare = db.prepare.bind(db);
    db.prepare = ((sql: string) => (queries++, prepare(sql))) as typeof db.prepare;
    expect(await cleanupLegacyArtifacts(env, T0)).toEqual({ deleted: 0 });
    expect(queries).toBe(1);
  });
});
