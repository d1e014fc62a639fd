/**
 * TeamDispatcher: one Durable Object per team, a thin shell over three capabilities —
 * the agent registry, the job store (both in the DO's own SQLite) and the pure scheduler.
 * It wires them to the agents' WebSockets (hibernation API) and to Workers RPC methods the
 * edge Worker calls. Memory holds only the live listeners of callers that are waiting.
 */
import { DurableObject } from 'cloudflare:workers';
import type { Env } from '../env.ts';
import {
  AGENT_BUDGET_CLOSE, AGENT_RECONNECT_MAX_BACKOFF_MS, PROTOCOL_VERSION, UPLOAD_AGENT_HEADER, UPLOAD_TOKEN_HEADER, parseAgentMessage,
  type AgentHello, type EdgeMessage, type JobExit, type SandboxKind, type StreamName,
} from '../contracts/agent-protocol.ts';
import { HIBERNATION_ATTACHMENT_MAX_BYTES, attachmentBytes } from '../contracts/limits.ts';
import { decodeOutputFrame } from '../contracts/output-frame.ts';
import { isTerminal, JOB_RETENTION_MS, JobListFilter, type AgentView, type JobState, type JobView } from '../contracts/jobs.ts';
import { describeIssues } from '../contracts/errors.ts';
import { RUNTIMES, type RuntimeName } from '../contracts/runtimes.ts';
import { concurrencyLimitMessage } from '../policy/engine.ts';
import { isRevoked } from '../store/tokens.ts';
import { syncJobToD1 } from '../store/jobs.ts';
import { copyPending, copyQueryBudget } from './d1-copy.ts';
import { workersPlan } from '../script/request-budget.ts';
import {
  DispatchRequest, type DispatchEvent, type KeptOutput, type MultipartAbandonAnswer, type MultipartBeginAnswer, type MultipartFinishAnswer,
  type MultipartPartAnswer, type MultipartRef, type MultipartShape, type SubmitAnswer, type UploadAnswer, type UploadRefusal, type UploadWho,
} from './events.ts';
import { UploadStore } from './upload-store.ts';
import { AgentBudget, peekJobMessage, type Overrun } from './agent-budget.ts';
import { partCount, partRange } from '../contracts/artifact-upload.ts';
import { stamp } from '../mcp/trace.ts';
import { JobStore, type JobRow } from './job-store.ts';
import { AgentRegistry } from './agent-registry.ts';
import { AGENT_CLAIM_REFUSED_CLOSE, checkAgentClaims, closeReason, parseAgentGrant, type AgentGrant, type ClaimRefusal } from '../contracts/agent-grant.ts';
import { AGENT_GRANT_HEADER } from './client.ts';
import { AGENT_CONNECT_AUDIT_TOOL, writeAudit } from '../store/audit.ts';
import { lostExit, noAgentMessage } from './outcomes.ts';
import { nextDeadline, schedule, whyNoAgentFits, type Ineligibility, type SchedAgent, type SchedJob } from './scheduler.ts';

/** The only per-socket state: who this is. Everything else is in SQLite (attachment ≤ 16 KiB). */
export interface AgentAttachment {
  subject: string;
  tokenId: string;
  /** What the token lets this agent claim in `hello` (null: what it says; src/contracts/agent-grant.ts). */
  grant: AgentGrant | null;
  agentId: string | null;
  connectedAt: number;
}

/** An agent silent (or a job's agent gone) for this many heartbeats is gone. */
export const MISSED_HEARTBEATS = 3;
/** How long a started job's `running` state waits before it is copied to D1 (its end, if sooner, is copied instead). */
export const START_SYNC_DELAY_MS = 250;
/** A copy pass that stopped at its D1 query budget goes on in an alarm this soon. */
const COPY_AGAIN_AFTER_MS = 50;
/** Bytes of each live output frame passed on to callers following the job (progress shows the last line). */
const FOLLOW_OUTPUT_BYTES = 4096;

type Listener = (e: DispatchEvent) => void;

