/**
 * Who may write a job's artifacts, and when: only the agent the job was sent to (its token
 * subject, its agent id and the job's upload grant), only while the job runs or its exit announced
 * the upload, and only once per stream — in one PUT or in parts (multipart: every part but the last
 * is exactly the part size, R2's rule). Uploads that will never complete are aborted in R2.
 *
 * Owns the upload tables (src/dispatch/upload-store.ts) and each job stream's artifact state
 * (`job_artifacts`: src/dispatch/stream-artifacts.ts), which the job's views and end read through `streams`.
 */
import { UPLOAD_AGENT_HEADER, UPLOAD_TOKEN_HEADER, type StreamName, type UploadGrant } from '../contracts/agent-protocol.ts';
import { partCount, partRange } from '../contracts/artifact-upload.ts';
import type {
  MultipartAbandonAnswer,
  MultipartBeginAnswer,
  MultipartFinishAnswer,
  MultipartPartAnswer,
  MultipartRef,
  MultipartShape,
  UploadAnswer,
  UploadRefusal,
  UploadWho,
} from './events.ts';
import type { DispatchHost, TimedWork } from './capability-host.ts';
import type { JobRow, JobRows } from './job-rows.ts';
import { StreamArtifacts, type PendingUploads } from './stream-artifacts.ts';
import { UploadStore } from './upload-store.ts';

/** What the upload rules need of the jobs: the job's row, and the streams its exit left uploading. */
export type UploadedJobs = Pick<JobRows, 'get'> & PendingUploads;

type Forbidden = Extract<UploadAnswer, { code: 'forbidden' }>;

export class ArtifactUploads implements TimedWork {
  private readonly host: Pick<DispatchHost, 'sql' | 'transactionSync' | 'env' | 'now'>;
  private readonly jobs: UploadedJobs;
  private readonly store: UploadStore;
  /** Each job stream's artifact state. */
  readonly streams: StreamArtifacts;
  /** A stream's artifact is stored: followers waiting for the job's uploads may get its end. */
  private readonly onStored: (jobId: string) => void;

  constructor(host: Pick<DispatchHost, 'sql' | 'transactionSync' | 'env' | 'now'>, jobs: UploadedJobs, onStored: (jobId: string) => void) {
    this.host = host;
    this.jobs = jobs;
    this.store = new UploadStore(host);
    this.streams = new StreamArtifacts(host, jobs);
    this.onStored = onStored;
  }

  /** The upload grant of the job on the agent it is being sent to (in its `job.start`, on that socket only). */
  grant(jobId: string, agentId: string): UploadGrant {
    return this.store.grant(jobId, agentId);
  }

  /** May this upload write this stream of this job's artifact (one PUT)? */
  begin(u: UploadWho): UploadAnswer {
    const row = this.jobs.get(u.jobId);
    if (!row || row.artifact_handle !== u.handle || row.agent_subject !== u.subject) return notFound(u);
    const announced = this.streams.row(u.jobId, u.stream);
    if (row.state !== 'running' && announced?.state !== 'uploading') return noLonger(u, row);
    if (announced && announced.state !== 'uploading') return writtenOnce(u, announced.state);
    const forbidden = this.grantRefusal(u, row);
    if (forbidden) return forbidden;
    if (!this.streams.begin(u.jobId, u.stream)) return writtenOnce(u, this.streams.row(u.jobId, u.stream)?.state);
    return { ok: true };
  }

  /** The upload route's outcome: a stored body completes the stream; a failed attempt waits for the agent's retry or report. */
  end(jobId: string, stream: StreamName, ok: boolean, bytes: number): void {
    if (!ok) return;
    this.streams.complete(jobId, stream, bytes);
    this.store.remove(jobId, stream); // a completed multipart upload needs no bookkeeping
    this.onStored(jobId);
  }

