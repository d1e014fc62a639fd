/**
 * The life of a job in the team's Durable Object: submitted (recorded and queued, or refused with a
 * reason the caller can act on), placed on an agent by the pure scheduler (src/dispatch/scheduler.ts),
 * ended exactly once (by its agent's report, a kill, or the agent's loss), its call's audit row kept with it.
 * The rows live in job-rows.ts (the rest of a job's record: job-records.ts); the sockets in the agent link.
 */
import type { JobExit, JobSpec } from '../contracts/agent-protocol.ts';
import { asErrorCode, describeIssues, type ErrorCode } from '../contracts/errors.ts';
import type { AgentView, JobState } from '../contracts/job-view.ts';
import type { CredentialValue } from '../contracts/secrets.ts';
import { MISSED_HEARTBEATS, type AgentLink } from './agent-link.ts';
import type { ArtifactUploads } from './artifact-uploads.ts';
import type { AuditLog } from './audit-log.ts';
import { DispatchRequest, type SubmitAnswer } from './events.ts';
import type { Followers } from './followers.ts';
import type { DispatchHost, Wakes } from './capability-host.ts';
import type { JobRecords } from './job-records.ts';
import { refusalOf } from './job-refusals.ts';
import type { JobRow, JobRows } from './job-rows.ts';
import type { LiveOutput } from './live-output.ts';
import { nextDeadline, schedule, whyNoAgentFits, type Ineligibility } from './scheduler.ts';
import { placeNow, placeWorkspace, toSchedJob } from './placement.ts';
import { JobMetrics, type DispatchHealth } from './job-metrics.ts';
import type { InteractiveSessions } from './interactive-sessions.ts';
import type { Workspaces } from './workspaces.ts';

export interface JobsParts {
  rows: Pick<JobRows, 'get' | 'queued' | 'running' | 'byCancelKey' | 'requeue' | 'assign' | 'setOrphaned' | 'clearOrphaned' | 'markUploadOrphaned'>;
  workspaces: Pick<Workspaces, 'place'>;
  records: Pick<JobRecords, 'create' | 'spec' | 'finish' | 'view' | 'result' | 'uploading' | 'failUploads'>;
  live: Pick<LiveOutput, 'read'>;
  link: Pick<AgentLink, 'agent' | 'socketOf' | 'budgetOf' | 'send' | 'views' | 'schedAgents' | 'silentMs' | 'restartGraceAt' | 'live'>;
  followers: Pick<Followers, 'emit' | 'ended' | 'settle' | 'isFollowed'>;
  uploads: Pick<ArtifactUploads, 'grant'>;
  /** The call's audit row: written with the job, completed when it starts and ends. */
  audit: Pick<AuditLog, 'record' | 'completeJob' | 'nextId'>;
  /** A job.start went out on its agent's socket (a trace step of the hot path). */
  onStartSent(): void;
  /** Set when the deployment is misconfigured (an unknown Workers plan): every job is refused with it, and audited. */
  configError: Failure | null;
  /** The opened values of the team secrets a job's grant binds (secrets.ts), at its start. */
  credentials?: (names: readonly string[]) => Promise<{ ok: true; value: CredentialValue[] } | { ok: false; error: Failure }>;
  /** Checks a new job passes before it is queued (storage bound, quotas): the first refusal refuses it, audited. */
  gates?: readonly (() => Failure | null)[];
  /** Interactive sessions (interactive-sessions.ts): outside the concurrency limit, with their own budget, checked last. */
  sessions?: Pick<InteractiveSessions, 'has' | 'open'>;
}

export type Failure = { code: ErrorCode; message: string };

const NO_SECRETS: Failure = { code: 'config_error', message: 'this team object keeps no secrets: the job names credentials it cannot be given' };

export class Jobs implements Wakes {
  private readonly host: Pick<DispatchHost, 'env' | 'now' | 'team' | 'heartbeatMs' | 'wake'>;
  private readonly parts: JobsParts;
  private readonly metrics: JobMetrics;

  constructor(host: Pick<DispatchHost, 'env' | 'now' | 'team' | 'heartbeatMs' | 'wake'>, parts: JobsParts) {
    this.host = host;
    this.parts = parts;
    this.metrics = new JobMetrics(host);
  }

  private get rows(): JobsParts['rows'] {
    return this.parts.rows;
  }

