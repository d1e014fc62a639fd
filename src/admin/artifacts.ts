/**
 * Admin: a job's stored output — which streams exist, ranged reads (pages and tails, never the
 * whole object in memory), a download, and search through the same engine as `query_output`.
 * Everything is keyed by the admin token's team: another team's handle is "not found".
 */
import { Hono, type Context } from 'hono';
import { z } from 'zod';
import type { AppEnv } from '../env.ts';
import { describeIssues } from '../contracts/errors.ts';
import { StreamName } from '../contracts/agent-protocol.ts';
import { ArtifactReadQuery, MAX_ARTIFACT_READ_BYTES, type ArtifactChunk, type ArtifactInfo } from '../contracts/artifact-read.ts';
import { queryOutput } from '../governed/query-output.ts';
import { waitJobOutput } from '../dispatch/interactive-client.ts';
import { jobStatus } from '../dispatch/client.ts';
import { readJobOutput } from '../dispatch/job-output.ts';
import { artifactBody, artifactRows, readArtifact, type ArtifactRow } from '../dispatch/artifact-client.ts';
import { apiError, STATUS } from './http.ts';

export const artifactRoutes = new Hono<AppEnv>();

const HANDLE_RE = /^[A-Za-z0-9_-]{1,200}$/;
const SEARCH_PARAMS = ['q', 'stream', 'contextLines', 'maxExcerpts'];

function notFound(c: Context<AppEnv>, handle: string): Response {
  return apiError(c, 'not_found', `artifact "${handle.slice(0, 60)}" not found (it may have expired)`);
}

/** The handle's rows for this team, or an error answer (malformed → 400, unknown/other team → 404). */
async function rowsFor(c: Context<AppEnv>): Promise<ArtifactRow[] | Response> {
  const handle = c.req.param('handle') ?? '';
  if (!HANDLE_RE.test(handle)) return apiError(c, 'invalid_argument', `malformed artifact handle "${handle.slice(0, 60)}"; expected art_…`);
  const rows = await artifactRows(c.env, c.get('principal').team, handle);
  return rows.length === 0 ? notFound(c, handle) : rows;
}

function streamRow(c: Context<AppEnv>, rows: ArtifactRow[]): ArtifactRow | Response {
  const s = StreamName.safeParse(c.req.param('stream'));
  if (!s.success) return apiError(c, 'invalid_argument', `stream must be stdout or stderr, got "${(c.req.param('stream') ?? '').slice(0, 40)}"`);
  const row = rows.find((r) => r.stream === s.data);
  return row ?? apiError(c, 'not_found', `the job wrote no ${s.data}`);
}

artifactRoutes.get('/:handle', async (c) => {
  const rows = await rowsFor(c);
  if (rows instanceof Response) return rows;
  const info: ArtifactInfo = {
    artifactHandle: rows[0].handle,
    jobId: rows[0].jobId,
    streams: rows.map((r) => ({ stream: r.stream, bytes: r.bytes, lines: r.lines, truncated: r.truncated, createdAt: r.createdAt, expiresAt: r.expiresAt })),
  };
  return c.json(info);
});

const SearchQuery = z
  .object({
    q: z.array(z.string()).min(1, 'give at least one search term (q=…)'),
    stream: z.enum(['stdout', 'stderr', 'both']).optional(),
    contextLines: z
      .string()
      .regex(/^\d{1,2}$/, 'contextLines must be an integer from 0 to 10')
      .transform(Number)
      .optional(),
    maxExcerpts: z
      .string()
      .regex(/^\d{1,2}$/, 'maxExcerpts must be an integer from 1 to 50')
      .transform(Number)
      .optional(),
  })
  .strict();

artifactRoutes.get('/:handle/search', async (c) => {
  const url = new URL(c.req.url);
  for (const k of url.searchParams.keys()) {
    if (!SEARCH_PARAMS.includes(k)) return apiError(c, 'invalid_argument', `unknown query parameter "${k.slice(0, 40)}"; allowed: ${SEARCH_PARAMS.join(', ')}`);
  }
  const single = (k: string) => url.searchParams.get(k) ?? undefined;
  const parsed = SearchQuery.safeParse({
    q: url.searchParams
      .getAll('q')
      .map((t) => t.trim())
      .filter((t) => t !== ''),
    stream: single('stream'),
    contextLines: single('contextLines'),
    maxExcerpts: single('maxExcerpts'),
  });
  if (!parsed.success) return apiError(c, 'invalid_argument', describeIssues(parsed.error.issues));
  const handle = c.req.param('handle');
  if (!HANDLE_RE.test(handle)) return apiError(c, 'invalid_argument', `malformed artifact handle "${handle.slice(0, 60)}"; expected art_…`);
  const r = await queryOutput(c.env, c.get('principal').team, {
    artifactHandle: handle,
    queryTerms: parsed.data.q,
    stream: parsed.data.stream,
    contextLines: parsed.data.contextLines,
    maxExcerpts: parsed.data.maxExcerpts,
  });
  if (!r.ok) return apiError(c, r.error.code, r.error.message, STATUS[r.error.code] ?? (r.error.code === 'upstream_error' ? 502 : 500));
  return c.json(r.value);
});