  /** Starts (or resumes) a stream's multipart upload: the same shape resumes with the parts already stored. */
  multipartBegin(u: UploadWho, shape: MultipartShape): MultipartBeginAnswer {
    const refused = this.refusal(u, true);
    if (refused) return refused;
    this.streams.begin(u.jobId, u.stream);
    const cur = this.store.get(u.jobId, u.stream);
    if (cur && cur.bytes === shape.bytes && cur.part_bytes === shape.partBytes) {
      return { ok: true, resume: { uploadId: cur.upload_id, key: cur.r2_key, done: this.store.parts(u.jobId, u.stream).map((p) => p.part) } };
    }
    return { ok: true, resume: null, replace: cur ? { uploadId: cur.upload_id, key: cur.r2_key } : null };
  }

  /** The Worker created the R2 upload `ref` for this stream. */
  multipartCreated(u: UploadWho, ref: MultipartRef, shape: MultipartShape): void {
    this.store.put({
      job_id: u.jobId,
      stream: u.stream,
      upload_id: ref.uploadId,
      r2_key: ref.key,
      bytes: shape.bytes,
      part_bytes: shape.partBytes,
      lines: shape.lines,
      truncated: shape.truncated ? 1 : 0,
      created_at: this.host.now(),
    });
  }

  /** May part `part` of `bytes` go into the stream's upload? Every part but the last is exactly the part size (R2's rule). */
  multipartPart(u: UploadWho, part: number, bytes: number): MultipartPartAnswer {
    const refused = this.refusal(u, false);
    if (refused) return refused;
    const up = this.store.get(u.jobId, u.stream);
    if (!up) return noneOpen(u);
    const n = partCount(up.bytes, up.part_bytes);
    if (!Number.isInteger(part) || part < 1 || part > n)
      return { ok: false, status: 400, code: 'invalid_argument', message: `part ${part} is not a part of this upload: parts are numbered 1 to ${n}` };
    const r = partRange(up.bytes, up.part_bytes, part);
    if (bytes !== r.end - r.start)
      return {
        ok: false,
        status: 400,
        code: 'invalid_argument',
        message: `part ${part} of this upload is ${r.end - r.start} bytes (bytes ${r.start}..${r.end} of ${up.bytes}), not ${bytes}`,
      };
    return { ok: true, uploadId: up.upload_id, key: up.r2_key };
  }

  multipartPartStored(u: UploadWho, ref: MultipartRef, part: number, etag: string, bytes: number): void {
    this.store.putPart(u.jobId, u.stream, ref.uploadId, part, etag, bytes);
  }

  /** Everything `complete` needs, once every part is stored. */
  multipartFinish(u: UploadWho): MultipartFinishAnswer {
    const refused = this.refusal(u, false);
    if (refused) return refused;
    const up = this.store.get(u.jobId, u.stream);
    if (!up) return noneOpen(u);
    const parts = this.store.parts(u.jobId, u.stream);
    const n = partCount(up.bytes, up.part_bytes);
    const missing = Array.from({ length: n }, (_, i) => i + 1).filter((p) => !parts.some((x) => x.part === p));
    if (missing.length)
      return {
        ok: false,
        status: 409,
        code: 'conflict',
        message: `parts ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', …' : ''} of ${n} are not stored yet; upload them before completing`,
      };
    return {
      ok: true,
      uploadId: up.upload_id,
      key: up.r2_key,
      parts: parts.map((p) => ({ partNumber: p.part, etag: p.etag })),
      bytes: up.bytes,
      partBytes: up.part_bytes,
      lines: up.lines,
      truncated: up.truncated === 1,
    };
  }

  /** The agent gives up on the stream's upload: the edge forgets it and hands back the R2 upload to abort. */
  multipartAbandon(u: UploadWho): MultipartAbandonAnswer {
    const row = this.jobs.get(u.jobId);
    if (!row || row.artifact_handle !== u.handle || row.agent_subject !== u.subject) return notFound(u);
    // Another agent must not abort the upload of the job's own agent.
    const forbidden = this.grantRefusal(u, row);
    if (forbidden) return forbidden;
    const up = this.store.get(u.jobId, u.stream);
    if (up && this.streams.row(u.jobId, u.stream)?.state === 'complete') return { ok: true, upload: null };
    this.store.remove(u.jobId, u.stream);
    return { ok: true, upload: up ? { uploadId: up.upload_id, key: up.r2_key } : null };
  }

