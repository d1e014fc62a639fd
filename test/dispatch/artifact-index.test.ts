/**
 * The team's artifact index (src/dispatch/artifact-index.ts) over node:sqlite: where each stream's
 * body is (R2, chunks in the object, or the job's own exit), reads of small bodies, and retention —
 * the soonest expiry as the alarm's wake-up, expired rows and R2 bodies deleted in bounded batches.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { ArtifactIndex, SWEEP_DELAY_MS, type ExitSource, type StoredArtifact } from '../../src/dispatch/artifact-index.ts';
import { SMALL_BODY_MAX_BYTES, smallBodyMaxBytes } from '../../src/dispatch/body-place.ts';
import { JOB_RETENTION_MS } from '../../src/contracts/job-view.ts';
import { newArtifactHandle } from '../../src/store/artifacts.ts';
import { dispatchHost, type TestHost } from './sql-host.ts';

const HOUR = 3_600_000;
const enc = new TextEncoder();
const dec = new TextDecoder();

let host: TestHost;
let deletes: string[][];
let r2Fails: boolean;
/** Job `j1` ended at the start of the test with this inline stdout in its exit. */
let exitStdout: string;

const jobs: ExitSource = {
  get: (id: string) => (id === 'j1' ? ({ ended_at: 1_000_000 } as never) : null),
  list: () => ({ rows: [], next: null }),
  result: (id: string) => (id === 'j1' ? ({ stdout: exitStdout, stderr: '' } as never) : null),
};

const entry = (o: Partial<StoredArtifact> = {}): StoredArtifact => ({
  handle: 'art_a',
  jobId: 'j1',
  stream: 'stdout',
  r2Key: null,
  bytes: 0,
  lines: 1,
  truncated: false,
  retentionHours: 24,
  ...o,
});

function index(): ArtifactIndex {
  return new ArtifactIndex(host, jobs);
}

const count = (sql: string) => (host.db.prepare(sql).get() as { n: number }).n;

beforeEach(() => {
  deletes = [];
  r2Fails = false;
  exitStdout = 'not the body\n';
  host = dispatchHost({
    env: {
      ARTIFACTS: {
        delete: async (keys: string[]) => {
          if (r2Fails) throw new Error('R2 unavailable');
          deletes.push(keys);
        },
      },
    } as never,
  });
});

describe('artifact index', () => {
  it('keeps a small body in the object and reads it back whole and by range', () => {
    const ix = index();
    expect(ix.store(entry(), enc.encode('hello\nworld\n'))).toBe('do');
    const [row] = ix.rows('art_a');
    expect(row).toMatchObject({ handle: 'art_a', jobId: 'j1', stream: 'stdout', place: 'do', r2Key: null, bytes: 12, lines: 1, truncated: false });
    expect(row.expiresAt).toBe(host.now() + 24 * HOUR);
    expect(dec.decode(ix.read('art_a', 'stdout')!)).toBe('hello\nworld\n');
    expect(dec.decode(ix.read('art_a', 'stdout', 6, 3)!)).toBe('wor');
    expect(ix.read('art_a', 'stderr')).toBeNull();
    expect(count('SELECT COUNT(*) AS n FROM artifact_chunks')).toBe(1);
  });

  it("points at the job's exit when it holds exactly the body, instead of storing it twice", () => {
    exitStdout = 'héllo\n';
    const ix = index();
    expect(ix.store(entry(), enc.encode('héllo\n'))).toBe('exit');
    expect(count('SELECT COUNT(*) AS n FROM artifact_chunks')).toBe(0);
    expect(dec.decode(ix.read('art_a', 'stdout')!)).toBe('héllo\n');
    expect(ix.rows('art_a')[0]).toMatchObject({ place: 'exit', bytes: 7 });
  });

  it("keeps its own copy when the exit's text is not these bytes (cut inline output, invalid UTF-8) or is pruned before the artifact expires", () => {
    exitStdout = 'hello';
    const ix = index();
    expect(ix.store(entry(), enc.encode('hello\nmore\n'))).toBe('do');
    // Bytes that are not UTF-8 come back from the exit's text differently: the body is kept as it is.
    exitStdout = '\ufffd';
    expect(ix.store(entry({ handle: 'art_b' }), new Uint8Array([0xff]))).toBe('do');
    expect([...ix.read('art_b', 'stdout')!]).toEqual([0xff]);
    exitStdout = 'x\n';
    const longer = Math.ceil(JOB_RETENTION_MS / HOUR) + 1;
    expect(ix.store(entry({ handle: 'art_c', retentionHours: longer }), enc.encode('x\n'))).toBe('do');
  });

  it('records an R2 body by its key; the edge reads those itself', () => {
    const ix = index();
    expect(ix.store(entry({ r2Key: 't/acme/a/art_a/stdout', bytes: 5_000_000 }), null)).toBe('r2');
    expect(ix.rows('art_a')[0]).toMatchObject({ place: 'r2', r2Key: 't/acme/a/art_a/stdout', bytes: 5_000_000 });
    expect(ix.read('art_a', 'stdout')).toBeNull();
  });

  it('answers a handle it does not know, and an expired one, with nothing; lists the newest first', () => {
    const ix = index();
    ix.store(entry({ handle: 'art_old', retentionHours: 1 }), enc.encode('a\n'));
    host.clock.now += 1000;
    ix.store(entry({ handle: 'art_new', stream: 'stderr' }), enc.encode('b\n'));
    ix.store(entry({ handle: 'art_new' }), enc.encode('c\n'));
    expect(ix.rows('art_nope')).toEqual([]);
    expect(ix.rows('art_new').map((r) => r.stream)).toEqual(['stdout', 'stderr']);
    expect(ix.recent(10).map((r) => r.handle)).toEqual(['art_new', 'art_new', 'art_old']);
    host.clock.now += HOUR;
    expect(ix.rows('art_old')).toEqual([]);
    expect(ix.read('art_old', 'stdout')).toBeNull();
    expect(ix.recent(10).map((r) => r.handle)).toEqual(['art_new', 'art_new']);
  });

  it('a retried upload replaces the stream, chunks and all', () => {
    const ix = index();
    ix.store(entry(), enc.encode('first\n'));
    ix.store(entry({ r2Key: 't/acme/a/art_a/stdout', bytes: 100_000 }), null);
    expect(ix.rows('art_a')).toHaveLength(1);
    expect(count('SELECT COUNT(*) AS n FROM artifact_chunks')).toBe(0);
  });
});