  /** Records a job and queues it (or refuses it at once with a reason the caller can act on). */
  /** `followed`: the caller follows the job from this call on (`submitAndFollow`), so a job started now needs no alarm. */
  async submit(raw: DispatchRequest, o: { followed?: boolean } = {}): Promise<SubmitAnswer> {
    const parsed = DispatchRequest.safeParse(raw);
    if (!parsed.success) return { ok: false, code: 'invalid_argument', message: describeIssues(parsed.error.issues) };
    const req = parsed.data;
    const team = await this.host.team();
    const now = this.host.now();
    // A job id it has already: the submit was sent again (its answer lost), and the job is as it stands — before the
    // gates, which count what they let through (a job sent twice is one job of the day).
    const existing = this.rows.get(req.spec.jobId);
    if (existing) return answerFor(existing);
    // A workspace job goes to the agent that holds its workspace (or, new, to one that can hold it): it is pinned there.
    if (req.spec.workspace) {
      const placed = placeWorkspace(req, now, this.parts.link, this.load(), this.parts.workspaces);
      if (!placed.ok) {
        // Refused before a job row exists: the call's audit row is written here, with the reason.
        this.parts.audit.record(
          {
            ...callAudit(req, team),
            decision: 'failed',
            reason: [req.audit.reason, `${placed.error.code}: ${placed.error.message}`].filter(Boolean).join('; '),
            exitStatus: 'refused',
          },
          now,
        );
        return { ok: false, code: placed.error.code, message: placed.error.message };
      }
      req.agent = placed.agentId;
    }
    const queuedBefore = this.rows.queued().length;
    // The job's row holds its audit row's id, so the row's completion is found by its key (no index on job ids).
    const auditId = this.parts.audit.nextId();
    const gated = this.parts.configError ?? this.gated() ?? this.parts.sessions?.open(req, now) ?? null;
    // A job that can start now is written running: one row written, not a queued one and then its start.
    const startOn = !gated && queuedBefore === 0 ? placeNow(req, now, this.parts.link, this.slotted(), this.load()) : null;
    const row = this.parts.records.create({
      spec: req.spec,
      tool: req.tool,
      subject: req.subject,
      tokenId: req.tokenId,
      cancelKey: req.cancelKey,
      runtime: req.runtime,
      sandboxMinimum: req.sandboxMinimum,
      selAgent: req.agent,
      selLabels: req.labels,
      background: req.background,
      maxConcurrent: req.maxConcurrentJobs,
      deadline: now + req.queueWaitMs,
      now,
      auditId,
      artifactHours: req.artifactHours,
      startOn: startOn ?? undefined,
    });
    if (row) {
      this.parts.audit.record({ ...callAudit(req, team), decision: 'allowed', exitStatus: 'queued' }, now, auditId);
    }
    // A job id it has already: the submit was sent again (its answer lost), and the job is as it stands.
    if (!row) return answerFor(this.rows.get(req.spec.jobId)!);
    if (startOn) {
      if (await this.sendStart(row.id, startOn.id, req.spec)) {
        if (!o.followed) await this.host.wake();
      } else await this.pump();
    } else if (gated) {
      this.close(req.spec.jobId, 'refused', { error: gated });
    } else if (queuedBefore >= req.maxQueueLength) {
      this.close(req.spec.jobId, 'refused', {
        error: {
          code: 'queue_full',
          message: `the team's queue is full (${queuedBefore} jobs waiting; limit queue.maxLength = ${req.maxQueueLength}); try again later or start another agent`,
        },
      });
    } else {
      const agents = this.parts.link.schedAgents(this.load());
      const why = agents.length ? whyNoAgentFits(this.sched(row), agents) : null;
      // With agents connected and none able to take the job ever, waiting would only delay the answer.
      if (why && why !== 'no_agent') this.close(req.spec.jobId, 'refused', { error: await this.refusal(req.spec.jobId, why) });
      else await this.pump();
    }
    this.observe(null);
    return answerFor(this.rows.get(req.spec.jobId)!);
  }

  /** Sends a job now running on `agentId` its start; false when the socket took nothing (the job is queued again). */
  private async sendStart(jobId: string, agentId: string, spec: JobSpec): Promise<boolean> {
    // The values of the secrets the grant binds go in this message only (never the stored spec); a job whose secret is gone is refused.
    const names = spec.network?.credentials?.map((c) => c.secret) ?? [];
    let credentials: CredentialValue[] | undefined;
    if (names.length) {
      const opened = this.parts.credentials ? await this.parts.credentials(names) : { ok: false as const, error: NO_SECRETS };
      if (!opened.ok) {
        this.close(jobId, 'refused', { error: opened.error });
        return true;
      }
      credentials = opened.value;
    }
    const r = this.parts.link.agent(agentId);
    const ws = this.parts.link.socketOf(agentId);
    if (!r || !ws) {
      this.rows.requeue(jobId);
      return false;
    }
    // Only this socket learns the job's upload grant: another agent of the same token cannot upload its artifacts.
    const upload = this.parts.uploads.grant(jobId, agentId);
    this.parts.link.budgetOf(ws).started(jobId);
    if (!this.parts.link.send(ws, { type: 'job.start', spec, upload, ...(credentials ? { credentials } : {}) })) {
      this.rows.requeue(jobId);
      return false;
    }
    this.parts.onStartSent();
    // The audit row is completed at the job's end; until then its readers see the job's state (audit-log.ts).
    this.parts.followers.emit(jobId, { type: 'started', jobId, agentId, sandbox: r.sandbox });
    return true;
  }

