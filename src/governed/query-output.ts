/**
 * `query_output`: search a job's stored output instead of reading it whole. The team's object
 * says which streams the handle has and where each body is (src/dispatch/artifact-index.ts). A
 * large body streams from R2 through the line search once — only the blocks its search index names
 * when it has one; nothing is buffered whole. A small one (kept with the team) comes whole from the
 * team's object in one call and goes through the same line search, so results are the same.
 */
import { z } from 'zod';
import type { Env } from '../env.ts';
import type { StreamName } from '../contracts/agent-protocol.ts';
import { QueryOutputInput, QueryOutputOutput, type Excerpt } from '../contracts/tools.ts';
import { describeIssues, err, ok, toErrorShape, type Result } from '../contracts/errors.ts';
import { searchIndexKey } from '../store/artifacts.ts';
import { artifactBody, artifactRows, type ArtifactRow } from '../dispatch/artifact-client.ts';
import { searchStream, type SearchOptions, type SearchResult } from '../search/line-search.ts';
import { BadIndex, decodeBlockIndex, SEARCH_INDEX_MAX_BYTES, SEARCH_INDEX_MIN_BYTES, type BlockIndex } from '../search/block-index.ts';
import { SEARCH_READS_PER_STREAM, searchIndexed } from '../search/indexed-search.ts';

const Input = z.object(QueryOutputInput);
export type QueryOutputArgs = z.input<typeof Input>;
const QueryOutputStructured = z.object(QueryOutputOutput);
export type QueryOutputStructured = z.infer<typeof QueryOutputStructured>;

/**
 * Subrequests one search may make: the artifact's index rows (the team's DO) and the R2 reads of each
 * of two streams (its search index and ranges: src/search/indexed-search.ts).
 */
export const QUERY_OUTPUT_SUBREQUESTS = 1 + 2 * SEARCH_READS_PER_STREAM;

const QUERY_DEFAULTS = { maxExcerpts: 10, contextLines: 3, stream: 'both' } as const;

function notFound(handle: string): Result<never> {
  return err('not_found', `artifact "${handle}" not found (it may have expired)`);
}

export async function queryOutput(env: Env, team: string, input: QueryOutputArgs, now: number = Date.now()): Promise<Result<QueryOutputStructured>> {
  const parsed = Input.safeParse(input);
  if (!parsed.success) return err('invalid_argument', describeIssues(parsed.error.issues));
  const q = parsed.data;
  const maxExcerpts = q.maxExcerpts ?? QUERY_DEFAULTS.maxExcerpts;
  const contextLines = q.contextLines ?? QUERY_DEFAULTS.contextLines;
  const want: StreamName[] = (q.stream ?? QUERY_DEFAULTS.stream) === 'both' ? ['stdout', 'stderr'] : [q.stream as StreamName];

  try {
    return await search(env, team, q.artifactHandle, q.queryTerms, want, maxExcerpts, contextLines, now);
  } catch (e) {
    return err('upstream_error', `searching artifact "${q.artifactHandle}" failed: ${toErrorShape(e).message}`);
  }
}

/**
 * One stream: through its search index when it has one and the query can use it (only the
 * candidate blocks are read, src/search/indexed-search.ts), else the whole body. Same result
 * either way; null when the body is gone.
 */
async function searchArtifact(env: Env, team: string, row: ArtifactRow, o: SearchOptions): Promise<SearchResult | null> {
  // Smaller streams get no index from the agent: looking for one would cost a read for nothing.
  if (row.place === 'r2' && row.r2Key !== null && row.bytes >= SEARCH_INDEX_MIN_BYTES) {
    const key = row.r2Key;
    const ix = await readSearchIndex(env, row, key);
    if (ix) {
      const read = async (offset: number, length: number) => (await env.ARTIFACTS.get(key, { range: { offset, length } }))?.body ?? null;
      const out = await searchIndexed(read, ix, o);
      if (out.kind === 'searched') return out.result;
      if (out.kind === 'gone') return null;
      if (out.mismatch) console.warn(`search index of artifact ${row.handle} ${row.stream} disagrees with the body, scanned whole: ${out.why}`);
    }
  }
  const body = await artifactBody(env, team, row);
  return body ? searchStream(body, o) : null;
}

/** The stream's index, or null: none was uploaded, or it does not describe this body (then the body is scanned whole). */
async function readSearchIndex(env: Env, row: ArtifactRow, bodyKey: string): Promise<BlockIndex | null> {
  const obj = await env.ARTIFACTS.get(searchIndexKey(bodyKey));
  if (!obj) return null;
  if (obj.size > SEARCH_INDEX_MAX_BYTES) {
    await obj.body.cancel().catch(() => {});
    return null;
  }
  try {
    return decodeBlockIndex(new Uint8Array(await obj.arrayBuffer()), row.bytes);
  } catch (e) {
    if (!(e instanceof BadIndex)) throw e;
    console.warn(`search index of artifact ${row.handle} ${row.stream} not used: ${e.message}`);
    return null;
  }
}

async function search(
  env: Env,
  team: string,
  handle: string,
  terms: string[],
  want: StreamName[],
  maxExcerpts: number,
  contextLines: number,
  now: number,
): Promise<Result<QueryOutputStructured>> {
  const rows = (await artifactRows(env, team, handle)).filter((r) => r.expiresAt > now);
  if (rows.length === 0) return notFound(handle);

  const excerpts: Excerpt[] = [];
  const searchedStreams: StreamName[] = [];
  let matchCount = 0;
  let totalLines = 0;
  let totalBytes = 0;
  // Stdout first, then stderr: the excerpt budget is shared, in that order.
  for (const stream of want) {
    const row = rows.find((r) => r.stream === stream);
    if (!row) continue;
    const r = await searchArtifact(env, team, row, { terms, contextLines, source: stream, maxExcerpts: maxExcerpts - excerpts.length });
    // Row without body: cleanup removed it between the two reads; same as expired.
    if (!r) continue;
    excerpts.push(...r.excerpts);
    matchCount += r.matchCount;
    totalLines += r.totalLines;
    totalBytes += r.totalBytes;
    searchedStreams.push(stream);
  }
  // Asking only for a stream the job never wrote is an empty search, not "not found";
  // a handle whose bodies are all gone is.
  if (searchedStreams.length === 0 && want.some((s) => rows.some((r) => r.stream === s))) return notFound(handle);

  return ok({
    artifactHandle: handle,
    excerpts,
    totalLines,
    totalBytes,
    searchedStreams,
    matchCount,
    matchStatus: matchCount > 0 ? 'matched' : 'noMatch',
  });
}
