/**
 * Who may write a job's artifacts (src/dispatch/artifact-uploads.ts), against a real SQLite: only
 * the agent the job was sent to, holding the job's upload grant; only while the job runs or its
 * exit announced the upload; each stream once. Multipart uploads follow the same rules, in parts of
 * exactly the part size, and an upload that can never complete is aborted in R2.
 */
import { specOf } from './team-fixture.ts';
import { beforeEach, describe, expect, it } from 'vitest';
import type { JobExit, JobSpec, UploadGrant } from '../../src/contracts/agent-protocol.ts';
import { ArtifactUploads } from '../../src/dispatch/artifact-uploads.ts';
import type { UploadWho } from '../../src/dispatch/events.ts';
import { jobParts, type TestJobStore } from './job-parts.ts';
import { dispatchHost, type TestHost } from './sql-host.ts';

const spec = (id: string): JobSpec => specOf(id);
const exitOf = (id: string, pending: ('stdout' | 'stderr')[]): JobExit => ({
  type: 'job.exit',
  jobId: id,
  state: 'exited',
  exitCode: 0,
  signal: null,
  timedOut: false,
  durationMs: 5,
  stdout: '',
  stderr: '',
  stdoutTruncated: false,
  stderrTruncated: false,
  artifactsUploaded: false,
  pendingArtifacts: pending,
  streams: { stdout: { bytes: 100, lines: 1, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
});

let host: TestHost;
let store: TestJobStore;
let uploads: ArtifactUploads;
let stored: string[];
let aborted: string[];
let grant: UploadGrant;

/** Job `j` running on agent a1 (subject agent-a), with the grant its job.start carried. */
beforeEach(() => {
  aborted = [];
  stored = [];
  host = dispatchHost({
    env: { ARTIFACTS: { resumeMultipartUpload: (key: string, id: string) => ({ abort: async () => void aborted.push(`${key}/${id}`) }) } as never },
  });
  store = jobParts(host, { streams: (rows) => (uploads = new ArtifactUploads(host, rows, (id) => stored.push(id))).streams }).store;
  store.create({
    spec: spec('j'),
    tool: 'execute',
    subject: 'alice',
    tokenId: 't',
    cancelKey: 'k',
    background: false,
    maxConcurrent: 4,
    deadline: 1e9,
    now: 1,
  });
  store.assign('j', { id: 'a1', subject: 'agent-a', sandbox: 'bwrap' }, 2);
  grant = uploads.grant('j', 'a1');
});

const who = (o: Partial<UploadWho> = {}): UploadWho => ({
  jobId: 'j',
  handle: 'art_j',
  stream: 'stdout',
  subject: 'agent-a',
  agentId: 'a1',
  uploadToken: grant.token,
  ...o,
});

describe('artifact uploads', () => {
  it("lets only the job's agent with the job's grant write, and answers another job's handle as not found", () => {
    expect(uploads.begin(who({ handle: 'art_other' }))).toMatchObject({ ok: false, status: 404, code: 'not_found' });
    expect(uploads.begin(who({ subject: 'agent-b' }))).toMatchObject({ ok: false, status: 404 });
    expect(uploads.begin(who({ agentId: 'a2' }))).toMatchObject({ ok: false, status: 403, message: expect.stringContaining('runs on agent "a1", not "a2"') });
    expect(uploads.begin(who({ uploadToken: 'x'.repeat(43) }))).toMatchObject({
      ok: false,
      status: 403,
      message: expect.stringContaining('upload token is not the one'),
    });
    expect(uploads.begin(who({ uploadToken: '' }))).toMatchObject({ ok: false, status: 403, message: expect.stringContaining('upgrade the agent') });
    expect(uploads.begin(who())).toEqual({ ok: true });
  });

  it('derives the grant (no row per job), and still takes a grant stored before grants were derived', () => {
    expect(host.db.prepare(`SELECT count(*) AS n FROM upload_grants`).get()).toEqual({ n: 0 });
    expect(uploads.grant('j', 'a1')).toEqual(grant);
    expect(uploads.grant('j', 'a2').token).not.toBe(grant.token);
    host.db.prepare(`INSERT INTO upload_grants (job_id, agent_id, token, created_at) VALUES ('j', 'a1', ?, 1)`).run('o'.repeat(43));
    expect(uploads.begin(who({ uploadToken: 'o'.repeat(43) }))).toEqual({ ok: true });
    expect(uploads.begin(who({ uploadToken: 'x'.repeat(43) }))).toMatchObject({ ok: false, status: 403 });
  });

  it("writes each stream once: a stored artifact refuses a second upload, and settles the job's followers", () => {
    expect(uploads.begin(who())).toEqual({ ok: true });
    uploads.end('j', 'stdout', true, 100);
    expect(stored).toEqual(['j']);
    expect(uploads.begin(who())).toMatchObject({ ok: false, status: 409, message: expect.stringContaining('already stored; artifacts are written once') });
  });

  it("refuses an ended job's stream that its exit did not announce, and accepts one it did", () => {
    store.finish('j', 'exited', 3, { exit: exitOf('j', ['stdout']), fromAgent: 'a1' });
    expect(uploads.begin(who({ stream: 'stderr' }))).toMatchObject({
      ok: false,
      status: 409,
      message: 'job "j" is exited: its stderr artifact can no longer be written',
    });
    expect(uploads.begin(who())).toEqual({ ok: true });
  });

  it('takes multipart parts of exactly the part size (the last one shorter) and completes only with every part stored', () => {
    const shape = { bytes: 25, partBytes: 10, lines: 3, truncated: false };
    expect(uploads.multipartBegin(who(), shape)).toEqual({ ok: true, resume: null, replace: null });
    uploads.multipartCreated(who(), { uploadId: 'u1', key: 'k1' }, shape);
    expect(uploads.multipartPart(who(), 4, 5)).toMatchObject({ status: 400, message: 'part 4 is not a part of this upload: parts are numbered 1 to 3' });
    expect(uploads.multipartPart(who(), 1, 9)).toMatchObject({ status: 400, message: 'part 1 of this upload is 10 bytes (bytes 0..10 of 25), not 9' });
    expect(uploads.multipartPart(who(), 3, 5)).toEqual({ ok: true, uploadId: 'u1', key: 'k1' });
    expect(uploads.multipartPart(who({ agentId: 'a2' }), 1, 10)).toMatchObject({ status: 403 });
    uploads.multipartPartStored(who(), { uploadId: 'u1', key: 'k1' }, 1, 'e1', 10);
    expect(uploads.multipartFinish(who())).toMatchObject({
      ok: false,
      status: 409,
      message: 'parts 2, 3 of 3 are not stored yet; upload them before completing',
    });
    // The same shape again resumes with the parts already stored.
    expect(uploads.multipartBegin(who(), shape)).toEqual({ ok: true, resume: { uploadId: 'u1', key: 'k1', done: [1] } });
    uploads.multipartPartStored(who(), { uploadId: 'u1', key: 'k1' }, 2, 'e2', 10);
    uploads.multipartPartStored(who(), { uploadId: 'u1', key: 'k1' }, 3, 'e3', 5);
    expect(uploads.multipartFinish(who())).toEqual({
      ok: true,
      uploadId: 'u1',
      key: 'k1',
      parts: [
        { partNumber: 1, etag: 'e1' },
        { partNumber: 2, etag: 'e2' },
        { partNumber: 3, etag: 'e3' },
      ],
      bytes: 25,
      partBytes: 10,
      lines: 3,
      truncated: false,
    });
  });

  it('ignores a part stored for an upload the stream no longer uses', () => {
    const shape = { bytes: 10, partBytes: 10, lines: 1, truncated: false };
    uploads.multipartBegin(who(), shape);
    uploads.multipartCreated(who(), { uploadId: 'old', key: 'k' }, shape);
    uploads.multipartCreated(who(), { uploadId: 'new', key: 'k' }, shape);
    uploads.multipartPartStored(who(), { uploadId: 'old', key: 'k' }, 1, 'stale', 10);
    expect(uploads.multipartFinish(who())).toMatchObject({ ok: false, message: expect.stringContaining('parts 1 of 1 are not stored yet') });
  });

  it("lets only the job's agent abandon its upload, and hands back the R2 upload to abort", () => {
    const shape = { bytes: 10, partBytes: 10, lines: 1, truncated: false };
    uploads.multipartBegin(who(), shape);
    uploads.multipartCreated(who(), { uploadId: 'u1', key: 'k1' }, shape);
    expect(uploads.multipartAbandon(who({ agentId: 'a2' }))).toMatchObject({ ok: false, status: 403 });
    expect(uploads.multipartAbandon(who())).toEqual({ ok: true, upload: { uploadId: 'u1', key: 'k1' } });
    expect(uploads.multipartAbandon(who())).toEqual({ ok: true, upload: null });
  });

  it('aborts in R2 the uploads that can never complete: the stream given up, or the job pruned; keeps those still uploading', async () => {
    const shape = { bytes: 10, partBytes: 10, lines: 1, truncated: false };
    for (const stream of ['stdout', 'stderr'] as const) {
      uploads.multipartBegin(who({ stream }), shape);
      uploads.multipartCreated(who({ stream }), { uploadId: `u-${stream}`, key: 'k' }, shape);
    }
    await uploads.abortAbandoned();
    expect(aborted).toEqual([]);
    // The agent says the stderr upload failed: that stream is given up.
    store.reportArtifact('j', 'stderr');
    await uploads.abortAbandoned();
    expect(aborted).toEqual(['k/u-stderr']);
    // The job ends and is pruned: its other upload goes too, and so does its grant.
    store.finish('j', 'exited', 3, { exit: exitOf('j', []), fromAgent: 'a1' });
    uploads.forget(store.prune(host.now() + 1) ?? []);
    await uploads.abortAbandoned();
    expect(aborted).toEqual(['k/u-stderr', 'k/u-stdout']);
    expect(host.db.prepare(`SELECT count(*) AS n FROM upload_grants`).get()).toEqual({ n: 0 });
  });
});