artifactRoutes.get('/:handle/:stream', async (c) => {
  const rows = await rowsFor(c);
  if (rows instanceof Response) return rows;
  const row = streamRow(c, rows);
  if (row instanceof Response) return row;
  const q = ArtifactReadQuery.safeParse(Object.fromEntries(new URL(c.req.url).searchParams));
  if (!q.success) return apiError(c, 'invalid_argument', `${describeIssues(q.error.issues)} (allowed: offset, length, tail)`);
  const total = row.bytes;
  let offset: number;
  let length: number;
  if (q.data.tail !== undefined) {
    length = Math.min(q.data.tail, total);
    offset = total - length;
  } else {
    offset = Math.min(q.data.offset ?? 0, total);
    length = Math.min(q.data.length ?? MAX_ARTIFACT_READ_BYTES, total - offset);
  }
  let text = '';
  if (length > 0) {
    const bytes = await readArtifact(c.env, c.get('principal').team, row, offset, length);
    if (!bytes) return notFound(c, row.handle);
    text = new TextDecoder().decode(bytes);
  }
  const chunk: ArtifactChunk = { artifactHandle: row.handle, stream: row.stream, offset, length, totalBytes: total, nextOffset: offset + length, text };
  return c.json(chunk);
});

artifactRoutes.get('/:handle/:stream/download', async (c) => {
  const rows = await rowsFor(c);
  if (rows instanceof Response) return rows;
  const row = streamRow(c, rows);
  if (row instanceof Response) return row;
  const body = await artifactBody(c.env, c.get('principal').team, row);
  if (!body) return notFound(c, row.handle);
  const name = `${row.jobId.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 100)}-${row.stream}.txt`;
  return new Response(body, {
    headers: {
      'Content-Type': 'text/plain; charset=utf-8',
      'Content-Length': String(row.bytes),
      'Content-Disposition': `attachment; filename="${name}"`,
      'X-Content-Type-Options': 'nosniff',
      'Cache-Control': 'no-store',
    },
  });
});

/**
 * A job's output from a byte offset, for the dashboard's live tail: while the job runs, what the
 * agent has relayed so far (held by the team's Durable Object); once its artifact is stored, the artifact (R2, or the team's object for a small one).
 * `GET /admin/v1/jobs/:id/output?stream=stdout|stderr&offset=N&length=M`.
 */
export const jobOutputRoutes = new Hono<AppEnv>();

const JOB_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
const JobOutputQuery = z
  .object({
    stream: StreamName.default('stdout'),
    offset: z
      .string()
      .regex(/^\d{1,15}$/, 'offset must be a non-negative integer')
      .transform(Number)
      .default(0),
    length: z
      .string()
      .regex(/^\d{1,15}$/, 'length must be a positive integer')
      .transform(Number)
      .refine((n) => n >= 1 && n <= MAX_ARTIFACT_READ_BYTES, `length must be from 1 to ${MAX_ARTIFACT_READ_BYTES}`)
      .default(MAX_ARTIFACT_READ_BYTES),
  })
  .strict();

jobOutputRoutes.get('/:id/output', async (c) => {
  const id = c.req.param('id');
  if (!JOB_ID_RE.test(id)) return apiError(c, 'invalid_argument', `malformed job id "${id.slice(0, 60)}"`);
  const q = JobOutputQuery.safeParse(Object.fromEntries(new URL(c.req.url).searchParams));
  if (!q.success) return apiError(c, 'invalid_argument', `${describeIssues(q.error.issues)} (allowed: stream, offset, length)`);
  const { stream, offset, length } = q.data;
  const team = c.get('principal').team;
  const job = await jobStatus(c.env, team, id);
  if (!job) return apiError(c, 'not_found', `job "${id}" not found`);
  const page = await readJobOutput(c.env, team, job, stream, offset, length);
  if ('expired' in page) return apiError(c, 'not_found', `the output of job "${id}" has expired`);
  const { data, source, total: totalBytes, nextOffset, eof } = page;
  // An interactive job's writes, for the conversation on the job's page (read at once: no wait).
  const inputs =
    stream === 'stdout' && !eof ? (await waitJobOutput(c.env, team, { jobId: id, stream, offset, waitMs: 0 }, c.get('principal').subject)).inputs : null;
  return c.json({
    ...(inputs ? { inputs } : {}),
    jobId: id,
    stream,
    state: job.state,
    source,
    offset,
    length: data.byteLength,
    nextOffset,
    totalBytes,
    eof,
    text: new TextDecoder().decode(data),
  });
});
