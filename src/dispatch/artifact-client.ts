/**
 * The Worker's side of the team's artifact index (artifact-index.ts), over Workers RPC: record a
 * stored stream, find a handle's streams, list the newest, and read a body wherever it is — a
 * ranged R2 read for a large one, the team's object for a small one. Every read goes to the
 * caller's team's object, so another team's handle is "not found".
 *
 * Artifacts indexed before the index moved to the team's object are still in D1's `artifacts`
 * table: a handle the object does not know is looked up there (once, read-only) until they expire.
 */
import type { Env } from '../env.ts';
import { getLegacyArtifactRows } from '../store/artifacts.ts';
import type { ArtifactRow, BodyPlace, StoredArtifact } from './artifact-index.ts';

export type { ArtifactRow } from './artifact-index.ts';

function stub(env: Env, team: string) {
  return env.TEAM_DISPATCHER.get(env.TEAM_DISPATCHER.idFromName(team));
}

/** The upload route stored a stream: index it (`body` for a small one kept with the team) and complete its upload, in one call. */
export async function artifactUploaded(env: Env, team: string, a: StoredArtifact, body: Uint8Array | null): Promise<BodyPlace> {
  return await stub(env, team).artifactUploaded(a, body);
}

/** Script mode stored a stream (no upload to complete): index it. */
export async function indexArtifact(env: Env, team: string, a: StoredArtifact, body: Uint8Array | null): Promise<BodyPlace> {
  return await stub(env, team).indexArtifact(a, body);
}

/** The handle's unexpired streams in this team (stdout first); [] for an unknown, expired or other team's handle. */
export async function artifactRows(env: Env, team: string, handle: string): Promise<ArtifactRow[]> {
  const rows = await stub(env, team).artifactRows(handle);
  if (rows.length > 0) return rows;
  return (await getLegacyArtifactRows(env, team, handle)).map((r) => ({ ...r, place: 'r2' as const }));
}

/** The team's newest unexpired streams (newest first). */
export async function recentArtifacts(env: Env, team: string, limit: number): Promise<ArtifactRow[]> {
  return await stub(env, team).recentArtifacts(limit);
}

/** Bytes [offset, offset+length) of a stream's body, or null when the body is gone (expired). */
export async function readArtifact(env: Env, team: string, row: ArtifactRow, offset: number, length: number): Promise<Uint8Array | null> {
  const from = Math.max(0, Math.min(Math.floor(offset), row.bytes));
  const want = Math.max(0, Math.min(Math.floor(length), row.bytes - from));
  if (row.place !== 'r2' || row.r2Key === null) {
    return (await stub(env, team).artifactBytes(row.handle, row.stream, from, want)) ?? null;
  }
  if (want === 0) return new Uint8Array(0);
  const obj = await env.ARTIFACTS.get(row.r2Key, { range: { offset: from, length: want } });
  return obj ? new Uint8Array(await obj.arrayBuffer()) : null;
}

/** The whole body as a stream (a search, a download), or null when it is gone. */
export async function artifactBody(env: Env, team: string, row: ArtifactRow): Promise<ReadableStream<Uint8Array> | null> {
  if (row.place === 'r2' && row.r2Key !== null) return (await env.ARTIFACTS.get(row.r2Key))?.body ?? null;
  const bytes = await readArtifact(env, team, row, 0, row.bytes);
  return bytes ? bytesStream(bytes) : null;
}

/** The first `bytes` of a stream's body, as text (never the whole of a large R2 object). */
export async function readHead(env: Env, team: string, row: ArtifactRow, bytes: number): Promise<string> {
  const b = await readArtifact(env, team, row, 0, bytes);
  return b ? new TextDecoder().decode(b) : '';
}

/**
 * The last `bytes` of a stream's body, for summary tails. When the range starts inside the body,
 * the partial first line is dropped so the tail starts on a line boundary (unless the range holds
 * no line break at all).
 */
export async function readTail(env: Env, team: string, row: ArtifactRow, bytes: number): Promise<string> {
  const want = Math.max(0, Math.floor(bytes));
  if (want === 0 || row.bytes === 0) return '';
  const whole = want >= row.bytes;
  let text = '';
  if (row.place === 'r2' && row.r2Key !== null) {
    const obj = await env.ARTIFACTS.get(row.r2Key, whole ? undefined : { range: { suffix: want } });
    text = obj ? await obj.text() : '';
  } else {
    const b = await readArtifact(env, team, row, row.bytes - Math.min(want, row.bytes), want);
    text = b ? new TextDecoder().decode(b) : '';
  }
  if (whole) return text;
  const nl = text.indexOf('\n');
  return nl === -1 || nl === text.length - 1 ? text : text.slice(nl + 1);
}

function bytesStream(b: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      if (b.byteLength) c.enqueue(b);
      c.close();
    },
  });
}