export class TeamDispatcher extends DurableObject<Env> {
  private readonly store: JobStore;
  private readonly registry: AgentRegistry;
  private readonly uploads: UploadStore;
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly endWaiters = new Map<string, Set<() => void>>();
  private teamName: string | null = null;
  private syncing = false;
  private syncTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const host = { sql: ctx.storage.sql, transactionSync: <T,>(f: () => T) => ctx.storage.transactionSync(f) };
    this.store = new JobStore(host);
    this.registry = new AgentRegistry(host);
    this.uploads = new UploadStore(host);
  }

  private heartbeatMs(): number {
    const n = Number(this.env.HEARTBEAT_MS ?? '5000');
    return Number.isFinite(n) && n >= 100 ? n : 5000;
  }

  /** The team this DO serves: every call names it; storage keeps it for wake-ups from alarms/sockets. */
  private async rememberTeam(team: string): Promise<void> {
    if (this.teamName === team) return;
    this.teamName = team;
    if ((await this.ctx.storage.get('team')) !== team) await this.ctx.storage.put('team', team);
  }

  private async team(): Promise<string> {
    this.teamName ??= ((await this.ctx.storage.get('team')) as string | undefined) ?? '';
    return this.teamName;
  }

  // ================= RPC: called by the edge Worker =================

  /**
   * Agent WebSocket upgrades are the one thing that still arrives as `fetch`: a WebSocket can only
   * be handed over in an HTTP 101 response. The Worker has verified the token; it passes identity.
   */
  async fetch(request: Request): Promise<Response> {
    if (request.headers.get('Upgrade')?.toLowerCase() !== 'websocket') {
      return Response.json({ error: { code: 'invalid_argument', message: 'expected a WebSocket upgrade' } }, { status: 426 });
    }
    await this.rememberTeam(request.headers.get('X-Gatehouse-Team') ?? '');
    const grant = parseAgentGrant(request.headers.get(AGENT_GRANT_HEADER));
    if (!grant.ok) return Response.json({ error: { code: 'internal', message: grant.message } }, { status: 500 });
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    const att: AgentAttachment = {
      subject: request.headers.get('X-Gatehouse-Subject') ?? '', tokenId: request.headers.get('X-Gatehouse-Token-Id') ?? '',
      grant: grant.value, agentId: null, connectedAt: Date.now(),
    };
    this.ctx.acceptWebSocket(server);
    this.attach(server, att);
    await this.scheduleAlarm();
    return new Response(null, { status: 101, webSocket: client });
  }

  /** Records a job and queues it (or refuses it at once with a reason the caller can act on). */
  async submit(team: string, raw: DispatchRequest): Promise<SubmitAnswer> {
    await this.rememberTeam(team);
    const parsed = DispatchRequest.safeParse(raw);
    if (!parsed.success) return { ok: false, code: 'invalid_argument', message: describeIssues(parsed.error.issues) };
    const req = parsed.data;
    const existing = this.store.get(req.spec.jobId);
    if (existing) return answerFor(existing);
    const now = Date.now();
    const queuedBefore = this.store.queued().length;
    this.store.create({
      spec: req.spec, tool: req.tool, subject: req.subject, tokenId: req.tokenId, cancelKey: req.cancelKey, runtime: req.runtime,
      sandboxMinimum: req.sandboxMinimum, selAgent: req.agent, selLabels: req.labels, background: req.background,
      maxConcurrent: req.maxConcurrentJobs, deadline: now + req.queueWaitMs, now,
      audit: { ...req.audit, team, subject: req.subject, tokenId: req.tokenId, tool: req.tool, decision: 'allowed', jobId: req.spec.jobId, exitStatus: 'queued' },
    });
    if (queuedBefore >= req.maxQueueLength) {
      this.close(req.spec.jobId, 'refused', {
        error: { code: 'queue_full', message: `the team's queue is full (${queuedBefore} jobs waiting; limit queue.maxLength = ${req.maxQueueLength}); try again later or start another agent` },
      });
    } else {
      const agents = this.schedAgents();
      const why = agents.length ? whyNoAgentFits(toSchedJob(this.store.get(req.spec.jobId)!), agents) : null;
      // With agents connected and none able to take the job ever, waiting would only delay the answer.
      if (why && why !== 'no_agent') this.close(req.spec.jobId, 'refused', { error: await this.refusal(req.spec.jobId, why) });
      else await this.pump();
    }
    // The job's D1 rows (index + audit) follow in the background: with its end if it ends soon.
    this.syncSoon();
    return answerFor(this.store.get(req.spec.jobId)!);
  }

  /**
   * `submit` and then `follow` in one call (one hop instead of two on a foreground call's path).
   * `events` is null when the job was not taken (the answer says why) or runs in the background.
   */
  async submitAndFollow(team: string, raw: DispatchRequest): Promise<{ answer: SubmitAnswer; events: ReadableStream<Uint8Array> | null }> {
    stamp(this.env, 'do.submitted');
    const answer = await this.submit(team, raw);
    if (!answer.ok || raw.background) return { answer, events: null };
    return { answer, events: await this.follow(team, answer.jobId) };
  }

  /**
   * The job's events as NDJSON lines: where it stands now, then output, then its end. The stream
   * ends with the job (or when the caller goes away — which never affects the job).
   */
  async follow(team: string, jobId: string): Promise<ReadableStream<Uint8Array>> {
    await this.rememberTeam(team);
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const writer = writable.getWriter();
    const encoder = new TextEncoder();
    let open = true;
    const stop = () => {
      if (!open) return;
      open = false;
      this.listeners.get(jobId)?.delete(listener);
      writer.close().catch(() => {});
    };
    const listener: Listener = (e) => {
      if (!open) return;
      writer.write(encoder.encode(JSON.stringify(e) + '\n')).catch(() => stop());
      if (e.type === 'exit' || e.type === 'error') stop();
    };
    const row = this.store.get(jobId);
    if (!row) {
      listener({ type: 'error', code: 'not_found', message: `job "${jobId}" not found` });
      return readable;
    }
    if (isTerminal(row.state) && !this.store.hasUploading(jobId)) {
      listener(this.finalEvent(row));
      return readable;
    }
    let set = this.listeners.get(jobId);
    if (!set) this.listeners.set(jobId, (set = new Set()));
    set.add(listener);
    if (isTerminal(row.state)) return readable; // its end comes once the uploads it announced are settled
    listener(row.state === 'running'
      ? { type: 'started', jobId, agentId: row.agent!, sandbox: row.sandbox! }
      : { type: 'queued', jobId, position: this.store.queued().findIndex((q) => q.id === jobId) + 1 });
    return readable;
  }

  /** The job's view; with `waitMs`, waits (long-poll) until it ends or the time is up. */
  async status(team: string, jobId: string, waitMs = 0): Promise<JobView | null> {
    await this.rememberTeam(team);
    let row = this.store.get(jobId);
    if (!row) return null;
    if (!isTerminal(row.state) && waitMs > 0) {
      await new Promise<void>((resolve) => {
        let set = this.endWaiters.get(jobId);
        if (!set) this.endWaiters.set(jobId, (set = new Set()));
        const done = () => {
          clearTimeout(timer);
          set!.delete(done);
          resolve();
        };
        const timer = setTimeout(done, waitMs);
        set.add(done);
      });
      row = this.store.get(jobId)!;
    }
    return this.store.view(row);
  }

  /** The finished job's full result (inline output reassembled), with who ran it. */
  async result(team: string, jobId: string): Promise<{ view: JobView; exit: JobExit | null } | null> {
    await this.rememberTeam(team);
    const row = this.store.get(jobId);
    if (!row) return null;
    return { view: this.store.view(row), exit: this.store.result(jobId) };
  }

  /**
   * Output the edge keeps, from a byte offset: what the agent relayed live (the first
   * LIVE_OUTPUT_MAX_BYTES of each stream), or — for an ended job whose result holds more — the
   * result's inline output. `total` is what is kept so far.
   */
  async liveOutput(team: string, jobId: string, stream: StreamName, offset: number, maxBytes: number): Promise<KeptOutput | null> {
    await this.rememberTeam(team);
    const row = this.store.get(jobId);
    if (!row) return null;
    const live = this.store.readOutput(jobId, stream, offset, maxBytes);
    if (isTerminal(row.state) && row.exit) {
      const inline = new TextEncoder().encode(this.store.result(jobId)?.[stream] ?? '');
      if (inline.byteLength > live.total) {
        return { data: inline.subarray(Math.min(offset, inline.byteLength), Math.min(offset + maxBytes, inline.byteLength)), total: inline.byteLength, source: 'result' };
      }
    }
    return { ...live, source: 'live' };
  }

  async list(team: string, filter: JobListFilter): Promise<{ jobs: JobView[]; next_cursor: string | null }> {
    await this.rememberTeam(team);
    const f = JobListFilter.parse(filter);
    const cursor = f.cursor !== undefined && /^\d+$/.test(f.cursor) ? Number(f.cursor) : undefined;
    const { rows, next } = this.store.list({ state: f.state, subject: f.subject, tool: f.tool, cursor, limit: f.limit });
    return { jobs: rows.map((r) => this.store.view(r)), next_cursor: next === null ? null : String(next) };
  }

  /**
   * Stops a job: a queued one is cancelled at once; a running one gets `job.cancel` (the agent
   * kills the whole sandbox: TERM, then KILL after its grace) and ends `cancelled` by its report.
   */
  async kill(team: string, jobId: string, reason: string): Promise<{ found: boolean; state: JobState | null }> {
    await this.rememberTeam(team);
    const row = this.store.get(jobId);
    if (!row) return { found: false, state: null };
    if (row.state === 'queued') {
      this.close(jobId, 'cancelled', { error: { code: 'cancelled', message: `cancelled before it started: ${reason}` } });
      await this.pump();
    } else if (row.state === 'running') {
      const ws = this.socketOf(row.agent!);
      if (ws) this.sendTo(ws, { type: 'job.cancel', jobId, reason });
    }
    return { found: true, state: this.store.get(jobId)!.state };
  }

  /** `notifications/cancelled` for an MCP call: finds its job by (token, request id). */
  async cancelByKey(team: string, cancelKey: string, reason: string): Promise<boolean> {
    await this.rememberTeam(team);
    const row = this.store.byCancelKey(cancelKey);
    if (!row) return false;
    await this.kill(team, row.id, reason);
    return true;
  }

  async agents(team: string): Promise<AgentView[]> {
    await this.rememberTeam(team);
    const live = new Set(this.liveAgents().map((a) => a.att.agentId));
    const load = this.loadByAgent();
    return this.registry.all().map((r) => this.registry.view(r, load.get(r.id) ?? 0, live.has(r.id)));
  }

  /** A token was revoked: every agent socket that authenticated with it goes now. */
  async revokeToken(team: string, tokenId: string): Promise<number> {
    await this.rememberTeam(team);
    let n = 0;
    for (const ws of this.ctx.getWebSockets()) {
      const att = this.attachmentOf(ws);
      if (att?.tokenId !== tokenId) continue;
      n += 1;
      this.dropAgentSocket(ws, 'its token was revoked');
      try { ws.close(4001, 'agent token revoked'); } catch { /* already closed */ }
    }
    return n;
  }

  /**
   * May this upload write this stream of this job's artifact? Only the agent the job was sent to
   * (its token subject, its agent id and the job's upload grant: `grantRefusal`), only while the
   * job runs or its exit announced this upload, and only once per stream.
   */
  async beginUpload(team: string, u: UploadWho): Promise<UploadAnswer> {
    await this.rememberTeam(team);
    const row = this.store.get(u.jobId);
    const notFound = { ok: false as const, status: 404 as const, code: 'not_found' as const, message: `job "${u.jobId}" with artifact "${u.handle}" not found` };
    if (!row || row.artifact_handle !== u.handle || row.agent_subject !== u.subject) return notFound;
    const announced = this.store.artifactRow(u.jobId, u.stream);
    if (row.state !== 'running' && announced?.state !== 'uploading') {
      return { ok: false, status: 409, code: 'conflict', message: `job "${u.jobId}" is ${row.state}: its ${u.stream} artifact can no longer be written` };
    }
    const writtenOnce = { ok: false as const, status: 409 as const, code: 'conflict' as const, message: `the ${u.stream} artifact of job "${u.jobId}" is already ${announced?.state === 'failed' ? 'given up' : 'stored'}; artifacts are written once` };
    if (announced && announced.state !== 'uploading') return writtenOnce;
    const forbidden = this.grantRefusal(u, row);
    if (forbidden) return forbidden;
    if (!this.store.beginUpload(u.jobId, u.stream)) return writtenOnce;
    return { ok: true };
  }

  /**
   * An upload from another agent than the one the job was sent to, or null (the caller has
   * checked the token's subject). Agents may share a token and an agent id is no secret, so the
   * proof is the job's upload grant: a random token the edge sent in `job.start` on that agent's
   * socket only.
   */
  private grantRefusal(u: UploadWho, row: JobRow): Extract<UploadAnswer, { code: 'forbidden' }> | null {
    const forbidden = (message: string) => ({ ok: false as const, status: 403 as const, code: 'forbidden' as const, message });
    const runsOn = row.agent ?? '(none)';
    if (!u.agentId || !u.uploadToken) {
      return forbidden(`an artifact upload must name its agent (${UPLOAD_AGENT_HEADER}) and carry the upload token of the job's job.start (${UPLOAD_TOKEN_HEADER}); agents older than the gateway do not: upgrade the agent`);
    }
    if (u.agentId !== row.agent) return forbidden(`job "${u.jobId}" runs on agent "${runsOn}", not "${u.agentId}": only the agent a job was sent to may upload its artifacts`);
    switch (this.uploads.checkGrant(u.jobId, u.agentId, u.uploadToken)) {
      case 'ok':
        return null;
      case 'no_grant':
        return forbidden(`job "${u.jobId}" was sent to agent "${runsOn}" without an upload grant; its artifacts cannot be uploaded (what the edge kept live stays readable)`);
      default:
        return forbidden(`the upload token is not the one job "${u.jobId}" was sent to agent "${runsOn}" with: only the agent that received the job may upload its artifacts`);
    }
  }

  /** The upload route's outcome: a stored body completes the stream; a failed attempt waits for the agent's retry or report. */
  async endUpload(team: string, jobId: string, stream: StreamName, ok: boolean, bytes: number): Promise<void> {
    await this.rememberTeam(team);
    if (!ok) return;
    this.store.endUpload(jobId, stream, bytes);
    this.uploads.remove(jobId, stream); // a completed multipart upload needs no bookkeeping
    this.settle(jobId);
  }

  // ---- multipart uploads: the same rules as one PUT (the job's agent, while announced, once), in parts ----

  /** The rules every multipart step checks: the job's agent (and its grant), its handle, a stream still uploading. */
  private uploadRefusal(u: UploadWho, begin: boolean): UploadRefusal | null {
    const row = this.store.get(u.jobId);
    if (!row || row.artifact_handle !== u.handle || row.agent_subject !== u.subject) {
      return { ok: false, status: 404, code: 'not_found', message: `job "${u.jobId}" with artifact "${u.handle}" not found` };
    }
    const a = this.store.artifactRow(u.jobId, u.stream);
    if ((begin && row.state === 'running' && !a) || a?.state === 'uploading') return this.grantRefusal(u, row);
    if (a) return { ok: false, status: 409, code: 'conflict', message: `the ${u.stream} artifact of job "${u.jobId}" is already ${a.state === 'failed' ? 'given up' : 'stored'}; artifacts are written once` };
    return { ok: false, status: 409, code: 'conflict', message: `job "${u.jobId}" is ${row.state}: its ${u.stream} artifact can no longer be written` };
  }

  /** Starts (or resumes) a stream's multipart upload: the same shape resumes with the parts already stored. */
  async multipartBegin(team: string, u: UploadWho, shape: MultipartShape): Promise<MultipartBeginAnswer> {
    await this.rememberTeam(team);
    const refused = this.uploadRefusal(u, true);
    if (refused) return refused;
    this.store.beginUpload(u.jobId, u.stream);
    const cur = this.uploads.get(u.jobId, u.stream);
    if (cur && cur.bytes === shape.bytes && cur.part_bytes === shape.partBytes) {
      return { ok: true, resume: { uploadId: cur.upload_id, key: cur.r2_key, done: this.uploads.parts(u.jobId, u.stream).map((p) => p.part) } };
    }
    return { ok: true, resume: null, replace: cur ? { uploadId: cur.upload_id, key: cur.r2_key } : null };
  }

  /** The Worker created the R2 upload `ref` for this stream. */
  async multipartCreated(team: string, u: UploadWho, ref: MultipartRef, shape: MultipartShape): Promise<void> {
    await this.rememberTeam(team);
    this.uploads.put({
      job_id: u.jobId, stream: u.stream, upload_id: ref.uploadId, r2_key: ref.key, bytes: shape.bytes, part_bytes: shape.partBytes,
      lines: shape.lines, truncated: shape.truncated ? 1 : 0, created_at: Date.now(),
    });
  }

  /** May part `part` of `bytes` go into the stream's upload? Every part but the last is exactly the part size (R2's rule). */
  async multipartPart(team: string, u: UploadWho, part: number, bytes: number): Promise<MultipartPartAnswer> {
    await this.rememberTeam(team);
    const refused = this.uploadRefusal(u, false);
    if (refused) return refused;
    const up = this.uploads.get(u.jobId, u.stream);
    if (!up) return { ok: false, status: 409, code: 'conflict', message: `no multipart upload of the ${u.stream} artifact of job "${u.jobId}" is open; start one with POST …/multipart` };
    const n = partCount(up.bytes, up.part_bytes);
    if (!Number.isInteger(part) || part < 1 || part > n) return { ok: false, status: 400, code: 'invalid_argument', message: `part ${part} is not a part of this upload: parts are numbered 1 to ${n}` };
    const r = partRange(up.bytes, up.part_bytes, part);
    if (bytes !== r.end - r.start) return { ok: false, status: 400, code: 'invalid_argument', message: `part ${part} of this upload is ${r.end - r.start} bytes (bytes ${r.start}..${r.end} of ${up.bytes}), not ${bytes}` };
    return { ok: true, uploadId: up.upload_id, key: up.r2_key };
  }

  async multipartPartStored(team: string, u: UploadWho, ref: MultipartRef, part: number, etag: string, bytes: number): Promise<void> {
    await this.rememberTeam(team);
    this.uploads.putPart(u.jobId, u.stream, ref.uploadId, part, etag, bytes);
  }

  /** Everything `complete` needs, once every part is stored. */
  async multipartFinish(team: string, u: UploadWho): Promise<MultipartFinishAnswer> {
    await this.rememberTeam(team);
    const refused = this.uploadRefusal(u, false);
    if (refused) return refused;
    const up = this.uploads.get(u.jobId, u.stream);
    if (!up) return { ok: false, status: 409, code: 'conflict', message: `no multipart upload of the ${u.stream} artifact of job "${u.jobId}" is open; start one with POST …/multipart` };
    const parts = this.uploads.parts(u.jobId, u.stream);
    const n = partCount(up.bytes, up.part_bytes);
    const missing = Array.from({ length: n }, (_, i) => i + 1).filter((p) => !parts.some((x) => x.part === p));
    if (missing.length) return { ok: false, status: 409, code: 'conflict', message: `parts ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', …' : ''} of ${n} are not stored yet; upload them before completing` };
    return {
      ok: true, uploadId: up.upload_id, key: up.r2_key, parts: parts.map((p) => ({ partNumber: p.part, etag: p.etag })),
      bytes: up.bytes, partBytes: up.part_bytes, lines: up.lines, truncated: up.truncated === 1,
    };
  }

  /** The agent gives up on the stream's upload: the edge forgets it and hands back the R2 upload to abort. */
  async multipartAbandon(team: string, u: UploadWho): Promise<MultipartAbandonAnswer> {
    await this.rememberTeam(team);
    const row = this.store.get(u.jobId);
    if (!row || row.artifact_handle !== u.handle || row.agent_subject !== u.subject) {
      return { ok: false, status: 404, code: 'not_found', message: `job "${u.jobId}" with artifact "${u.handle}" not found` };
    }
    // Another agent must not abort the upload of the job's own agent.
    const forbidden = this.grantRefusal(u, row);
    if (forbidden) return forbidden;
    const up = this.uploads.get(u.jobId, u.stream);
    if (up && this.store.artifactRow(u.jobId, u.stream)?.state === 'complete') return { ok: true, upload: null };
    this.uploads.remove(u.jobId, u.stream);
    return { ok: true, upload: up ? { uploadId: up.upload_id, key: up.r2_key } : null };
  }

  /**
   * Aborts the R2 uploads that will never complete (their stream was given up, their agent was
   * lost, their job pruned), so no parts stay stored (and billed) for nothing.
   */
  private async abortAbandonedUploads(): Promise<void> {
    for (const up of this.uploads.abandoned()) {
      try {
        await this.env.ARTIFACTS.resumeMultipartUpload(up.r2_key, up.upload_id).abort();
      } catch (e) {
        // Already aborted or completed, or never known to R2: nothing is left to clean either way.
        console.warn(`aborting the multipart upload of job ${up.job_id} ${up.stream}: ${(e as Error).message}`);
      }
      this.uploads.remove(up.job_id, up.stream);
    }
  }

  // ================= agent sockets =================

  /**
   * Attachments already read in this instance's life: deserializing one is a structured clone,
   * and a governed call walks every socket's attachment several times (placement, liveness).
   * Only `attach` writes attachments and it writes both; after hibernation or a restart the
   * instance is new and the map empty, so a socket's attachment is read from the platform again.
   */
  private readonly attachments = new WeakMap<WebSocket, Readonly<AgentAttachment> | null>();

  private attach(ws: WebSocket, att: AgentAttachment): void {
    // Identity only, far below the platform limit; checked so a change that grows it fails loudly here.
    if (attachmentBytes(att) > HIBERNATION_ATTACHMENT_MAX_BYTES / 4) throw new Error('agent attachment grew beyond identity');
    ws.serializeAttachment(att);
    this.attachments.set(ws, Object.freeze({ ...att }));
  }

  /** When each agent's `last_seen` was last written by this instance. */
  private readonly touched = new Map<string, number>();

  /**
   * Records that an agent was heard from. Written at most every quarter heartbeat: an agent sends
   * several messages per job, and liveness only needs `last_seen` within MISSED_HEARTBEATS
   * heartbeats (a heartbeat itself is always written: they come a whole heartbeat apart).
   */
  private touch(agentId: string, now: number): void {
    if (now - (this.touched.get(agentId) ?? -Infinity) < this.heartbeatMs() / 4) return;
    this.touched.set(agentId, now);
    this.registry.touch(agentId, now);
  }

  private attachmentOf(ws: WebSocket): AgentAttachment | null {
    if (this.attachments.has(ws)) return this.attachments.get(ws) as AgentAttachment | null;
    const att = (ws.deserializeAttachment() as AgentAttachment | null) ?? null;
    this.attachments.set(ws, att && Object.freeze(att));
    return att;
  }

  /** Each socket's message budget (memory only: see agent-budget.ts for what a restart means). */
  private readonly budgets = new WeakMap<WebSocket, AgentBudget>();

  private budgetOf(ws: WebSocket): AgentBudget {
    let b = this.budgets.get(ws);
    if (!b) this.budgets.set(ws, (b = new AgentBudget(this.heartbeatMs(), Date.now())));
    return b;
  }

  async webSocketMessage(ws: WebSocket, raw: string | ArrayBuffer): Promise<void> {
    const att = this.attachmentOf(ws);
    if (!att) return;
    const budget = this.budgetOf(ws);
    // Closed for its budget: what it still sends is dropped unread.
    if (budget.over) return;
    const now = Date.now();
    if (typeof raw !== 'string') return this.onOutputFrame(ws, att, budget, raw, now);
    // A job already answered on this socket: dropped (its exit acknowledged again) without parsing or storage reads.
    const peeked = att.agentId ? peekJobMessage(raw) : null;
    const again = peeked && budget.answeredAs(peeked.jobId);
    if (peeked && again) {
      if (peeked.type === 'job.exit' && again === 'ended') this.sendTo(ws, { type: 'job.ack', jobId: peeked.jobId });
      return this.spend(ws, att, again === 'ended' ? budget.late(now) : budget.stranger(0, now));
    }
    const parsed = parseAgentMessage(raw);
    if (!parsed.ok) {
      console.warn(`agent ${att.agentId ?? '(before hello)'}: rejected message: ${parsed.reason}`);
      return this.spend(ws, att, budget.stranger(raw.length, now));
    }
    const msg = parsed.message;
    if (msg.type === 'hello' || msg.type === 'heartbeat') {
      const over = budget.heartbeat(now);
      if (over) return this.overBudget(ws, att, over);
    }
    if (msg.type === 'hello') return this.onHello(ws, att, msg, now);
    if (!att.agentId) {
      ws.close(1002, 'hello first');
      return;
    }
    const agentId = att.agentId;
    this.touch(agentId, now);
    switch (msg.type) {
      case 'heartbeat': {
        this.reconcileHeld(agentId, msg.running, now, 2 * this.heartbeatMs());
        return;
      }
      case 'job.exit.part': {
        const row = this.store.get(msg.jobId);
        if (row?.state !== 'running' || row.agent !== agentId) return this.strayAbout(ws, att, budget, msg.jobId, row, raw.length, 1, now);
        const over = budget.part(msg.jobId);
        if (over) return this.overBudget(ws, att, over);
        this.store.putPart(msg.jobId, msg.stream, msg.seq, msg.data);
        return;
      }
      case 'job.exit': {
        const row = this.store.get(msg.jobId);
        if (!row || row.agent !== agentId) {
          // Only the agent a job was assigned to may report its end.
          if (row) console.warn(`agent ${agentId} reported the end of job ${msg.jobId}, which runs on ${row.agent ?? 'no agent'}; ignored`);
          return this.strayAbout(ws, att, budget, msg.jobId, row, raw.length, 1, now);
        }
        stamp(this.env, 'do.exit_received');
        budget.ended(msg.jobId);
        if (row.state === 'running') {
          let exit: JobExit = msg;
          if (msg.parts) {
            const stdout = this.store.partsText(msg.jobId, 'stdout', msg.parts.stdout);
            const stderr = this.store.partsText(msg.jobId, 'stderr', msg.parts.stderr);
            if (stdout === null || stderr === null) return; // parts missing: the agent re-sends everything after a reconnect
            exit = { ...msg, stdout, stderr, parts: undefined };
          }
          this.close(msg.jobId, exit.state, { exit, fromAgent: agentId });
        } else {
          // Stored before (a re-send whose ack was lost): acknowledged again; a further copy on this socket is a stray.
          budget.answer(msg.jobId, 'ended');
        }
        // Stored now or before: the agent may forget it.
        this.sendTo(ws, { type: 'job.ack', jobId: msg.jobId });
        await this.pump();
        return;
      }
      case 'job.artifact': {
        const row = this.store.get(msg.jobId);
        // An agent reports each stream once per connection; the same report again changes nothing.
        const first = budget.report(msg.jobId, msg.stream);
        if (!row || row.agent !== agentId || row.state === 'queued') {
          // Only the agent a job was assigned to may say how its upload ended.
          if (row) console.warn(`agent ${agentId} reported the ${msg.stream} artifact of job ${msg.jobId}, which is not its job; ignored`);
          // A job the edge does not know never takes the report: the agent may forget it.
          else if (first) this.sendTo(ws, { type: 'job.ack', jobId: msg.jobId, stream: msg.stream });
          return this.strayAbout(ws, att, budget, msg.jobId, row, raw.length, 1, now);
        }
        if (this.store.reportArtifact(msg.jobId, msg.stream)) {
          console.warn(`job ${msg.jobId}: the ${msg.stream} artifact was not stored (agent says ${msg.state}${msg.error ? `: ${msg.error}` : ''})`);
          this.settle(msg.jobId);
          await this.abortAbandonedUploads();
        }
        this.sendTo(ws, { type: 'job.ack', jobId: msg.jobId, stream: msg.stream });
        return first ? undefined : this.spend(ws, att, budget.late(now));
      }
      case 'job.error': {
        const row = this.store.get(msg.jobId);
        if (row?.state !== 'running' || row.agent !== agentId) return this.strayAbout(ws, att, budget, msg.jobId, row, raw.length, 1, now);
        // A full agent (its own count raced ours): the job goes back to the head of the queue.
        if (msg.code === 'capacity') this.store.requeue(msg.jobId);
        else this.close(msg.jobId, 'failed_to_start', { error: { code: msg.code, message: msg.message }, fromAgent: agentId });
        await this.pump();
        return;
      }
    }
  }

  /**
   * A message about a job that does not run on this agent changed nothing. The first about each
   * job is answered (`job.ack`: forget it) and the job remembered, so later ones are dropped
   * without a storage read. About the agent's own ended job it is late (`ownCost`: its late
   * output costs nothing, the rest one unit); about a stranger (unknown, or another agent's job)
   * it costs its size, since it was parsed and looked up for nothing.
   */
  private strayAbout(
    ws: WebSocket, att: AgentAttachment, budget: AgentBudget, jobId: string, row: JobRow | null, bytes: number, ownCost: 0 | 1, now: number,
  ): Promise<void> | undefined {
    const own = row !== null && row.agent === att.agentId;
    if (budget.answer(jobId, own ? 'ended' : 'stranger')) this.sendTo(ws, { type: 'job.ack', jobId });
    if (own) return ownCost ? this.spend(ws, att, budget.late(now)) : undefined;
    return this.spend(ws, att, budget.stranger(bytes, now));
  }

  /** Closes the socket when what it just sent took it over its budget. */
  private spend(ws: WebSocket, att: AgentAttachment, over: Overrun | null): Promise<void> | undefined {
    return over ? this.overBudget(ws, att, over) : undefined;
  }

  /**
   * Closes a socket that went over its message budget and audits it (once: whatever it sends
   * after is dropped unread). The agent's jobs are orphaned like on any disconnect: a real agent
   * that reconnects in time keeps them.
   */
  private async overBudget(ws: WebSocket, att: AgentAttachment, over: Overrun): Promise<void> {
    const who = att.agentId ?? '(before hello)';
    console.warn(`agent ${who} (subject ${att.subject}): ${over.message}; closing its connection`);
    this.dropAgentSocket(ws, over.message);
    try { ws.close(AGENT_BUDGET_CLOSE, over.message); } catch { /* gone */ }
    try {
      await writeAudit(this.env.DB, {
        team: await this.team(), subject: att.subject, tokenId: att.tokenId, tool: AGENT_CONNECT_AUDIT_TOOL, decision: 'denied',
        reason: `agent ${who}: ${over.message}; connection closed (${AGENT_BUDGET_CLOSE})`, command: { agentId: att.agentId, budget: over.kind },
      });
    } catch (e) {
      console.error(`could not audit the closed connection of agent ${who}: ${(e as Error).message}`);
    }
  }

  /**
   * Live output (a binary frame): kept by byte offset while the job runs on this agent. Output
   * is bulk data, not a sign of life: only the agent's JSON messages (heartbeats first) count as
   * liveness, so a flood of output can never stand in for heartbeats that do not arrive. Frames
   * of the agent's own ended jobs (one the edge gave up on may still run) cost nothing; others do.
   */
  private onOutputFrame(ws: WebSocket, att: AgentAttachment, budget: AgentBudget, raw: ArrayBuffer, now: number): Promise<void> | undefined {
    if (!att.agentId) return this.spend(ws, att, budget.stranger(0, now));
    const parsed = decodeOutputFrame(raw);
    if (!parsed.ok) {
      console.warn(`agent ${att.agentId}: rejected output frame: ${parsed.reason}`);
      return this.spend(ws, att, budget.stranger(0, now));
    }
    const f = parsed.frame;
    const again = budget.answeredAs(f.jobId);
    if (again) return again === 'ended' ? undefined : this.spend(ws, att, budget.stranger(0, now));
    const row = this.store.get(f.jobId);
    if (row?.state !== 'running' || row.agent !== att.agentId) return this.strayAbout(ws, att, budget, f.jobId, row, 0, 0, now);
    if (this.store.appendOutput(f.jobId, f.stream, f.offset, f.data) === 0) return undefined;
    // Followers turn output into progress (its last line): the tail is enough, and keeps their streams small.
    const tail = f.data.subarray(Math.max(0, f.data.byteLength - FOLLOW_OUTPUT_BYTES));
    this.emit(f.jobId, { type: 'output', stream: f.stream, data: new TextDecoder().decode(tail) });
    return undefined;
  }

  private async onHello(ws: WebSocket, att: AgentAttachment, hello: AgentHello, now: number): Promise<void> {
    // Placement (sandbox.minimum, labels, agent) trusts the registry, so only granted claims reach it.
    const refused = checkAgentClaims(att.grant, hello);
    if (refused) return this.refuseClaims(ws, att, hello, refused);
    if (att.agentId && att.agentId !== hello.agentId) {
      ws.close(1002, 'an agent id cannot change on a connection');
      return;
    }
    // An agent id is bound to the token subject that registered it, while it is in use.
    const known = this.registry.get(hello.agentId);
    if (known && known.subject !== att.subject) {
      const inUse = this.socketOf(hello.agentId) !== null || this.store.running().some((j) => j.agent === hello.agentId);
      if (inUse) {
        console.warn(`refused hello: agent id ${hello.agentId} belongs to subject ${known.subject}, not ${att.subject}`);
        ws.close(4003, `agent id "${hello.agentId}" is in use by another agent token; pick another --id`);
        return;
      }
    }
    // Same identity again (a reconnect, or a restarted process): the new connection replaces the old one.
    for (const other of this.ctx.getWebSockets()) {
      if (other === ws) continue;
      const o = this.attachmentOf(other);
      if (o?.agentId !== hello.agentId) continue;
      this.attach(other, { ...o, agentId: null });
      try { other.close(1000, 'replaced by a new connection of the same agent'); } catch { /* gone */ }
    }
    this.attach(ws, { ...att, agentId: hello.agentId });
    this.registry.connect(hello, att, now);
    // Jobs this agent should hold but does not list are orphaned: lost unless a connection reports them in time.
    this.reconcileHeld(hello.agentId, hello.running, now, 0);
    this.sendTo(ws, { type: 'welcome', v: PROTOCOL_VERSION, team: await this.team(), heartbeatMs: this.heartbeatMs() });
    await this.pump();
    await this.scheduleAlarm();
  }

  /** Closes a connection whose `hello` claims more than its token grants, and audits the attempt. */
  private async refuseClaims(ws: WebSocket, att: AgentAttachment, hello: AgentHello, r: ClaimRefusal): Promise<void> {
    console.warn(`refused hello of agent ${hello.agentId} (subject ${att.subject}): ${r.message}`);
    if (att.agentId) this.dropAgentSocket(ws, 'claimed more than its token grants');
    try { ws.close(AGENT_CLAIM_REFUSED_CLOSE, closeReason(r.message)); } catch { /* gone */ }
    try {
      await writeAudit(this.env.DB, {
        team: await this.team(), subject: att.subject, tokenId: att.tokenId, tool: AGENT_CONNECT_AUDIT_TOOL, decision: 'denied', reason: r.message,
        command: { agentId: hello.agentId, sandbox: hello.sandbox, labels: hello.labels, claim: r.claim },
      });
    } catch (e) {
      console.error(`could not audit the refused hello of agent ${hello.agentId}: ${(e as Error).message}`);
    }
  }

  /** Jobs the agent reports are held; assigned ones it does not report (older than `settleMs`) are orphaned. */
  private reconcileHeld(agentId: string, reported: string[], now: number, settleMs: number): void {
    const held = new Set(reported);
    const mine = this.store.running().filter((j) => j.agent === agentId);
    this.store.clearOrphaned(mine.filter((j) => held.has(j.id) && j.orphaned_at !== null).map((j) => j.id));
    this.store.setOrphaned(mine.filter((j) => !held.has(j.id) && j.orphaned_at === null && now - (j.started_at ?? now) >= settleMs).map((j) => j.id), now);
  }

  async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    this.dropAgentSocket(ws, `closed (${code}${reason ? `: ${reason}` : ''})`);
  }

  async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    this.dropAgentSocket(ws, `socket error: ${String(error)}`);
  }

  /** Jobs of a vanished agent are not failed at once: it may reconnect and deliver them. */
  private dropAgentSocket(ws: WebSocket, why: string): void {
    const att = this.attachmentOf(ws);
    const agentId = att?.agentId;
    if (!att || !agentId) return;
    this.attach(ws, { ...att, agentId: null });
    console.log(`agent ${agentId} ${why}`);
    if (this.socketOf(agentId)) return;
    this.registry.disconnected(agentId);
    const now = Date.now();
    this.store.setOrphaned(this.store.running().filter((j) => j.agent === agentId).map((j) => j.id), now);
    void this.scheduleAlarm();
  }

  private sendTo(ws: WebSocket, m: EdgeMessage): boolean {
    try {
      ws.send(JSON.stringify(m));
      return true;
    } catch {
      return false;
    }
  }

  private liveAgents(): { ws: WebSocket; att: AgentAttachment & { agentId: string } }[] {
    const out = [];
    for (const ws of this.ctx.getWebSockets()) {
      if (ws.readyState !== WebSocket.OPEN) continue;
      const att = this.attachmentOf(ws);
      if (att?.agentId) out.push({ ws, att: att as AgentAttachment & { agentId: string } });
    }
    return out;
  }

  private socketOf(agentId: string): WebSocket | null {
    return this.liveAgents().find((a) => a.att.agentId === agentId)?.ws ?? null;
  }

  private loadByAgent(running: readonly JobRow[] = this.store.running()): Map<string, number> {
    const load = new Map<string, number>();
    for (const j of running) load.set(j.agent!, (load.get(j.agent!) ?? 0) + 1);
    return load;
  }

  /** The connected agents as the scheduler sees them; `running` when the caller just read it. */
  private schedAgents(running?: readonly JobRow[]): SchedAgent[] {
    const load = this.loadByAgent(running);
    const out: SchedAgent[] = [];
    for (const { att } of this.liveAgents()) {
      const r = this.registry.get(att.agentId);
      if (!r) continue;
      out.push({
        id: r.id, capacity: r.capacity, running: load.get(r.id) ?? 0, sandbox: r.sandbox,
        labels: JSON.parse(r.labels) as string[], runtimes: (JSON.parse(r.runtimes) as { name: string }[]).map((x) => x.name),
      });
    }
    return out;
  }

  // ================= scheduling =================

  /** Applies the scheduler's decisions: start what can start, refuse what waited too long. */
  private async pump(): Promise<void> {
    for (let round = 0; round < 4; round++) {
      const queue = this.store.queued();
      if (queue.length === 0) return;
      const running = this.store.running();
      const decision = schedule({
        now: Date.now(), queue: queue.map(toSchedJob), agents: this.schedAgents(running), teamRunning: running.length,
        maxConcurrent: queue[0].max_concurrent,
      });
      let retry = false;
      for (const { jobId, reason } of decision.expire) {
        this.close(jobId, 'refused', { error: await this.refusal(jobId, reason) });
      }
      for (const { jobId, agentId } of decision.start) {
        const spec = this.store.spec(jobId);
        const r = this.registry.get(agentId);
        const ws = this.socketOf(agentId);
        if (!spec || !r || !ws) continue;
        const now = Date.now();
        if (!this.store.assign(jobId, { id: agentId, subject: r.subject, sandbox: r.sandbox }, now)) continue;
        // Only this socket learns the job's upload grant: another agent of the same token cannot upload its artifacts.
        const upload = this.uploads.grant(jobId, agentId, now);
        this.budgetOf(ws).started(jobId);
        if (!this.sendTo(ws, { type: 'job.start', spec, upload })) {
          this.store.requeue(jobId);
          retry = true;
          continue;
        }
        stamp(this.env, 'do.job_start_sent');
        this.emit(jobId, { type: 'started', jobId, agentId, sandbox: r.sandbox });
        this.syncSoon();
      }
      if (!retry) break;
    }
    await this.scheduleAlarm();
  }

  private async refusal(jobId: string, why: Ineligibility | 'busy'): Promise<{ code: string; message: string }> {
    const row = this.store.get(jobId)!;
    const team = await this.team();
    const waited = `${Math.max(0, row.deadline - row.created_at)}ms`;
    switch (why) {
      case 'no_agent':
        return { code: 'no_agent', message: `${noAgentMessage(team)} (waited ${waited} for one)` };
      case 'runtime': {
        const def = RUNTIMES[row.runtime as RuntimeName];
        return {
          code: 'runtime_unavailable',
          message: `runtime "${row.runtime}" is not installed on any connected executor agent; install ${def ? `the Debian package ${def.debianPackage}` : 'its toolchain'} on the agent host and restart the agent`,
        };
      }
      case 'sandbox':
        return { code: 'no_agent', message: `no connected executor agent meets the team's sandbox floor (sandbox.minimum = ${row.sandbox_min}); start an agent with --sandbox ${row.sandbox_min === 'gvisor' ? 'gvisor' : 'gvisor or bwrap'}` };
      case 'agent':
        return { code: 'no_agent', message: `executor agent "${row.sel_agent}" is not connected (or cannot run this job); connected: ${this.liveAgents().map((a) => a.att.agentId).join(', ') || 'none'}` };
      case 'labels':
        return { code: 'no_agent', message: `no connected executor agent carries all the labels ${row.sel_labels}; start one with --label for each` };
      case 'busy': {
        const agents = this.schedAgents();
        const active = this.store.running().length;
        const slots = agents.reduce((n, a) => n + a.capacity, 0);
        const message = active >= row.max_concurrent || slots >= row.max_concurrent
          ? concurrencyLimitMessage(active, row.max_concurrent)
          : `All executor agents are busy (${active}/${slots} slots in use on ${agents.length} agent${agents.length === 1 ? '' : 's'}); try again later or start another agent`;
        return { code: 'concurrency_limit', message: `${message} (waited ${waited} in the queue)` };
      }
    }
  }

  /** Moves a job to its terminal state (once), tells whoever waits, and queues the D1/audit update. */
  private close(jobId: string, state: JobState, o: { exit?: JobExit; error?: { code: string; message: string }; fromAgent?: string }): boolean {
    if (!this.store.finish(jobId, state, Date.now(), o)) return false;
    // job_status waiters learn the end now; a caller waiting for the whole result also gets the stored artifact.
    for (const done of [...(this.endWaiters.get(jobId) ?? [])]) done();
    this.endWaiters.delete(jobId);
    this.settle(jobId);
    void this.sync();
    return true;
  }

  /** Gives callers following an ended job its result once no upload it announced is still running. */
  private settle(jobId: string): void {
    const row = this.store.get(jobId);
    if (!row || !isTerminal(row.state) || this.store.hasUploading(jobId)) return;
    stamp(this.env, 'do.settled');
    this.emit(jobId, this.finalEvent(row));
    this.listeners.delete(jobId);
  }

  private finalEvent(row: JobRow): DispatchEvent {
    const exit = this.store.result(row.id);
    if (exit) return { type: 'exit', exit, agentId: row.agent ?? '', sandbox: (row.sandbox ?? 'none') as SandboxKind };
    if (row.state === 'lost' && row.agent) {
      return { type: 'exit', exit: lostExit(row.id, (row.ended_at ?? Date.now()) - (row.started_at ?? row.created_at), row.error_message ?? 'lost'), agentId: row.agent, sandbox: row.sandbox ?? 'none' };
    }
    return { type: 'error', code: row.error_code ?? row.state, message: row.error_message ?? `job ${row.state}` };
  }

  private emit(jobId: string, e: DispatchEvent): void {
    for (const l of [...(this.listeners.get(jobId) ?? [])]) l(e);
  }

  // ================= liveness, deadlines, bookkeeping =================

  private async scheduleAlarm(): Promise<void> {
    const queued = this.store.queued();
    const open = queued.length + this.store.running().length + this.store.uploading().length;
    const anyone = this.ctx.getWebSockets().length > 0;
    if (!open && !anyone && this.store.unsynced(1).length === 0) return;
    const now = Date.now();
    let at = now + this.heartbeatMs();
    const dl = nextDeadline(queued.map(toSchedJob));
    if (dl !== null) at = Math.min(at, Math.max(now + 10, dl));
    await this.alarmNoLaterThan(at);
  }

  /** Moves the object's alarm to `at` unless one is set sooner. */
  private async alarmNoLaterThan(at: number): Promise<void> {
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > at) await this.ctx.storage.setAlarm(at);
  }

  async alarm(): Promise<void> {
    const hb = this.heartbeatMs();
    const now = Date.now();
    const silentFor = MISSED_HEARTBEATS * hb;
    for (const { ws, att } of this.liveAgents()) {
      const lastSeen = this.registry.get(att.agentId)?.last_seen ?? att.connectedAt;
      if (now - lastSeen > silentFor) {
        this.dropAgentSocket(ws, `missed heartbeats (silent for ${now - lastSeen}ms)`);
        try { ws.close(4000, `no heartbeat for ${now - lastSeen}ms`); } catch { /* gone */ }
      }
    }
    // A token revoked by any path (admin API, offline) disconnects its agents at the next tick.
    await this.dropRevokedAgents();
    for (const j of this.store.running()) {
      if (j.orphaned_at === null && !this.socketOf(j.agent!)) {
        // No socket and no close event: this object restarted (a deploy drops every socket). Its agents
        // are reconnecting with backoff; count the grace from when the slowest of them is back.
        this.store.setOrphaned([j.id], now + Math.max(0, AGENT_RECONNECT_MAX_BACKOFF_MS - silentFor));
      }
      else if (j.orphaned_at !== null && now - j.orphaned_at > silentFor) {
        this.close(j.id, 'lost', { error: { code: 'lost', message: `executor agent ${j.agent} did not report the job for ${now - j.orphaned_at}ms (${MISSED_HEARTBEATS} heartbeats); it disconnected or no longer holds the job` } });
      }
    }
    // An ended job's uploads: its agent keeps reporting them while connected; gone for 3 heartbeats
    // (after the reconnect allowance), they never will, and what the edge kept live is what remains.
    for (const j of this.store.uploading()) {
      if (this.socketOf(j.agent ?? '')) {
        if (j.orphaned_at !== null) this.store.markUploadOrphaned(j.id, null);
      } else if (j.orphaned_at === null) {
        this.store.markUploadOrphaned(j.id, now + Math.max(0, AGENT_RECONNECT_MAX_BACKOFF_MS - silentFor));
      } else if (now - j.orphaned_at > silentFor) {
        console.warn(`job ${j.id}: agent ${j.agent} went away before its artifact upload ended`);
        this.store.failUploads(j.id);
        this.settle(j.id);
      }
    }
    await this.pump();
    await this.sync();
    if (this.store.prune(now - JOB_RETENTION_MS) > 0) this.uploads.pruneGrants();
    await this.abortAbandonedUploads();
    this.registry.prune(now - JOB_RETENTION_MS);
    await this.scheduleAlarm();
  }

  private async dropRevokedAgents(): Promise<void> {
    const team = await this.team();
    const byToken = new Map<string, WebSocket[]>();
    for (const ws of this.ctx.getWebSockets()) {
      const att = this.attachmentOf(ws);
      if (att?.tokenId) byToken.set(att.tokenId, [...(byToken.get(att.tokenId) ?? []), ws]);
    }
    for (const [tokenId, sockets] of byToken) {
      let revoked = false;
      try {
        revoked = await isRevoked(this.env, team, tokenId);
      } catch (e) {
        console.error(`revocation check failed: ${(e as Error).message}`);
      }
      if (!revoked) continue;
      for (const ws of sockets) {
        this.dropAgentSocket(ws, 'its token was revoked');
        try { ws.close(4001, 'agent token revoked'); } catch { /* gone */ }
      }
    }
  }

  /**
   * A started job's `running` reaches D1 a moment later: a short job has ended by then, and one
   * D1 write carries its end instead of two (its start, then its end) — one storage call less on
   * the gateway per short job. The DO's own row is the durable record meanwhile, and the alarm
   * retries whatever is still unsynced.
   */
  private syncSoon(): void {
    this.syncTimer ??= setTimeout(() => {
      this.syncTimer = null;
      void this.sync();
    }, START_SYNC_DELAY_MS);
  }

  /** Copies job rows that changed into D1 (the team-wide index and the audit log): see copyPending. */
  private async sync(): Promise<void> {
    if (this.syncing) return;
    this.syncing = true;
    try {
      const team = await this.team();
      const plan = workersPlan(this.env);
      const pass = await copyPending({
        pending: () => this.store.unsynced(),
        // A job's copy is its two UPDATEs, and the two INSERTs that create its rows the first time.
        cost: (row) => (row.d1_created ? 2 : 4),
        maxQueries: copyQueryBudget(plan.ok ? plan.plan : 'free'),
        copy: async (row) => {
          await syncJobToD1(this.env.DB, team, this.store.view(row), row.audit_id !== null ? { id: row.audit_id } : { jobId: row.id }, this.store.d1Record(row));
          this.store.markSynced(row.id, row.state);
        },
        onError: (row, e) => console.error(`job bookkeeping failed for ${row.id}: ${(e as Error).message}; retried at the next alarm`),
      });
      // The rest in a new invocation (its own D1 query budget): an alarm right away, not at the next heartbeat.
      if (pass.budgetLeftRows) await this.alarmNoLaterThan(Date.now() + COPY_AGAIN_AFTER_MS);
    } finally {
      this.syncing = false;
    }
  }
}

function toSchedJob(r: JobRow): SchedJob {
  return {
    id: r.id, deadline: r.deadline, runtime: r.runtime ?? undefined, sandboxMinimum: r.sandbox_min ?? undefined,
    agent: r.sel_agent ?? undefined, labels: r.sel_labels ? (JSON.parse(r.sel_labels) as string[]) : undefined,
  };
}

function answerFor(row: JobRow): SubmitAnswer {
  if (row.state === 'queued' || row.state === 'running') return { ok: true, jobId: row.id, state: row.state, agentId: row.agent };
  if (row.state === 'refused' || row.state === 'cancelled' && !row.agent) {
    return { ok: false, code: row.error_code ?? row.state, message: row.error_message ?? `job ${row.state}` };
  }
  return { ok: true, jobId: row.id, state: 'running', agentId: row.agent };
}
