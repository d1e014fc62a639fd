/**
 * Artifact bodies in R2, under a team-scoped key. The index of a team's artifacts (which exist,
 * where their bodies are, when they expire) is the team's own, in its Durable Object
 * (src/dispatch/artifact-index.ts); small bodies stay there too. D1's `artifacts` table is no
 * longer written: what it still holds (artifacts indexed before the index moved) stays readable
 * until it expires (`getLegacyArtifactRows`) and is swept by the cron (`cleanupLegacyArtifacts`).
 */
import type { Env } from '../env.ts';
import { StreamName } from '../contracts/agent-protocol.ts';
import { err, ok, toErrorShape, type Result } from '../contracts/errors.ts';

/**
 * Legacy rows per cleanup round: one D1 read, one R2 delete call (each row's body and search index:
 * ≤ 1000 keys, R2's most per call) and one D1 delete — three queries a round.
 */
const CLEANUP_BATCH = 500;
/** Rounds per cron run: 30 D1 queries at most, within the 50 one invocation may make on Workers Free. */
const CLEANUP_MAX_ROUNDS = 10;

export function artifactKey(team: string, handle: string, stream: StreamName): string {
  return `t/${team}/a/${handle}/${stream}`;
}

/** Where a stream's search index (src/search/block-index.ts) is stored: beside its body, gone with it. */
export function searchIndexKey(bodyKey: string): string {
  return `${bodyKey}.idx`;
}

/**
 * Unguessable: 32 bytes, base64url ('art_' + 43 chars). With the job's id (a UUID), its 16 bytes come
 * first and 16 random ones after: the team's object then finds the job of a handle by the job's key
 * (`jobIdOfHandle`) and keeps no row of its own for output the job's exit holds (artifact-index.ts).
 * 128 random bits still make it unguessable; without a job id all 32 bytes are random.
 */
export function newArtifactHandle(jobId?: string): string {
  const b = crypto.getRandomValues(new Uint8Array(32));
  const id = jobId !== undefined && UUID.test(jobId) ? jobId.replace(/-/g, '') : null;
  if (id) for (let i = 0; i < 16; i++) b[i] = Number.parseInt(id.slice(2 * i, 2 * i + 2), 16);
  let s = '';
  for (const x of b) s += String.fromCharCode(x);
  return 'art_' + btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The job id a handle may have been made with (the caller checks the job's own handle is this one); null for any other shape. */
export function jobIdOfHandle(handle: string): string | null {
  if (!/^art_[A-Za-z0-9_-]{43}$/.test(handle)) return null;
  let raw: string;
  try {
    raw = atob(handle.slice(4).replace(/-/g, '+').replace(/_/g, '/') + '=');
  } catch {
    return null;
  }
  let hex = '';
  for (let i = 0; i < 16; i++) hex += raw.charCodeAt(i).toString(16).padStart(2, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A body to store in R2 (the edge's upload route and script mode, for bodies above what stays with the team). */
export interface ArtifactBody {
  team: string;
  handle: string;
  jobId: string;
  stream: StreamName;
  body: ReadableStream<Uint8Array>;
  contentLength: number;
  lines: number;
  truncated: boolean;
}

/** A row of D1's `artifacts` table: an artifact indexed before the index moved to the team's object. Its body is in R2. */
export interface LegacyArtifactRow {
  handle: string;
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
  job_id: string;
  stream: string;
  r2_key: string;
  bytes: number;
  lines: number;
  truncated: number;
  created_at: number;
  expires_at: number;
}

function fromDb(r: DbRow): LegacyArtifactRow {
  return {
    handle: r.handle,
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
 * Streams the body into R2 under the team's key (a retry overwrites it). The caller records it in
 * the team's artifact index; until then nothing finds the body (the bucket's lifecycle rule expires it).
 */
export async function putArtifactBody(env: Env, u: ArtifactBody): Promise<Result<{ bytes: number; r2Key: string }>> {
  if (!StreamName.safeParse(u.stream).success) return err('invalid_argument', `stream must be stdout or stderr, got "${u.stream}"`);
  if (!Number.isSafeInteger(u.contentLength) || u.contentLength < 0) return err('invalid_argument', 'contentLength must be a non-negative integer');
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
  return ok({ bytes: u.contentLength, r2Key: key });
}

/** The R2 metadata every artifact body carries (one PUT or multipart alike). */
export function artifactObjectOptions(u: Pick<ArtifactBody, 'team' | 'jobId' | 'lines' | 'truncated'>): R2PutOptions & R2MultipartOptions {
  return {
    httpMetadata: { contentType: 'text/plain; charset=utf-8' },
    customMetadata: { team: u.team, jobId: u.jobId, lines: String(u.lines), truncated: u.truncated ? '1' : '0' },
  };
}

/**
 * D1's rows of a handle for this team only (stdout first), unexpired: artifacts indexed before the
 * index moved to the team's object. Asked only when the team's object does not know the handle.
 */
export async function getLegacyArtifactRows(env: Env, team: string, handle: string, now: number = Date.now()): Promise<LegacyArtifactRow[]> {
  const r = await env.DB.prepare(
    `SELECT handle, job_id, stream, r2_key, bytes, lines, truncated, created_at, expires_at
     FROM artifacts WHERE team = ? AND handle = ? AND expires_at > ?
     ORDER BY CASE stream WHEN 'stdout' THEN 0 ELSE 1 END`,
  )
    .bind(team, handle, now)
    .all<DbRow>();
  return r.results.map(fromDb);
}

/**
 * Deletes D1's expired legacy rows and their R2 bodies, R2 first, in bounded rounds. If a round
 * fails half-way the rows stay and the next run retries (deleting a missing R2 key is a no-op), so
 * a body is never left without its row. Once the last legacy row has expired and gone, a run costs
 * one query.
 */
export async function cleanupLegacyArtifacts(env: Env, now: number): Promise<{ deleted: number }> {
  let deleted = 0;
  try {
    for (let round = 0; round < CLEANUP_MAX_ROUNDS; round++) {
      const { results } = await env.DB.prepare(`SELECT rowid AS id, r2_key FROM artifacts WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`)
        .bind(now, CLEANUP_BATCH)
        .all<{ id: number; r2_key: string }>();
      if (results.length === 0) break;
      await env.ARTIFACTS.delete(results.flatMap((r) => [r.r2_key, searchIndexKey(r.r2_key)]));
      // One statement for the round (rowids are integers: inlined, no bound-parameter limit).
      await env.DB.prepare(`DELETE FROM artifacts WHERE rowid IN (${results.map((r) => Math.trunc(Number(r.id))).join(', ')})`).run();
      deleted += results.length;
      if (results.length < CLEANUP_BATCH) break;
    }
  } catch (e) {
    console.error(`legacy artifact cleanup stopped after ${deleted} deletions: ${toErrorShape(e).message}`);
  }
  return { deleted };
}