  private gated(): Failure | null {
    for (const g of this.parts.gates ?? []) {
      const f = g();
      if (f) return f;
    }
    return null;
  }

  /**
   * Stops a job: a queued one is cancelled at once; a running one gets `job.cancel` (the agent
   * kills the whole sandbox: TERM, then KILL after its grace) and ends `cancelled` by its report.
   */
  async kill(jobId: string, reason: string): Promise<{ found: boolean; state: JobState | null }> {
    const row = this.rows.get(jobId);
    if (!row) return { found: false, state: null };
    if (row.state === 'queued') {
      this.close(jobId, 'cancelled', { error: { code: 'cancelled', message: `cancelled before it started: ${reason}` } });
      await this.pump();
    } else if (row.state === 'running') {
      const ws = this.parts.link.socketOf(row.agent!);
      if (ws) this.parts.link.send(ws, { type: 'job.cancel', jobId, reason });
    }
    return { found: true, state: this.rows.get(jobId)!.state };
  }

  /** `notifications/cancelled` for an MCP call: finds its job by (token, request id). */
  async cancelByKey(cancelKey: string, reason: string): Promise<boolean> {
    const row = this.rows.byCancelKey(cancelKey);
    if (!row) return false;
    await this.kill(row.id, reason);
    return true;
  }

  agents(): AgentView[] {
    return this.parts.link.views(this.load());
  }

  health(): DispatchHealth {
    return this.metrics.health({ queued: this.rows.queued().length, running: this.rows.running().length });
  }

  /** Whether jobs run on this agent (its id stays bound to its token subject meanwhile). */
  busy(agentId: string): boolean {
    return this.rows.running().some((j) => j.agent === agentId);
  }

  /** A job row as the scheduler reads it; the running jobs that take a concurrency slot (sessions have their own budget). */
  private sched = (r: JobRow) => toSchedJob(r, this.parts.sessions?.has(r.id) ?? false);
  private slotted = (running: readonly JobRow[] = this.rows.running()) => running.filter((j) => !this.parts.sessions?.has(j.id));

  /** Running jobs per agent. */
  load(running: readonly JobRow[] = this.rows.running()): Map<string, number> {
    const load = new Map<string, number>();
    for (const j of running) load.set(j.agent!, (load.get(j.agent!) ?? 0) + 1);
    return load;
  }

  /** Applies the scheduler's decisions: start what can start, refuse what waited too long. */
  async pump(): Promise<void> {
    for (let round = 0; round < 4; round++) {
      const queue = this.rows.queued();
      if (queue.length === 0) return;
      const running = this.rows.running();
      const decision = schedule({
        now: this.host.now(),
        queue: queue.map((r) => this.sched(r)),
        agents: this.parts.link.schedAgents(this.load(running)),
        teamRunning: this.slotted(running).length,
        maxConcurrent: queue[0].max_concurrent,
      });
      let retry = false;
      for (const { jobId, reason } of decision.expire) {
        this.close(jobId, 'refused', { error: await this.refusal(jobId, reason) });
      }
      for (const { jobId, agentId } of decision.start) {
        const spec = this.parts.records.spec(jobId);
        const r = this.parts.link.agent(agentId);
        const ws = this.parts.link.socketOf(agentId);
        if (!spec || !r || !ws) continue;
        const now = this.host.now();
        if (!this.rows.assign(jobId, { id: agentId, subject: r.subject, sandbox: r.sandbox }, now)) continue;
        if (!(await this.sendStart(jobId, agentId, spec))) retry = true;
      }
      if (!retry) break;
    }
    await this.host.wake();
  }

  /** Moves a job to its terminal state (once), completes its call's audit row and tells whoever waits. */
  close(jobId: string, state: JobState, o: { exit?: JobExit; error?: Failure; fromAgent?: string }): boolean {
    if (!this.parts.records.finish(jobId, state, this.host.now(), o)) return false;
    this.parts.audit.completeJob(this.parts.records.view(this.rows.get(jobId)!));
    // job_status waiters learn the end now; a caller waiting for the whole result also gets the stored artifact.
    this.parts.followers.ended(jobId);
    this.observe(this.rows.get(jobId));
    return true;
  }

  /** The operators' metrics at every job taken in or ended (job-metrics.ts); counted from what the object holds in memory. */
  private observe(ended: Readonly<JobRow> | null): void {
    const agents = this.parts.link.schedAgents(this.load());
    this.metrics.observe(ended, ended?.ended_at ?? this.host.now(), {
      queued: this.rows.queued().length,
      running: this.rows.running().length,
      agents: agents.length,
      slots: agents.reduce((n, a) => n + a.capacity, 0),
    });
  }

