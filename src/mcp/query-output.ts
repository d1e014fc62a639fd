/**
 * `query_output` (reference 000): search a job's stored output instead of reading it whole.
 * Each requested stream streams from R2 through the line search once; nothing is buffered whole.
 */
import { z } from 'zod';
import type { Env } from '../env.ts';
import type { StreamName } from '../contracts/agent-protocol.ts';
import { QueryOutputInput, QueryOutputOutput, type Excerpt } from '../contracts/tools.ts';
import { describeIssues, err, ok, toErrorShape, type Result } from '../contracts/errors.ts';
import { getArtifactRows } from '../store/artifacts.ts';
import { searchStream } from '../search/line-search.ts';

const Input = z.object(QueryOutputInput);
export type QueryOutputArgs = z.input<typeof Input>;
const QueryOutputStructured = z.object(QueryOutputOutput);
export type QueryOutputStructured = z.infer<typeof QueryOutputStructured>;

export const QUERY_DEFAULTS = { maxExcerpts: 10, contextLines: 3, stream: 'both' } as const;

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
  const rows = await getArtifactRows(env, team, handle, now);
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
    const obj = await env.ARTIFACTS.get(row.r2Key);
    // Row without body: cleanup removed it between the two reads; same as expired.
    if (!obj) continue;
    const r = await searchStream(obj.body, {
      terms,
      contextLines,
      source: stream,
      maxExcerpts: maxExcerpts - excerpts.length,
    });
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