describe('artifact retention', () => {
  it('wakes at the soonest expiry, read once per instance and kept by writes', () => {
    const ix = index();
    expect(ix.nextWake(host.now())).toBeNull();
    ix.store(entry({ handle: 'art_day' }), enc.encode('a\n'));
    ix.store(entry({ handle: 'art_hour', retentionHours: 1 }), enc.encode('b\n'));
    // Swept a while after the soonest expiry (one alarm for many), unreadable from the expiry on.
    expect(ix.nextWake(host.now())).toBe(host.now() + HOUR + SWEEP_DELAY_MS);
    // A restarted object reads it back from storage.
    expect(index().nextWake(host.now())).toBe(host.now() + HOUR + SWEEP_DELAY_MS);
    host.clock.now += HOUR;
    expect(ix.rows('art_hour')).toEqual([]);
    expect(ix.read('art_hour', 'stdout')).toBeNull();
    expect(ix.rows('art_day')).toHaveLength(1);
  });

  it('deletes expired rows, chunks and R2 bodies (with their search indexes) and keeps fresh ones', async () => {
    const ix = index();
    ix.store(entry({ handle: 'art_small', retentionHours: 1 }), enc.encode('a\n'));
    ix.store(entry({ handle: 'art_big', retentionHours: 1, r2Key: 't/acme/a/art_big/stdout', bytes: 9 }), null);
    ix.store(entry({ handle: 'art_fresh', retentionHours: 48 }), enc.encode('b\n'));
    const start = host.now();
    host.clock.now += 2 * HOUR;
    expect(await ix.onAlarm(host.now())).toEqual({ deleted: 2 });
    expect(deletes).toEqual([['t/acme/a/art_big/stdout', 't/acme/a/art_big/stdout.idx']]);
    expect(host.db.prepare('SELECT handle FROM artifacts').all()).toEqual([{ handle: 'art_fresh' }]);
    expect(count('SELECT COUNT(*) AS n FROM artifact_chunks')).toBe(1);
    expect(ix.nextWake(host.now())).toBe(start + 48 * HOUR + SWEEP_DELAY_MS);
  });

  it('deletes R2 bodies in calls of at most 1,000 keys, and no more batches than one alarm may take', async () => {
    const ix = index();
    for (let i = 0; i < 1200; i++) ix.store(entry({ handle: `art_${i}`, retentionHours: 1, r2Key: `t/acme/a/art_${i}/stdout`, bytes: 1 }), null);
    host.clock.now += 2 * HOUR;
    expect(await ix.onAlarm(host.now())).toEqual({ deleted: 1200 });
    expect(deletes.map((k) => k.length)).toEqual([1000, 1000, 400]);
    expect(count('SELECT COUNT(*) AS n FROM artifacts')).toBe(0);
    expect(ix.nextWake(host.now())).toBeNull();
  });

  it('keeps the rows when R2 refuses the delete, and tries again a minute later', async () => {
    const ix = index();
    ix.store(entry({ retentionHours: 1, r2Key: 't/acme/a/art_a/stdout', bytes: 9 }), null);
    host.clock.now += 2 * HOUR;
    r2Fails = true;
    expect(await ix.onAlarm(host.now())).toEqual({ deleted: 0 });
    expect(count('SELECT COUNT(*) AS n FROM artifacts')).toBe(1);
    expect(ix.nextWake(host.now())).toBe(host.now() + 60_000);
    r2Fails = false;
    expect(await ix.onAlarm(host.now() + 60_000)).toEqual({ deleted: 1 });
  });
});