  /** The agent's last socket went away: its running jobs are orphaned (lost unless it reconnects and reports them in time). */
  agentGone(agentId: string, now: number): void {
    this.rows.setOrphaned(
      this.rows
        .running()
        .filter((j) => j.agent === agentId)
        .map((j) => j.id),
      now,
    );
    void this.host.wake();
  }

  /** Jobs the agent reports are held; assigned ones it does not report (older than `settleMs`) are orphaned. */
  reconcileHeld(agentId: string, reported: string[], now: number, settleMs: number): void {
    const held = new Set(reported);
    const mine = this.rows.running().filter((j) => j.agent === agentId);
    this.rows.clearOrphaned(mine.filter((j) => held.has(j.id) && j.orphaned_at !== null).map((j) => j.id));
    this.rows.setOrphaned(
      mine.filter((j) => !held.has(j.id) && j.orphaned_at === null && now - (j.started_at ?? now) >= settleMs).map((j) => j.id),
      now,
    );
  }

  /** The alarm's part: jobs and uploads whose agent is gone, then the queue. */
  async onAlarm(now: number): Promise<void> {
    const silentFor = this.parts.link.silentMs;
    for (const j of this.rows.running()) {
      if (j.orphaned_at === null && !this.parts.link.socketOf(j.agent!)) {
        // No socket and no close event: this object restarted (a deploy drops every socket). Its agents
        // are reconnecting with backoff; count the grace from when the slowest of them is back.
        this.rows.setOrphaned([j.id], this.parts.link.restartGraceAt(now));
      } else if (j.orphaned_at !== null && now - j.orphaned_at > silentFor) {
        this.close(j.id, 'lost', {
          error: {
            code: 'lost',
            message: `executor agent ${j.agent} did not report the job for ${now - j.orphaned_at}ms (${MISSED_HEARTBEATS} heartbeats); it disconnected or no longer holds the job`,
          },
        });
      }
    }
    // An ended job's uploads: its agent keeps reporting them while connected; gone for 3 heartbeats
    // (after the reconnect allowance), they never will, and what the edge kept live is what remains.
    for (const j of this.parts.records.uploading()) {
      if (this.parts.link.socketOf(j.agent ?? '')) {
        if (j.orphaned_at !== null) this.rows.markUploadOrphaned(j.id, null);
      } else if (j.orphaned_at === null) {
        this.rows.markUploadOrphaned(j.id, this.parts.link.restartGraceAt(now));
      } else if (now - j.orphaned_at > silentFor) {
        console.warn(`job ${j.id}: agent ${j.agent} went away before its artifact upload ended`);
        this.parts.records.failUploads(j.id);
        this.parts.followers.settle(j.id);
      }
    }
    await this.pump();
  }

  /** Open jobs need the alarm every heartbeat (liveness); a queued job's deadline, sooner. */
  nextWake(now: number): number | null {
    const queued = this.rows.queued();
    // A running job a caller waits on is watched by a timer while the caller's call is open (followers.ts): no alarm.
    const unwatched = this.rows.running().filter((j) => !this.parts.followers.isFollowed(j.id));
    // Open jobs are in memory; ended ones with uploads are looked for only when none is open.
    if (queued.length + unwatched.length === 0 && this.parts.records.uploading().length === 0) return null;
    const dl = nextDeadline(queued.map((r) => toSchedJob(r)));
    return Math.min(now + this.host.heartbeatMs, dl === null ? Infinity : Math.max(now + 10, dl));
  }

  private async refusal(jobId: string, why: Ineligibility | 'busy'): Promise<Failure> {
    const agents = this.parts.link.schedAgents(this.load());
    return refusalOf(this.rows.get(jobId)!, why, {
      team: await this.host.team(),
      connected: this.parts.link.live().map((a) => a.att.agentId),
      active: this.rows.running().length,
      agents: agents.length,
      slots: agents.reduce((n, a) => n + a.capacity, 0),
    });
  }
}

function answerFor(row: JobRow): SubmitAnswer {
  if (row.state === 'queued' || row.state === 'running') return { ok: true, jobId: row.id, state: row.state, agentId: row.agent };
  if (row.state === 'refused' || (row.state === 'cancelled' && !row.agent)) {
    return { ok: false, code: asErrorCode(row.error_code ?? row.state, 'internal'), message: row.error_message ?? `job ${row.state}` };
  }
  return { ok: true, jobId: row.id, state: 'running', agentId: row.agent };
}

/** The audit fields every row of a submitted call carries: who called which tool, for which job. */
function callAudit(req: DispatchRequest, team: string) {
  return { ...req.audit, team, subject: req.subject, tokenId: req.tokenId, tool: req.tool, jobId: req.spec.jobId };
}
