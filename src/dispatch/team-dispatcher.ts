/**
 * TeamDispatcher: one Durable Object per team, a thin shell over its capabilities (capabilities.ts;
 * docs/architecture.md lists them) — each owns its tables (with their migrations) and reaches the
 * object only through `DispatchHost` (capability-host.ts, built over the object by object-host.ts).
 * This class is the Workers RPC methods the edge calls (client.ts), each delegating to a capability;
 * the platform's socket and alarm events and the shared plumbing are the base class's (object-shell.ts).
 */
import type { SecretView } from '../contracts/secrets.ts';
import type { SecretsAnswer } from './secrets.ts';
import type { RemoteServersAnswer, RemoteServersOp } from './remote-servers.ts';
import type { RemoteOAuthAnswer, RemoteOAuthOp } from './remote-oauth.ts';
import type { JobExit, StreamName } from '../contracts/agent-protocol.ts';
import type { AgentView, JobListFilter, JobState, JobView } from '../contracts/job-view.ts';
import { stamp } from '../contracts/trace.ts';
import type { DispatchHealth } from './job-metrics.ts';
import type { UsageSnapshot } from './usage.ts';
import { TeamObjectShell } from './object-shell.ts';
import type {
  AuditExportPage,
  DispatchRequest,
  KeptOutput,
  MultipartAbandonAnswer,
  MultipartBeginAnswer,
  MultipartFinishAnswer,
  MultipartPartAnswer,
  MultipartRef,
  MultipartShape,
  SubmitAnswer,
  TeamOverview,
  TeamOverviewQuery,
  UploadAnswer,
  UploadWho,
} from './events.ts';
import { workspaceRpc, type WorkspaceAnswer, type WorkspaceOp } from './workspace-rpc.ts';
import { auditExportPage, taskWithView, teamOverview } from './team-reports.ts';
import type { AdminDecision, ApprovalOutcome, ApprovalRow, OpenApproval, UseApproval } from '../approval/record.ts';
import type { EgressConnectionView, JobNetworkView } from '../contracts/network.ts';
import type { ApprovalListFilter } from './approvals.ts';
import type { TeamTask } from './tasks.ts';
import type { LibraryOp, LibraryResult } from './script-library.ts';
import type { ArtifactRow, BodyPlace, StoredArtifact } from './artifact-index.ts';
import type { AuditEntry, AuditFilter, AuditRow } from '../store/audit.ts';
import type { Admission, Suspension } from './admission.ts';
import type { StorageView } from '../contracts/audit.ts';
import type { PolicyStamp } from '../store/admission.ts';
import type { Quotas } from '../store/teams.ts';
import type { TeamUsage } from './quotas.ts';
import { exportObject, type ObjectExport, type TeamDeletion } from './team-erasure.ts';
import type { RetentionPolicy } from '../contracts/policy.ts';
import type { InputAnswer } from './interactive-sessions.ts';
import type { SessionInput } from '../contracts/interactive.ts';
import type { OutputWaitEnd, OutputWaitQuery } from './output-wait.ts';

export class TeamDispatcher extends TeamObjectShell {
  // ================= RPC: called by the edge Worker (src/dispatch/client.ts) =================

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

  /** Writes to an interactive job's stdin for the subject that started it (interactive-sessions.ts). */
  jobInput(jobId: string, subject: string, data: Uint8Array, eof: boolean): Promise<InputAnswer> {
    return this.rpcThenWake(() => this.c.sessions.input(jobId, subject, data, eof));
  }

  /** `job_output`'s wait (output-wait.ts) and an interactive job's writes; a read by the session's subject keeps it in use. */
  awaitOutput(q: OutputWaitQuery, subject: string): Promise<{ waited: OutputWaitEnd; inputs: SessionInput[] | null }> {
    return this.rpcThenWake(async () => {
      this.c.sessions.touch(q.jobId, subject, this.host.now());
      const waited = await this.c.views.waitOutput(q, () => this.host.now());
      return { waited, inputs: this.c.sessions.conversation(q.jobId) };
    });
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

  /** The team's script library (script-library.ts, called through script-library-client.ts). */
  scriptLibrary(o: LibraryOp): LibraryResult {
    return this.rpc(() => this.c.scripts.apply(o));
  }

  jobNetwork(jobId: string): JobNetworkView | null {
    return this.rpc(() => this.c.egress.jobNetwork(jobId));
  }

  egressConnections(f: { limit: number; refusedOnly?: boolean; before?: number }): EgressConnectionView[] {
    return this.rpc(() => this.c.egress.connections(f));
  }

  /** The team's remote MCP servers for scripts (remote-servers.ts; headers sealed by the edge): register, list, rows, remove. */
  remoteServers(o: RemoteServersOp): RemoteServersAnswer {
    return this.rpc(() => {
      const a = this.c.remoteServers.apply(o);
      // A server removed, or moved to another URL or auth, keeps no OAuth connection.
      if (o.op === 'remove' && a.op === 'remove' && a.removed) this.c.remoteOAuth.drop(o.id);
      if (o.op === 'put' && a.op === 'put' && a.moved) this.c.remoteOAuth.drop(o.server.id);
      return a;
    });
  }

  /** Those servers' OAuth connections (remote-oauth.ts; tokens sealed by the edge): start, finish, refresh, expire, list. */
  remoteOAuth(o: RemoteOAuthOp): RemoteOAuthAnswer {
    return this.rpc(() => this.c.remoteOAuth.apply(o));
  }

  // ================= RPC: the team's life cycle, for operators (src/operator/; quotas.ts, team-erasure.ts) =================

  /** Calls, jobs, job-seconds and egress bytes today and this month (UTC), the object's storage, the quotas. */
  teamUsage(): TeamUsage {
    return this.rpc(() => this.c.quotas.usage(this.host.now()));
  }

  /** The team's secrets (secrets.ts): set one (sealed here), list names and dates, remove one. Values never come back. */
  putSecret(name: string, value: string, by: string): Promise<SecretsAnswer<{ created: boolean }>> {
    return this.rpc(() => this.c.secrets.put(name, value, by));
  }
  listSecrets(): SecretView[] {
    return this.rpc(() => this.c.secrets.list());
  }
  deleteSecret(name: string): boolean {
    return this.rpc(() => this.c.secrets.delete(name));
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
      this.dropCapabilities();
      return { agentsDisconnected };
    });
  }
}
