/**
 * The artifact upload routes agents use (mounted under /agent/v1 by `routes.ts`): one `PUT` for a
 * stream up to one request body, and a multipart upload (`src/contracts/artifact-upload.ts`)
 * into R2 for anything larger, since Cloudflare refuses a request body over
 * REQUEST_BODY_MAX_BYTES. The team's DO decides who may write what (the agent the job was sent
 * to, with the upload grant of its `job.start`; while the job runs or its exit announced the
 * upload; once per stream) and keeps the multipart state; the bytes go from the request straight
 * into R2, never through the DO. The artifact's index row (the team's, artifact-index.ts) is written
 * once, when the body is whole, in the same DO call that completes the stream's upload. A body small
 * enough to stay with the team (`smallBodyMaxBytes`, the cost model in body-place.ts) goes
 * into that call instead of R2: no R2 PUT, and nothing changes for the agent.
 */
import type { Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { StreamName, UPLOAD_AGENT_HEADER, UPLOAD_TOKEN_HEADER } from '../contracts/agent-protocol.ts';
import { MultipartStart, multipartProblem, partCount, type MultipartState } from '../contracts/artifact-upload.ts';
import { describeIssues, toErrorShape, type ErrorCode } from '../contracts/errors.ts';
import { REQUEST_BODY_MAX_BYTES } from '../platform/limits.ts';
import { artifactKey, artifactObjectOptions, knownLength, putArtifactBody, searchIndexKey } from '../store/artifacts.ts';
import { SEARCH_INDEX_MAX_BYTES } from '../search/block-index.ts';
import { teamPolicyOf } from '../store/policy-cache.ts';
import { artifactHoursOf } from '../contracts/policy.ts';
import { beginUpload, multipartAbandon, multipartBegin, multipartCreated, multipartFinish, multipartPart, multipartPartStored } from './client.ts';
import type { UploadRefusal, UploadWho } from './events.ts';
import { artifactUploaded } from './artifact-client.ts';
import { smallBodyMaxBytes } from './body-place.ts';

type C = Context<AppEnv>;
const HANDLE = /^[A-Za-z0-9_-]{8,200}$/;

const fail = (c: C, status: 400 | 403 | 404 | 409 | 411 | 413 | 500, code: ErrorCode, message: string) => c.json({ error: { code, message } }, status);
const refused = (c: C, r: UploadRefusal) => fail(c, r.status, r.code, r.message);

/**
 * Stream, handle and job of an upload request, and who sends it (the token's subject, the agent
 * id, the job's upload token from its `job.start`), or the error that says what is wrong. The
 * team's DO checks the agent and its upload token against the job's grant.
 */
function uploadWho(c: C): { ok: true; who: UploadWho } | { ok: false; res: Response } {
  const { handle, stream } = c.req.param() as { handle: string; stream: string };
  const s = StreamName.safeParse(stream);
  if (!s.success) return { ok: false, res: fail(c, 400, 'invalid_argument', `stream must be stdout or stderr, got "${stream}"`) };
  if (!HANDLE.test(handle)) return { ok: false, res: fail(c, 400, 'invalid_argument', 'malformed artifact handle') };
  const jobId = c.req.header('X-Gatehouse-Job') ?? '';
  if (!jobId) return { ok: false, res: fail(c, 400, 'invalid_argument', 'X-Gatehouse-Job is required') };
  const p = c.get('principal');
  return {
    ok: true,
    who: {
      jobId,
      handle,
      stream: s.data,
      subject: p.subject,
      agentId: c.req.header(UPLOAD_AGENT_HEADER) ?? '',
      uploadToken: c.req.header(UPLOAD_TOKEN_HEADER) ?? '',
    },
  };
}

/** Content-Length as a number, or null when missing or not a non-negative integer. */
function contentLength(c: C): number | null {
  const h = c.req.header('Content-Length');
  const n = Number(h);
  return h && Number.isSafeInteger(n) && n >= 0 ? n : null;
}

const tooLargeForOneRequest = (bytes: number) =>
  `a request body of ${bytes} bytes is over Cloudflare's limit of ${REQUEST_BODY_MAX_BYTES} bytes per request (Workers request limits, Free and Pro plans); ` +
  'upload it in parts: POST …/multipart, then PUT …/multipart/{n} per part, then POST …/multipart/complete';

/** `PUT /artifacts/:handle/:stream`: the whole stream in one request body. */
export async function putWhole(c: C): Promise<Response> {
  const w = uploadWho(c);
  if (!w.ok) return w.res;
  const { who } = w;
  const length = contentLength(c);
  if (length === null) return fail(c, 411, 'invalid_argument', 'Content-Length is required (artifact uploads are not chunked)');
  if (length > REQUEST_BODY_MAX_BYTES) return fail(c, 413, 'payload_too_large', tooLargeForOneRequest(length));
  const team = c.get('principal').team;
  const { policy } = await teamPolicyOf(c.env, c.get('principal'));
  if (length > policy.limits.maxArtifactBytes) {
    return fail(c, 413, 'payload_too_large', `artifact of ${length} bytes exceeds the team's maxArtifactBytes (${policy.limits.maxArtifactBytes})`);
  }
  // Only the agent the job runs on (holding the grant its job.start carried), only while it is
  // open, only once per stream. Another team's handle, another token's job or a made-up one:
  // "not found"; another agent of the same token: "forbidden".
  const may = await beginUpload(c.env, team, who);
  if (!may.ok) return refused(c, may);
  const lines = Number(c.req.header('X-Gatehouse-Lines') ?? '0');
  const entry = {
    handle: who.handle,
    jobId: who.jobId,
    stream: who.stream,
    lines: Number.isFinite(lines) && lines >= 0 ? Math.floor(lines) : 0,
    truncated: c.req.header('X-Gatehouse-Truncated') === '1',
    retentionHours: artifactHoursOf(policy),
  };
  // A small body stays with the team: read whole (it is small) and handed to the DO with its index row.
  if (length <= smallBodyMaxBytes(artifactHoursOf(policy))) {
    let body: Uint8Array;
    try {
      body = new Uint8Array(await c.req.arrayBuffer());
    } catch (e) {
      return fail(c, 400, 'invalid_argument', `reading the artifact body failed: ${toErrorShape(e).message}`);
    }
    if (body.byteLength !== length)
      return fail(c, 400, 'invalid_argument', `artifact body of ${body.byteLength} bytes does not match Content-Length ${length}`);
    await artifactUploaded(c.env, team, { ...entry, r2Key: null, bytes: length }, body);
    return c.json({ handle: who.handle, stream: who.stream, bytes: length }, 201);
  }
  const r = await putArtifactBody(c.env, {
    team,
    handle: who.handle,
    jobId: who.jobId,
    stream: who.stream,
    body: c.req.raw.body ?? new ReadableStream({ start: (ctl) => ctl.close() }),
    contentLength: length,
    lines: entry.lines,
    truncated: entry.truncated,
  });
  // A failed attempt leaves the stream uploading: the agent retries, or reports the upload failed.
  if (!r.ok) return c.json({ error: r.error }, r.error.code === 'invalid_argument' ? 400 : 500);
  await artifactUploaded(c.env, team, { ...entry, r2Key: r.value.r2Key, bytes: r.value.bytes }, null);
  return c.json({ handle: who.handle, stream: who.stream, bytes: r.value.bytes }, 201);
}

/**
 * `PUT /artifacts/:handle/:stream/index`: the stream's search index (src/search/block-index.ts),
 * built by the agent from the bytes it uploads — the Worker would spend CPU on every byte (10 ms per
 * request on the Free plan, 30 s by default on Paid: Workers limits), the agent reads them anyway.
 * Same rules as the body, and before it: the body's upload completes the stream, after which nothing
 * of it is written. The index is not checked against the body here; a search checks what it reads
 * (docs/tools.md: an agent that lies in it can hide lines only of its own jobs' output, which it
 * could as well leave out of the body).
 */
export async function putSearchIndex(c: C): Promise<Response> {
  const w = uploadWho(c);
  if (!w.ok) return w.res;
  const { who } = w;
  const length = contentLength(c);
  if (length === null) return fail(c, 411, 'invalid_argument', 'Content-Length is required (search indexes are not chunked)');
  if (length > SEARCH_INDEX_MAX_BYTES) {
    return fail(
      c,
      413,
      'payload_too_large',
      `a search index of ${length} bytes is over the limit of ${SEARCH_INDEX_MAX_BYTES} bytes; upload the body without one`,
    );
  }
  const team = c.get('principal').team;
  const may = await beginUpload(c.env, team, who);
  if (!may.ok) return refused(c, may);
  const key = searchIndexKey(artifactKey(team, who.handle, who.stream));
  const { stream, piped } = knownLength(c.req.raw.body ?? new ReadableStream({ start: (ctl) => ctl.close() }), length);
  const [put, pipe] = await Promise.allSettled([c.env.ARTIFACTS.put(key, stream, { customMetadata: { team, jobId: who.jobId } }), piped]);
  if (pipe.status === 'rejected')
    return fail(c, 400, 'invalid_argument', `the search index does not match its Content-Length ${length}: ${toErrorShape(pipe.reason).message}`);
  if (put.status === 'rejected') return fail(c, 500, 'internal', `storing the search index failed: ${toErrorShape(put.reason).message}`);
  return c.json({ handle: who.handle, stream: who.stream, indexBytes: length }, 201);
}

/** `POST …/multipart`: starts the stream's multipart upload, or resumes the one the edge holds. */
export async function startMultipart(c: C): Promise<Response> {
  const w = uploadWho(c);
  if (!w.ok) return w.res;
  const { who } = w;
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    return fail(c, 400, 'invalid_argument', 'the body must be JSON: {"bytes", "partBytes", "lines", "truncated"}');
  }
  const p = MultipartStart.safeParse(body);
  if (!p.success) return fail(c, 400, 'invalid_argument', `multipart upload: ${describeIssues(p.error.issues)}`);
  const shape = p.data;
  const problem = multipartProblem(shape.bytes, shape.partBytes);
  if (problem) return fail(c, 400, 'invalid_argument', problem);
  const team = c.get('principal').team;
  const { policy } = await teamPolicyOf(c.env, c.get('principal'));
  if (shape.bytes > policy.limits.maxArtifactBytes) {
    return fail(c, 413, 'payload_too_large', `artifact of ${shape.bytes} bytes exceeds the team's maxArtifactBytes (${policy.limits.maxArtifactBytes})`);
  }
  const begun = await multipartBegin(c.env, team, who, shape);
  if (!begun.ok) return refused(c, begun);
  const state = (done: number[]): MultipartState => ({ parts: partCount(shape.bytes, shape.partBytes), partBytes: shape.partBytes, done });
  if (begun.resume) return c.json(state(begun.resume.done), 200);
  // A different shape than the upload the edge holds (the agent started over): that one goes.
  if (begun.replace)
    await c.env.ARTIFACTS.resumeMultipartUpload(begun.replace.key, begun.replace.uploadId)
      .abort()
      .catch(() => {});
  const key = artifactKey(team, who.handle, who.stream);
  let upload: R2MultipartUpload;
  try {
    upload = await c.env.ARTIFACTS.createMultipartUpload(
      key,
      artifactObjectOptions({ team, jobId: who.jobId, lines: shape.lines, truncated: shape.truncated }),
    );
  } catch (e) {
    return fail(c, 500, 'internal', `starting the multipart upload failed: ${toErrorShape(e).message}`);
  }
  await multipartCreated(c.env, team, who, { uploadId: upload.uploadId, key }, shape);
  return c.json(state([]), 201);
}

