/**
 * TeamDispatcher: one Durable Object per team, a thin shell over its capabilities (capabilities.ts;
 * docs/architecture.md lists them) — each owns its tables (with their migrations) and reaches the
 * object only through `DispatchHost` (host.ts, built over the object by object-host.ts). The shell
 * wires them to the Workers RPC methods the edge calls (client.ts) and to the platform's socket and
 * alarm events; its one alarm fires at the soonest wake-up any capability asks for.
 */
import { DurableObject } from 'cloudflare:workers';
import type { Env } from '../env.ts';
import type { JobExit, StreamName } from '../contracts/agent-protocol.ts';
import type { AgentView, JobListFilter, JobState, JobView } from '../contracts/jobs.ts';
import { workersPlan } from '../platform/plan.ts';
import { stamp } from '../contracts/trace.ts';
import { capabilities, type Capabilities } from './capabilities.ts';
import type { DispatchHealth } from './jobs.ts';
import { Usage, type UsageSnapshot } from './usage.ts';
import type { AuditExportPage, DispatchRequest, KeptOutput, MultipartAbandonAnswer, MultipartBeginAnswer, MultipartFinishAnswer } from './events.ts';
import type { MultipartPartAnswer, MultipartRef, MultipartShape, SubmitAnswer, TeamOverview, TeamOverviewQuery, UploadAnswer, UploadWho } from './events.ts';
import { workspaceRpc, type WorkspaceAnswer, type WorkspaceOp } from './workspace-rpc.ts';
import type { DispatchHost } from './host.ts';
import { objectHost } from './object-host.ts';
import { auditExportPage, taskWithView, teamOverview } from './team-reports.ts';
import type { AdminDecision, ApprovalOutcome, ApprovalRow, OpenApproval, UseApproval } from '../approval/record.ts';
import type { EgressConnectionView, JobNetworkView } from '../contracts/network.ts';
import type { ApprovalListFilter } from './approvals.ts';
import type { TeamTask } from './tasks.ts';
import type { ImportCount, TeamRecordsImport } from './team-records-client.ts';
import type { ArtifactRow, BodyPlace, StoredArtifact } from './artifact-index.ts';
import type { AuditEntry, AuditFilter, AuditRow } from '../store/audit.ts';
import type { Admission, Suspension } from './admission.ts';
import type { StorageView } from '../contracts/audit.ts';
import type { PolicyStamp } from '../store/admission.ts';
import type { Quotas } from '../store/teams.ts';
import type { TeamUsage } from './quotas.ts';
import { DeletionMark, exportObject, type ObjectExport, type TeamDeletion } from './team-erasure.ts';
import type { RetentionPolicy } from '../contracts/policy.ts';