  /** The alarm's part: abandoned multipart uploads are aborted. */
  onAlarm(): Promise<void> {
    return this.abortAbandoned();
  }

  /**
   * Aborts the R2 uploads that will never complete — their stream's artifact is no longer
   * uploading (given up, or the agent was lost) or their job is gone (pruned) — so no parts stay
   * stored (and billed) for nothing.
   */
  async abortAbandoned(): Promise<void> {
    for (const up of this.store.all()) {
      if (this.streams.row(up.job_id, up.stream)?.state === 'uploading') continue;
      try {
        await this.host.env.ARTIFACTS.resumeMultipartUpload(up.r2_key, up.upload_id).abort();
      } catch (e) {
        // Already aborted or completed, or never known to R2: nothing is left to clean either way.
        console.warn(`aborting the multipart upload of job ${up.job_id} ${up.stream}: ${(e as Error).message}`);
      }
      this.store.remove(up.job_id, up.stream);
    }
  }

  /** These jobs were dropped: their stream states and grants go too (their open uploads are abandoned). */
  forget(jobIds: readonly string[]): void {
    this.streams.forget(jobIds);
    this.store.forgetGrants(jobIds);
  }

  /** The rules every multipart step checks: the job's agent (and its grant), its handle, a stream still uploading. */
  private refusal(u: UploadWho, begin: boolean): UploadRefusal | null {
    const row = this.jobs.get(u.jobId);
    if (!row || row.artifact_handle !== u.handle || row.agent_subject !== u.subject) return notFound(u);
    const a = this.streams.row(u.jobId, u.stream);
    if ((begin && row.state === 'running' && !a) || a?.state === 'uploading') return this.grantRefusal(u, row);
    if (a) return writtenOnce(u, a.state);
    return noLonger(u, row);
  }

  /**
   * An upload from another agent than the one the job was sent to, or null (the caller has
   * checked the token's subject). Agents may share a token and an agent id is no secret, so the
   * proof is the job's upload grant, which the edge sent in `job.start` on that agent's socket only.
   */
  private grantRefusal(u: UploadWho, row: JobRow): Forbidden | null {
    const forbidden = (message: string): Forbidden => ({ ok: false, status: 403, code: 'forbidden', message });
    const runsOn = row.agent ?? '(none)';
    if (!u.agentId || !u.uploadToken) {
      return forbidden(
        `an artifact upload must name its agent (${UPLOAD_AGENT_HEADER}) and carry the upload token of the job's job.start (${UPLOAD_TOKEN_HEADER}); agents older than the gateway do not: upgrade the agent`,
      );
    }
    if (u.agentId !== row.agent)
      return forbidden(`job "${u.jobId}" runs on agent "${runsOn}", not "${u.agentId}": only the agent a job was sent to may upload its artifacts`);
    switch (this.store.checkGrant(u.jobId, u.agentId, u.uploadToken)) {
      case 'ok':
        return null;
      default:
        return forbidden(
          `the upload token is not the one job "${u.jobId}" was sent to agent "${runsOn}" with: only the agent that received the job may upload its artifacts`,
        );
    }
  }
}

const notFound = (u: UploadWho) => ({
  ok: false as const,
  status: 404 as const,
  code: 'not_found' as const,
  message: `job "${u.jobId}" with artifact "${u.handle}" not found`,
});

const noLonger = (u: UploadWho, row: JobRow) => ({
  ok: false as const,
  status: 409 as const,
  code: 'conflict' as const,
  message: `job "${u.jobId}" is ${row.state}: its ${u.stream} artifact can no longer be written`,
});

const writtenOnce = (u: UploadWho, state: string | undefined) => ({
  ok: false as const,
  status: 409 as const,
  code: 'conflict' as const,
  message: `the ${u.stream} artifact of job "${u.jobId}" is already ${state === 'failed' ? 'given up' : 'stored'}; artifacts are written once`,
});

const noneOpen = (u: UploadWho) => ({
  ok: false as const,
  status: 409 as const,
  code: 'conflict' as const,
  message: `no multipart upload of the ${u.stream} artifact of job "${u.jobId}" is open; start one with POST …/multipart`,
});