/** `PUT …/multipart/:part`: one part, of exactly its size. A part sent again replaces the earlier one. */
export async function putPart(c: C): Promise<Response> {
  const w = uploadWho(c);
  if (!w.ok) return w.res;
  const { who } = w;
  const part = Number(c.req.param('part'));
  if (!Number.isSafeInteger(part) || part < 1) return fail(c, 400, 'invalid_argument', `part must be a number from 1, got "${c.req.param('part')}"`);
  const length = contentLength(c);
  if (length === null) return fail(c, 411, 'invalid_argument', 'Content-Length is required (parts are not chunked)');
  if (length > REQUEST_BODY_MAX_BYTES) return fail(c, 413, 'payload_too_large', tooLargeForOneRequest(length));
  const team = c.get('principal').team;
  const may = await multipartPart(c.env, team, who, part, length);
  if (!may.ok) return refused(c, may);
  const { stream, piped } = knownLength(c.req.raw.body ?? new ReadableStream({ start: (ctl) => ctl.close() }), length);
  const [stored, pipe] = await Promise.allSettled([c.env.ARTIFACTS.resumeMultipartUpload(may.key, may.uploadId).uploadPart(part, stream), piped]);
  if (stored.status === 'rejected' || pipe.status === 'rejected') {
    const cause = toErrorShape(pipe.status === 'rejected' ? pipe.reason : (stored as PromiseRejectedResult).reason).message;
    if (pipe.status === 'rejected') return fail(c, 400, 'invalid_argument', `part ${part} does not match its Content-Length ${length}: ${cause}`);
    return fail(c, 500, 'internal', `storing part ${part} failed: ${cause}`);
  }
  await multipartPartStored(c.env, team, who, may, part, stored.value.etag, length);
  return c.json({ part, bytes: length }, 200);
}

