/**
 * Artifacts: the full stdout/stderr of every job. Bodies live in R2 under a team-scoped key,
 * the index (who owns it, size, expiry) in D1's `artifacts` table. Every read filters by the
 * caller's team, so another team's handle is simply "not found".
 */
import type { Env } from '../env.ts';
import { StreamName } from '../contracts/agent-protocol.ts';
import { err, ok, toErrorShape, type Result } from '../contracts/errors.ts';

const HOUR_MS = 3_600_000;
/** Rows per cleanup round: one R2 delete call (≤ 1000 keys: each row's body and search index) and one D1 batch. */
const CLEANUP_BATCH = 100;
/** Rounds per cron run, so one run stays short; the next run continues. */
const CLEANUP_MAX_ROUNDS = 50;

export function artifactKey(team: string, handle: string, stream: StreamName): string {
  return `t/${team}/a/${handle}/${stream}`;
}

/** Where a stream's search index (src/search/block-index.ts) is stored: beside its body, gone with it. */
export function searchIndexKey(bodyKey: string): string {
  return `${bodyKey}.idx`;
}

/** Unguessable: 32 random bytes, base64url ('art_' + 43 chars). */
export function newArtifactHandle(): string {
  const b = crypto.getRandomValues(new Uint8Array(32));
  let s = '';
  for (const x of b) s += String.fromCharCode(x);
  return 'art_' + btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export interface ArtifactUpload {
  team: string;
  handle: string;
  jobId: string;
  stream: StreamName;
  body: ReadableStream<Uint8Array>;
  contentLength: number;
  lines: number;
  truncated: boolean;
  retentionHours: number;
  now?: number;
}

export interface ArtifactRow {
  handle: string;
  team: string;
  jobId: string;
  stream: StreamName;
  r2Key: string;
  bytes: number;
  lines: number;
  truncated: boolean;
  createdAt: number;
  expiresAt: number;
}

interface DbRow {
  handle: string;
  team: string;
  job_id: string;
  stream: string;
  r2_key: string;
  bytes: number;
  lines: number;
  truncated: number;
  created_at: number;
  expires_at: number;
}

function fromDb(r: DbRow): ArtifactRow {
  return {
    handle: r.handle,
    team: r.team,
    jobId: r.job_id,
    stream: r.stream as StreamName,
    r2Key: r.r2_key,
    bytes: r.bytes,
    lines: r.lines,
    truncated: r.truncated !== 0,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
  };
}

/**
 * A body R2 accepts without buffering: workerd's R2 needs a stream of known length, which
 * FixedLengthStream gives (and it errors if the body is shorter or longer than announced).
 * Outside workerd (unit tests with an in-memory bucket) the body passes through as it is.
 */
export function knownLength(body: ReadableStream<Uint8Array>, length: number): { stream: ReadableStream<Uint8Array>; piped: Promise<void> } {
  const FLS = (globalThis as { FixedLengthStream?: typeof FixedLengthStream }).FixedLengthStream;
  if (!FLS) return { stream: body, piped: Promise.resolve() };
  const { readable, writable } = new FLS(length);
  return { stream: readable, piped: body.pipeTo(writable) };
}

/**
 * Streams the body into R2, then writes/replaces the D1 row (PK handle+stream). A retry of the
 * same upload overwrites both, so it is idempotent.
 */
export async function putArtifact(env: Env, u: ArtifactUpload): Promise<Result<{ bytes: number }>> {
  if (!StreamName.safeParse(u.stream).success) return err('invalid_argument', `stream must be stdout or stderr, got "${u.stream}"`);
  if (!Number.isSafeInteger(u.contentLength) || u.contentLength < 0) return err('invalid_argument', 'contentLength must be a non-negative integer');
  if (!(u.retentionHours > 0)) return err('invalid_argument', 'retentionHours must be positive');
  if (!u.team || !u.handle || !u.jobId) return err('invalid_argument', 'team, handle and jobId are required');
  const key = artifactKey(u.team, u.handle, u.stream);
  const { stream, piped } = knownLength(u.body, u.contentLength);
  const [put, pipe] = await Promise.allSettled([env.ARTIFACTS.put(key, stream, artifactObjectOptions(u)), piped]);
  if (pipe.status === 'rejected' || put.status === 'rejected') {
    const cause = toErrorShape(pipe.status === 'rejected' ? pipe.reason : (put as PromiseRejectedResult).reason).message;
    // A short or long body is the uploader's mistake; anything else is ours.
    if (/FixedLengthStream|bytes/i.test(cause)) {
      return err('invalid_argument', `artifact body does not match Content-Length ${u.contentLength}: ${cause}`);
    }
    return err('internal', `storing artifact body failed: ${cause}`);
  }
  return indexArtifact(env, { ...u, bytes: u.contentLength });
}

/** What the index row of a stored artifact body records. */
export type ArtifactIndexEntry = Omit<ArtifactUpload, 'body' | 'contentLength'> & { bytes: number };

/**
 * Writes the index row of a body already stored in R2 (one PUT, or a completed multipart upload).
 * The body is removed when its row cannot be written: nothing would ever find (or expire) it.
 */
export async function indexArtifact(env: Env, u: ArtifactIndexEntry): Promise<Result<{ bytes: number }>> {
  const key = artifactKey(u.team, u.handle, u.stream);
  const createdAt = u.now ?? Date.now();
  const expiresAt = createdAt + Math.round(u.retentionHours * HOUR_MS);
  try {
    // The team guard on update: a handle collision with another team must never re-own its row.
    const r = await env.DB.prepare(
      `INSERT INTO artifacts (handle, team, job_id, stream, r2_key, bytes, lines, truncated, created_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (handle, stream) DO UPDATE SET
         job_id = excluded.job_id, r2_key = excluded.r2_key, bytes = excluded.bytes, lines = excluded.lines,
         truncated = excluded.truncated, created_at = excluded.created_at, expires_at = excluded.expires_at
       WHERE artifacts.team = excluded.team`,
    )
      .bind(u.handle, u.team, u.jobId, u.stream, key, u.bytes, Math.max(0, Math.floor(u.lines)), u.truncated ? 1 : 0, createdAt, expiresAt)
      .run();
    if (r.meta.changes === 0) {
      await env.ARTIFACTS.delete([key, searchIndexKey(key)]);
      return err('not_found', `artifact "${u.handle}" not found`);
    }
  } catch (e) {
    // No index row means nothing would ever find (or expire) the body: remove it.
    await env.ARTIFACTS.delete([key, searchIndexKey(key)]).catch(() => {});
    return err('internal', `indexing artifact failed: ${toErrorShape(e).message}`);
  }
  return ok({ bytes: u.bytes });
}

/** The R2 metadata every artifact body carries (one PUT or multipart alike). */
export function artifactObjectOptions(u: Pick<ArtifactUpload, 'team' | 'jobId' | 'lines' | 'truncated'>): R2PutOptions & R2MultipartOptions {
  return {
    httpMetadata: { contentType: 'text/plain; charset=utf-8' },
    customMetadata: { team: u.team, jobId: u.jobId, lines: String(u.lines), truncated: u.truncated ? '1' : '0' },
  };
}

/** Rows of a handle for this team only (stdout first); another team's handle → []. Expired rows excluded. */
export async function getArtifactRows(env: Env, team: string, handle: string, now: number = Date.now()): Promise<ArtifactRow[]> {
  const r = await env.DB.prepare(
    `SELECT handle, team, job_id, stream, r2_key, bytes, lines, truncated, created_at, expires_at
     FROM artifacts WHERE team = ? AND handle = ? AND expires_at > ?
     ORDER BY CASE stream WHEN 'stdout' THEN 0 ELSE 1 END`,
  )
    .bind(team, handle, now)
    .all<DbRow>();
  return r.results.map(fromDb);
}

/**
 * The last `bytes` of a stream's body (an R2 suffix range, never the whole object), for summary
 * tails. When the range starts inside the body, the partial first line is dropped so the tail
 * starts on a line boundary (unless the range holds no line break at all).
 */
export async function readTail(env: Env, row: ArtifactRow, bytes: number): Promise<string> {
  const want = Math.max(0, Math.floor(bytes));
  if (want === 0 || row.bytes === 0) return '';
  const whole = want >= row.bytes;
  const obj = await env.ARTIFACTS.get(row.r2Key, whole ? undefined : { range: { suffix: want } });
  if (!obj) return '';
  const text = await obj.text();
  if (whole) return text;
  const nl = text.indexOf('\n');
  return nl === -1 || nl === text.length - 1 ? text : text.slice(nl + 1);
}

/**
 * Deletes expired artifacts: R2 bodies first, then their rows, in batches. If a round fails
 * half-way the rows stay and the next run retries (deleting a missing R2 key is a no-op), so a
 * body is never left without its row.
 */
export async function cleanupExpiredArtifacts(env: Env, now: number): Promise<{ deleted: number }> {
  let deleted = 0;
  try {
    for (let round = 0; round < CLEANUP_MAX_ROUNDS; round++) {
      const { results } = await env.DB.prepare(`SELECT handle, stream, r2_key FROM artifacts WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`)
        .bind(now, CLEANUP_BATCH)
        .all<{ handle: string; stream: string; r2_key: string }>();
      if (results.length === 0) break;
      await env.ARTIFACTS.delete(results.flatMap((r) => [r.r2_key, searchIndexKey(r.r2_key)]));
      const del = env.DB.prepare(`DELETE FROM artifacts WHERE handle = ? AND stream = ? AND expires_at <= ?`);
      await env.DB.batch(results.map((r) => del.bind(r.handle, r.stream, now)));
      deleted += results.length;
      if (results.length < CLEANUP_BATCH) break;
    }
  } catch (e) {
    console.error(`artifact cleanup stopped after ${deleted} deletions: ${toErrorShape(e).message}`);
  }
  return { deleted };
}

/** The team's newest unexpired artifact streams (newest first), for listing them as MCP resources. */
export async function listRecentArtifacts(env: Env, team: string, limit: number, now: number = Date.now()): Promise<ArtifactRow[]> {
  const r = await env.DB.prepare(
    `SELECT handle, team, job_id, stream, r2_key, bytes, lines, truncated, created_at, expires_at
     FROM artifacts WHERE team = ? AND expires_at > ? ORDER BY created_at DESC LIMIT ?`,
  )
    .bind(team, now, limit)
    .all<DbRow>();
  return r.results.map(fromDb);
}

/** The first `bytes` of a stream's body (an R2 range read, never the whole of a large object). */
export async function readHead(env: Env, row: ArtifactRow, bytes: number): Promise<string> {
  const want = Math.max(0, Math.floor(bytes));
  if (want === 0 || row.bytes === 0) return '';
  const obj = await env.ARTIFACTS.get(row.r2Key, want >= row.bytes ? undefined : { range: { offset: 0, length: want } });
  return obj ? obj.text() : '';
}