export class TeamDispatcher extends DurableObject<Env> {
  private readonly host: DispatchHost;
  private caps: Capabilities | null = null;
  private readonly deletion: DeletionMark;
  /** What this instance costs, in memory (usage.ts): its wake-ups, SQL statements and rows, its own D1/R2 work. */
  private readonly meter = new Usage();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.host = objectHost(ctx, env, this.meter, { wakes: () => this.c.wakes, audit: (e) => void this.c.auditLog.record(e) });
    this.deletion = new DeletionMark(ctx.storage);
  }

  /** Built (and their migrations run) on first use: `ping` starts an object without touching its storage. */
  private get c(): Capabilities {
    this.caps ??= capabilities(this.host, { plan: workersPlan(this.env), trace: (step) => stamp(this.env, step) });
    return this.caps;
  }

  /** An RPC call that changes what the alarm is for: run as `rpc`, then the alarm is moved. */
  private async rpcThenWake<T>(call: () => T): Promise<Awaited<T>> {
    const r = await this.rpc(call);
    await this.host.wake();
    return r;
  }

  /** A read of the history: run as `rpc` once what an older deployment left in D1 is moved (legacy-import.ts). */
  private historyRpc<T>(read: () => T): Promise<T> {
    return this.rpc(async () => {
      await this.c.legacy.catchUp();
      return read();
    });
  }

  /** An RPC call: counted as a wake-up of the object (usage.ts), then run. */
  private rpc<T>(call: () => T): T {
    this.meter.wake('rpc');
    return call();
  }

  // ================= RPC: called by the edge Worker (src/dispatch/client.ts) =================

  /**
   * Agent WebSocket upgrades are the one thing that still arrives as `fetch`: a WebSocket can only
   * be handed over in an HTTP 101 response. The Worker has verified the token; it passes identity.
   */
  async fetch(request: Request): Promise<Response> {
    this.meter.wake('fetch');
    if (request.headers.get('Upgrade')?.toLowerCase() !== 'websocket') {
      return Response.json({ error: { code: 'invalid_argument', message: 'expected a WebSocket upgrade' } }, { status: 426 });
    }
    const who = this.c.link.attachmentFor(request);
    if (!who.ok) return Response.json({ error: { code: 'internal', message: who.message } }, { status: 500 });
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    this.ctx.acceptWebSocket(server);
    this.c.link.attach(server, who.att);
    await this.host.wake();
    return new Response(null, { status: 101, webSocket: client });
  }

  /** What this instance has cost so far (the bench and operators read it through the admin API); counts no wake-up of its own. */
  usage(): UsageSnapshot {
    return this.meter.snapshot();
  }

  /** The readiness probe's round trip (src/edge/readiness.ts): answers without storage, so a probe object stays empty. */
  ping(): true {
    return true;
  }

  /**
   * Records a job and queues it (or refuses it at once with a reason the caller can act on), then `follow`s it in the
   * same call (one hop instead of two); `events` is null when the job was not taken or runs in the background.
   */
  submitAndFollow(raw: DispatchRequest): Promise<{ answer: SubmitAnswer; events: ReadableStream<Uint8Array> | null }> {
    return this.rpc(async () => {
      stamp(this.env, 'do.submitted');
      const answer = await this.c.jobs.submit(raw, { followed: !raw.background });
      if (!answer.ok || raw.background) return { answer, events: null };
      return { answer, events: this.c.followers.follow(answer.jobId) };
    });
  }

  /** The job's events as NDJSON lines: where it stands now, then output, then its end. */
  follow(jobId: string): ReadableStream<Uint8Array> {
    return this.rpc(() => this.c.followers.follow(jobId));
  }

  status(jobId: string, waitMs = 0): Promise<JobView | null> {
    return this.rpc(() => this.c.views.status(jobId, waitMs));
  }

  result(jobId: string): { view: JobView; exit: JobExit | null } | null {
    return this.rpc(() => this.c.views.result(jobId));
  }

  liveOutput(jobId: string, stream: StreamName, offset: number, maxBytes: number): KeptOutput | null {
    return this.rpc(() => this.c.views.liveOutput(jobId, stream, offset, maxBytes));
  }

  list(filter: JobListFilter): { jobs: JobView[]; next_cursor: string | null } {
    return this.rpc(() => this.c.views.list(filter));
  }

  kill(jobId: string, reason: string): Promise<{ found: boolean; state: JobState | null }> {
    return this.rpc(() => this.c.jobs.kill(jobId, reason));
  }

  cancelByKey(cancelKey: string, reason: string): Promise<boolean> {
    return this.rpc(() => this.c.jobs.cancelByKey(cancelKey, reason));
  }

  agents(): AgentView[] {
    return this.rpc(() => this.c.jobs.agents());
  }

  /** The team's workspaces: list, or delete one (its agent is told). */
  workspaces(op: WorkspaceOp): WorkspaceAnswer {
    return this.rpc(() => workspaceRpc(this.c, op));
  }

  health(): DispatchHealth {
    return this.rpc(() => ({ ...this.c.jobs.health(), wakes: this.meter.idleWakes() }));
  }

  // ================= RPC: admission (admission.ts, called through admission-client.ts) =================

  /** Every authenticated request of the team: revoked?, the policy version, suspended? */
  admit(jti: string): Promise<Admission> {
    return this.rpc(async (): Promise<Admission> => {
      // A deleted team's object holds only its deletion mark: every token of the team is refused, nothing is rebuilt.
      const deleted = await this.deletion.admission();
      if (deleted) return deleted;
      // The team's first request after an upgrade starts moving its history out of D1, in the background.
      if (!this.c.legacy.finished) void this.c.legacy.catchUp().then(() => this.host.wake());
      return this.c.admission.admit(jti);
    });
  }

  /** A token was revoked: refused from the team's next request on, and every agent socket that authenticated with it goes now. */
  revokeToken(tokenId: string, revokedAt: number): { revokedAt: number; agentsDisconnected: number } {
    return this.rpc(() => {
      const at = this.c.admission.revoke(tokenId, revokedAt);
      return { revokedAt: at, agentsDisconnected: this.c.link.revoke(tokenId) };
    });
  }

  policyChanged(stamp: PolicyStamp, retention: RetentionPolicy): void {
    this.rpc(() => this.c.admission.policyChanged(stamp, retention));
    void this.host.wake();
  }

  /** Suspends the team (every call refused, agents told and disconnected) or, with null, resumes it. */
  suspend(s: Suspension | null): number {
    return this.rpc(() => {
      this.c.admission.suspend(s);
      return s ? this.c.link.disconnectAll(`team suspended: ${s.reason}`) : 0;
    });
  }

  beginUpload(u: UploadWho): UploadAnswer {
    return this.rpc(() => this.c.uploads.begin(u));
  }

  multipartBegin(u: UploadWho, shape: MultipartShape): MultipartBeginAnswer {
    return this.rpc(() => this.c.uploads.multipartBegin(u, shape));
  }

  multipartCreated(u: UploadWho, ref: MultipartRef, shape: MultipartShape): void {
    this.rpc(() => this.c.uploads.multipartCreated(u, ref, shape));
  }

  multipartPart(u: UploadWho, part: number, bytes: number): MultipartPartAnswer {
    return this.rpc(() => this.c.uploads.multipartPart(u, part, bytes));
  }

  multipartPartStored(u: UploadWho, ref: MultipartRef, part: number, etag: string, bytes: number): void {
    this.rpc(() => this.c.uploads.multipartPartStored(u, ref, part, etag, bytes));
  }

  multipartFinish(u: UploadWho): MultipartFinishAnswer {
    return this.rpc(() => this.c.uploads.multipartFinish(u));
  }

  multipartAbandon(u: UploadWho): MultipartAbandonAnswer {
    return this.rpc(() => this.c.uploads.multipartAbandon(u));
  }

  // ================= RPC: the team's audit log (audit-log.ts, called through audit-client.ts) =================

  recordAudit(e: AuditEntry): number | null {
    return this.rpc(() => this.c.auditLog.record(e));
  }

  queryAudit(f: AuditFilter): Promise<{ entries: AuditRow[]; nextCursor: string | null }> {
    return this.historyRpc(() => this.c.auditLog.query(f));
  }

  auditRowsOfJobs(jobIds: string[]): Promise<AuditRow[]> {
    return this.historyRpc(() => this.c.auditLog.jobRows(jobIds));
  }

  /** One page of the audit export (team-reports.ts). */
  auditExportPage(q: { after: number | null; since: number | null; limit: number }): Promise<AuditExportPage> {
    return this.rpc(() => auditExportPage(this.c, q));
  }

  /** The team's storage and what retention drops next. */
  storage(): StorageView {
    return this.rpc(() => this.c.retention.storage(this.host.now()));
  }

  /** The dashboard's landing figures from the team's own tables (src/admin/overview.ts). */
  overview(q: TeamOverviewQuery): Promise<TeamOverview> {
    return this.rpc(() => teamOverview(this.c, q, this.host.now()));
  }

  // ================= RPC: the team's artifact index (artifact-index.ts, called through artifact-client.ts) =================

  /** The upload route stored a stream (in R2, or `body` to keep here): index it and complete the stream's upload. */
  artifactUploaded(a: StoredArtifact, body: Uint8Array | null): Promise<BodyPlace> {
    return this.rpcThenWake(() => {
      const place = this.c.artifacts.store(a, body);
      this.c.uploads.end(a.jobId, a.stream, true, a.r2Key !== null ? a.bytes : (body?.byteLength ?? 0));
      return place;
    });
  }

  /** Script mode stored a stream: index it (no upload to complete). */
  indexArtifact(a: StoredArtifact, body: Uint8Array | null): Promise<BodyPlace> {
    return this.rpcThenWake(() => this.c.artifacts.store(a, body));
  }

  artifactRows(handle: string): ArtifactRow[] {
    return this.rpc(() => this.c.artifacts.rows(handle));
  }

  recentArtifacts(limit: number): ArtifactRow[] {
    return this.rpc(() => this.c.artifacts.recent(limit));
  }

  artifactBytes(handle: string, stream: StreamName, offset: number, length: number): Uint8Array | null {
    return this.rpc(() => this.c.artifacts.read(handle, stream, offset, length));
  }

  // ================= RPC: the team's approvals, tasks and egress log (approvals.ts, tasks.ts, egress.ts; called through team-records-client.ts) =================

  openApproval(o: OpenApproval): Promise<{ row: ApprovalRow; reused: boolean }> {
    return this.rpcThenWake(() => this.c.approvals.open(o));
  }

  approval(id: string): ApprovalRow | null {
    return this.rpc(() => this.c.approvals.get(id));
  }

  approvals(f: ApprovalListFilter): ApprovalRow[] {
    return this.rpc(() => this.c.approvals.list(f));
  }

  /** An admin's decision; a job's egress ask waiting on the approval is answered in the same step. */
  decideApproval(id: string, d: AdminDecision): ApprovalOutcome {
    return this.rpc(() => this.c.approvals.decide(id, d));
  }

  consumeApproval(u: UseApproval): ApprovalOutcome {
    return this.rpc(() => this.c.approvals.consume(u));
  }

  answerApprovalPrompt(u: UseApproval & { approve: boolean; by: string }): ApprovalOutcome {
    return this.rpc(() => this.c.approvals.answerPrompt(u));
  }

  saveTask(t: TeamTask): Promise<void> {
    return this.rpcThenWake(() => this.c.tasks.save(t));
  }

  task(subject: string, taskId: string, now: number): Promise<{ task: TeamTask; view: JobView } | null> {
    return this.rpc(() => taskWithView(this.c, subject, taskId, now));
  }

  jobNetwork(jobId: string): JobNetworkView | null {
    return this.rpc(() => this.c.egress.jobNetwork(jobId));
  }

  egressConnections(f: { limit: number; refusedOnly?: boolean; before?: number }): EgressConnectionView[] {
    return this.rpc(() => this.c.egress.connections(f));
  }

  /** Old rows from D1 (the migration tool): each kind taken in idempotently; retention applies to them from the next alarm. */
  importRecords(r: TeamRecordsImport): Promise<{ approvals: ImportCount; tasks: ImportCount; egress: ImportCount }> {
    return this.rpcThenWake(() => this.c.importRecords(r));
  }

  // ================= RPC: the team's life cycle, for operators (src/operator/; quotas.ts, team-erasure.ts) =================

  /** Calls, jobs, job-seconds and egress bytes today and this month (UTC), the object's storage, the quotas. */
  teamUsage(): TeamUsage {
    return this.rpc(() => this.c.quotas.usage(this.host.now()));
  }

  /** The directory's quotas for the team: enforced from the next submit on. */
  setQuotas(q: Quotas): void {
    this.rpc(() => this.c.quotas.setQuotas(q));
  }

  /** When (and by whom) the team was deleted; null: it was not. */
  async deletedAt(): Promise<TeamDeletion | null> {
    return this.rpc(() => this.deletion.read());
  }

  /** Writes every table the object keeps to R2 at `key` (NDJSON): what an operator's delete exports first. */
  exportTeamData(key: string, head: Record<string, unknown>): Promise<ObjectExport> {
    return this.rpc(() => exportObject(this.ctx.storage.sql, this.env.ARTIFACTS, key, head));
  }

  /** Erases the team's storage (its agents disconnected first); only the deletion mark stays. */
  deleteTeamData(mark: TeamDeletion): Promise<{ agentsDisconnected: number }> {
    return this.rpc(async () => {
      const agentsDisconnected = this.c.link.disconnectAll('team deleted');
      await this.deletion.erase(mark);
      this.caps = null;
      return { agentsDisconnected };
    });
  }

  // ================= platform events: agent sockets and the alarm =================

  /**
   * The platform hands the object each message of each socket in turn, even ones that queued up
   * behind the message that took a socket over its budget (and wakes a hibernated object for
   * them): a refused socket's are dropped here, with one lookup and no promise, parse or storage.
   */
  webSocketMessage(ws: WebSocket, raw: string | ArrayBuffer): Promise<void> | undefined {
    this.meter.wake('message');
    if (this.c.link.isRefused(ws)) return undefined;
    return this.c.messages.receive(ws, raw);
  }

  webSocketClose(ws: WebSocket, code: number, reason: string): void {
    this.c.link.drop(ws, `closed (${code}${reason ? `: ${reason}` : ''})`);
  }

  webSocketError(ws: WebSocket, error: unknown): void {
    this.c.link.drop(ws, `socket error: ${String(error)}`);
  }

  /** Each capability's timed work in the order capabilities.ts declares (`alarm`), then the next wake-up. */
  async alarm(): Promise<void> {
    this.meter.wake('alarm');
    const now = this.host.now();
    for (const work of this.c.alarm) await work.onAlarm(now);
    await this.host.wake();
  }
}