/** `POST …/multipart/complete`: R2 joins the parts; then the artifact is indexed (once) and the stream complete. */
export async function completeMultipart(c: C): Promise<Response> {
  const w = uploadWho(c);
  if (!w.ok) return w.res;
  const { who } = w;
  const team = c.get('principal').team;
  const fin = await multipartFinish(c.env, team, who);
  if (!fin.ok) return refused(c, fin);
  try {
    await c.env.ARTIFACTS.resumeMultipartUpload(fin.key, fin.uploadId).complete(fin.parts);
  } catch (e) {
    return fail(c, 500, 'internal', `completing the multipart upload failed: ${toErrorShape(e).message}`);
  }
  const { policy } = await teamPolicyOf(c.env, c.get('principal'));
  await artifactUploaded(
    c.env,
    team,
    {
      handle: who.handle,
      jobId: who.jobId,
      stream: who.stream,
      r2Key: fin.key,
      bytes: fin.bytes,
      lines: fin.lines,
      truncated: fin.truncated,
      retentionHours: artifactHoursOf(policy),
    },
    null,
  );
  return c.json({ handle: who.handle, stream: who.stream, bytes: fin.bytes }, 201);
}

/** `DELETE …/multipart`: the agent gives up; the R2 upload is aborted, so none of its parts stay stored. */
export async function abortMultipart(c: C): Promise<Response> {
  const w = uploadWho(c);
  if (!w.ok) return w.res;
  const { who } = w;
  const team = c.get('principal').team;
  const gone = await multipartAbandon(c.env, team, who);
  if (!gone.ok) return refused(c, gone);
  if (gone.upload) {
    try {
      await c.env.ARTIFACTS.resumeMultipartUpload(gone.upload.key, gone.upload.uploadId).abort();
    } catch (e) {
      // Forgotten by the edge already; an upload left in R2 is aborted by R2's default lifecycle rule after 7 days.
      console.warn(`aborting the multipart upload of job ${who.jobId} ${who.stream}: ${toErrorShape(e).message}`);
    }
  }
  return c.json({ aborted: gone.upload !== null }, 200);
}
