import { describe, expect, it } from 'vitest';
import {
  artifactKey,
  cleanupExpiredArtifacts,
  getArtifactRows,
  newArtifactHandle,
  putArtifact,
  readTail,
  type ArtifactUpload,
} from '../../src/store/artifacts.ts';
import { bodyOf, fakeEnv } from './fakes.ts';

const HOUR = 3_600_000;
const T0 = 1_800_000_000_000;

function upload(o: Partial<ArtifactUpload> & { body?: ReadableStream<Uint8Array> } = {}, text = 'hello\nworld\n'): ArtifactUpload {
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
    retentionHours: 24,
    now: T0,
    ...o,
  };
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

describe('putArtifact', () => {
  it('stores the body under the team key and indexes it with its expiry', async () => {
    const { env, db, r2 } = fakeEnv();
    const r = await putArtifact(env, upload({ truncated: true }));
    expect(r).toEqual({ ok: true, value: { bytes: 12 } });
    expect(new TextDecoder().decode(r2.objects.get('t/team-a/a/art_handle1/stdout')!.data)).toBe('hello\nworld\n');
    expect(db.rows()).toEqual([
      {
        handle: 'art_handle1',
        team: 'team-a',
        job_id: 'job-1',
        stream: 'stdout',
        r2_key: 't/team-a/a/art_handle1/stdout',
        bytes: 12,
        lines: 2,
        truncated: 1,
        created_at: T0,
        expires_at: T0 + 24 * HOUR,
      },
    ]);
  });

  it('is idempotent: a retried upload replaces body and row', async () => {
    const { env, db, r2 } = fakeEnv();
    await putArtifact(env, upload({}, 'first try\n'));
    const r = await putArtifact(env, upload({ now: T0 + 5 }, 'second try, longer\n'));
    expect(r.ok).toBe(true);
    expect(db.rows()).toHaveLength(1);
    expect(db.rows()[0]).toMatchObject({ bytes: 19, created_at: T0 + 5 });
    expect(r2.objects.size).toBe(1);
  });

  it("never re-owns another team's row on a handle collision", async () => {
    const { env, db } = fakeEnv();
    await putArtifact(env, upload());
    const r = await putArtifact(env, upload({ team: 'team-b' }));
    expect(r.ok).toBe(false);
    expect(db.rows()).toEqual([expect.objectContaining({ team: 'team-a' })]);
  });

  it('rejects bad arguments as invalid_argument', async () => {
    const { env } = fakeEnv();
    expect(await putArtifact(env, upload({ contentLength: -1 }))).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
    expect(await putArtifact(env, upload({ retentionHours: 0 }))).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
    expect(await putArtifact(env, upload({ stream: 'stdin' as 'stdout' }))).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
  });

  it('removes the body again when the index write fails', async () => {
    const { env, db, r2 } = fakeEnv();
    db.failNext = 'INSERT INTO artifacts';
    const r = await putArtifact(env, upload());
    expect(r).toMatchObject({ ok: false, error: { code: 'internal' } });
    expect(r2.objects.size).toBe(0);
  });
});

describe('getArtifactRows', () => {
  it("returns the rows of the caller's team, stdout first", async () => {
    const { env } = fakeEnv();
    await putArtifact(env, upload({ stream: 'stderr' }));
    await putArtifact(env, upload({ stream: 'stdout' }));
    const rows = await getArtifactRows(env, 'team-a', 'art_handle1', T0 + 1);
    expect(rows.map((r) => r.stream)).toEqual(['stdout', 'stderr']);
    expect(rows[0]).toEqual({
      handle: 'art_handle1',
      team: 'team-a',
      jobId: 'job-1',
      stream: 'stdout',
      r2Key: 't/team-a/a/art_handle1/stdout',
      bytes: 12,
      lines: 2,
      truncated: false,
      createdAt: T0,
      expiresAt: T0 + 24 * HOUR,
    });
  });

  it('gives another team nothing for the same handle', async () => {
    const { env } = fakeEnv();
    await putArtifact(env, upload());
    expect(await getArtifactRows(env, 'team-b', 'art_handle1', T0)).toEqual([]);
  });

  it('excludes expired rows even before cleanup ran', async () => {
    const { env } = fakeEnv();
    await putArtifact(env, upload({ retentionHours: 1 }));
    expect(await getArtifactRows(env, 'team-a', 'art_handle1', T0 + HOUR - 1)).toHaveLength(1);
    expect(await getArtifactRows(env, 'team-a', 'art_handle1', T0 + HOUR)).toEqual([]);
  });
});

describe('readTail', () => {
  it('reads only a suffix range and starts at a line boundary', async () => {
    const { env, r2 } = fakeEnv();
    const text = Array.from({ length: 1000 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    await putArtifact(env, upload({}, text));
    const [row] = await getArtifactRows(env, 'team-a', 'art_handle1', T0);
    const tail = await readTail(env, row, 40);
    expect(r2.calls).toContain('get t/team-a/a/art_handle1/stdout {"suffix":40}');
    expect(tail.startsWith('line ')).toBe(true);
    expect(tail.endsWith('line 1000\n')).toBe(true);
    expect(text.endsWith(tail)).toBe(true);
    expect(tail.length).toBeLessThanOrEqual(40);
  });

  it('returns the whole body when it is smaller than asked', async () => {
    const { env } = fakeEnv();
    await putArtifact(env, upload());
    const [row] = await getArtifactRows(env, 'team-a', 'art_handle1', T0);
    expect(await readTail(env, row, 1 << 20)).toBe('hello\nworld\n');
  });

  it('keeps a partial line when the tail holds no line break', async () => {
    const { env } = fakeEnv();
    await putArtifact(env, upload({}, 'x'.repeat(100)));
    const [row] = await getArtifactRows(env, 'team-a', 'art_handle1', T0);
    expect(await readTail(env, row, 10)).toBe('x'.repeat(10));
  });
});

describe('cleanupExpiredArtifacts', () => {
  it('deletes expired bodies and rows together and keeps fresh ones', async () => {
    const { env, db, r2 } = fakeEnv();
    for (let i = 0; i < 250; i++) {
      await putArtifact(env, upload({ handle: `art_old${i}`, retentionHours: 1, stream: i % 2 ? 'stderr' : 'stdout' }));
    }
    await putArtifact(env, upload({ handle: 'art_fresh', retentionHours: 48 }));
    const r = await cleanupExpiredArtifacts(env, T0 + 2 * HOUR);
    expect(r).toEqual({ deleted: 250 });
    expect(db.rows().map((x) => x.handle)).toEqual(['art_fresh']);
    expect([...r2.objects.keys()]).toEqual(['t/team-a/a/art_fresh/stdout']);
    // Batched: three rounds of R2 deletes for 250 rows, each row's body and its search index.
    expect(r2.calls.filter((c) => c.startsWith('delete'))).toEqual(['delete 200', 'delete 200', 'delete 100']);
  });

  it('keeps the rows when a round fails, so the next run retries', async () => {
    const { env, db, r2 } = fakeEnv();
    await putArtifact(env, upload({ retentionHours: 1 }));
    r2.delete = async () => {
      throw new Error('R2 unavailable');
    };
    expect(await cleanupExpiredArtifacts(env, T0 + 2 * HOUR)).toEqual({ deleted: 0 });
    expect(db.rows()).toHaveLength(1);
  });

  it('does nothing when nothing expired', async () => {
    const { env } = fakeEnv();
    await putArtifact(env, upload());
    expect(await cleanupExpiredArtifacts(env, T0 + 1)).toEqual({ deleted: 0 });
  });
});