describe('where a body goes', () => {
  it('keeps up to 64 KiB with the team at the default retention, less when a body is kept for months', () => {
    expect(smallBodyMaxBytes(24)).toBe(SMALL_BODY_MAX_BYTES);
    expect(smallBodyMaxBytes(24 * 7)).toBe(SMALL_BODY_MAX_BYTES);
    expect(smallBodyMaxBytes(24 * 90)).toBeLessThan(8 * 1024);
    expect(smallBodyMaxBytes(24 * 90)).toBeGreaterThan(4 * 1024);
  });
});

describe("streams a job's exit holds whole (agent protocol v4 uploads none of them)", () => {
  const exitWith = (o: Record<string, unknown>) =>
    ({
      stdout: 'héllo\n',
      stderr: 'cut',
      stdoutTruncated: false,
      stderrTruncated: true,
      streams: { stdout: { bytes: 7, lines: 1, artifactTruncated: false }, stderr: { bytes: 90_000, lines: 5, artifactTruncated: false } },
      pendingArtifacts: ['stderr'],
      ...o,
    }) as never;
  const withExit = (exit: unknown, hours: number | null): ArtifactIndex =>
    new ArtifactIndex(host, {
      get: (id: string) => (id === 'j9' ? ({ ended_at: host.now(), artifact_handle: 'art_9', artifact_hours: hours } as never) : null),
      list: () => ({ rows: [], next: null }),
      result: (id: string) => (id === 'j9' ? (exit as never) : null),
    });

  it("records each whole stream as an artifact read from the exit, for the job's hours, and leaves the cut or uploading ones to their upload", () => {
    const ix = withExit(exitWith({}), 2);
    ix.storeFromExit('j9', 24);
    expect(ix.rows('art_9')).toMatchObject([{ stream: 'stdout', place: 'exit', bytes: 7, lines: 1, expiresAt: host.now() + 2 * HOUR }]);
    expect(dec.decode(ix.read('art_9', 'stdout')!)).toBe('héllo\n');
    expect(count('SELECT COUNT(*) AS n FROM artifact_chunks')).toBe(0);
    // A job without hours of its own (submitted before it had them) takes the team's.
    const older = withExit(exitWith({}), null);
    older.storeFromExit('j9', 5);
    expect(older.rows('art_9')[0].expiresAt).toBe(host.now() + 5 * HOUR);
  });

  it("records nothing for text whose byte count is not the stream's (replaced bytes), a stream still uploading, or an empty one", () => {
    withExit(
      exitWith({ streams: { stdout: { bytes: 9, lines: 1, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } } }),
      2,
    ).storeFromExit('j9', 24);
    withExit(exitWith({ pendingArtifacts: ['stdout', 'stderr'] }), 2).storeFromExit('j9', 24);
    withExit(
      exitWith({ stdout: '', streams: { stdout: { bytes: 0, lines: 0, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } } }),
      2,
    ).storeFromExit('j9', 24);
    expect(count('SELECT COUNT(*) AS n FROM artifacts')).toBe(0);
  });
});

describe('output kept in the exit of a job whose handle was made from its id (no row of its own)', () => {
  const id = '0b7c9d2e-1f3a-4b5c-8d6e-7f8091a2b3c4';
  const handle = newArtifactHandle(id);
  const exit = {
    stdout: 'all of it\n',
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: { stdout: { bytes: 10, lines: 1, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
  };
  const rig = (hours: number) => {
    const job = { id, ended_at: host.now(), artifact_handle: handle, artifact_hours: hours };
    return new ArtifactIndex(host, {
      get: (j: string) => (j === id ? (job as never) : null),
      list: () => ({ rows: [job as never], next: null }),
      result: (j: string) => (j === id ? (exit as never) : null),
    });
  };

  it('writes no row, answers the handle from the job, and stops at its hours', () => {
    const ix = rig(2);
    ix.storeFromExit(id, 24);
    expect(count('SELECT COUNT(*) AS n FROM artifacts')).toBe(0);
    expect(ix.rows(handle)).toMatchObject([{ jobId: id, stream: 'stdout', place: 'exit', bytes: 10, expiresAt: host.now() + 2 * HOUR }]);
    expect(dec.decode(ix.read(handle, 'stdout')!)).toBe('all of it\n');
    expect(ix.recent(5).map((r) => r.handle)).toEqual([handle]);
    // Another handle that names the same job (its random half differs) is not the job's.
    const forged = newArtifactHandle(id);
    expect(forged).not.toBe(handle);
    expect(ix.rows(forged)).toEqual([]);
    host.clock.now += 2 * HOUR;
    expect(ix.rows(handle)).toEqual([]);
    expect(ix.read(handle, 'stdout')).toBeNull();
  });

  it('keeps a row (and the bytes) when the output outlives the job row', () => {
    const ix = rig(JOB_RETENTION_MS / HOUR + 24);
    ix.storeFromExit(id, 24);
    expect(count('SELECT COUNT(*) AS n FROM artifacts')).toBe(1);
    expect(count('SELECT COUNT(*) AS n FROM artifact_chunks')).toBe(1);
    expect(dec.decode(ix.read(handle, 'stdout')!)).toBe('all of it\n');
  });
});
