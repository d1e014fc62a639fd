/**
 * The team DO's capabilities, wired to each other: the one place that says who may call whom.
 * The DO (team-dispatcher.ts) builds them over its host; a unit test builds the same set over
 * node:sqlite and fake sockets (test/dispatch/dispatcher.test.ts).
 */
import type { TraceStep } from '../contracts/trace.ts';
import type { PlanResult } from '../platform/plan.ts';
import { ARTIFACT_DEFAULT_HOURS } from '../contracts/policy.ts';
import { AgentLink } from './agent-link.ts';
import { AgentMessages } from './agent-messages.ts';
import { Approvals } from './approvals.ts';
import { ArtifactIndex } from './artifact-index.ts';
import { ArtifactUploads } from './artifact-uploads.ts';
import { AuditLog } from './audit-log.ts';
import { TeamAdmission } from './admission.ts';
import { LegacyImport } from './legacy-import.ts';
import { Retention } from './retention.ts';
import { admissionSeed } from '../store/admission.ts';
import { Egress } from './egress.ts';
import { Followers } from './followers.ts';
import type { DispatchHost, TimedWork, Wakes } from './capability-host.ts';
import { JobRecords } from './job-records.ts';
import { JobRows } from './job-rows.ts';
import { JobTexts } from './job-texts.ts';
import { Jobs } from './job-lifecycle.ts';
import { JobViews } from './job-views.ts';
import { LiveOutput } from './live-output.ts';
import { Tasks } from './tasks.ts';
import { RemoteServers } from './remote-servers.ts';
import { RemoteOAuth } from './remote-oauth.ts';
import { InteractiveSessions } from './interactive-sessions.ts';
import { TeamSecrets } from './secrets.ts';
import { ScriptLibrary } from './script-library.ts';
import { Workspaces } from './workspaces.ts';
import { TeamQuotas } from './quotas.ts';
import type { ImportCount, TeamRecordsImport } from './team-records-client.ts';

/** The steps of a call the DO marks for the hot-path trace (bench only). */
export type DispatchStep = Extract<TraceStep, 'do.job_start_sent' | 'do.exit_received' | 'do.settled'>;

export interface Capabilities {
  /** The team's jobs, one row each (the open ones in memory). */
  rows: JobRows;
  /** A job's record across its stores (row, texts, live output, stream states): its begin, end, view and result. */
  records: JobRecords;
  link: AgentLink;
  followers: Followers;
  uploads: ArtifactUploads;
  /** The team's artifact index and small bodies, with their retention. */
  artifacts: ArtifactIndex;
  /** The team's audit log: every call's row. */
  auditLog: AuditLog;
  /** Revocations, the policy version and suspension: what every request of the team is admitted by. */
  admission: TeamAdmission;
  /** The team's history an older deployment kept in D1, moved here. */
  legacy: LegacyImport;
  /** How long and how much history the object keeps: exported to R2, then dropped. */
  retention: Retention;
  jobs: Jobs;
  /** A job's view, result, kept output and the list: the reads of jobs. */
  views: JobViews;
  messages: AgentMessages;
  egress: Egress;
  /** The team's approvals (policy asks and egress asks), with their retention. */
  approvals: Approvals;
  /** The team's MCP tasks, with their TTL. */
  tasks: Tasks;
  /** The remote MCP servers an admin registered for the team's scripts (headers sealed). */
  remoteServers: RemoteServers;
  /** Those servers' OAuth connections and the authorizations admins started (all sealed). */
  remoteOAuth: RemoteOAuth;
  /** The team's secrets, sealed (the egress proxy's credentials). */
  secrets: TeamSecrets;
  /** The team's named, versioned scripts (run_script by name). */
  scripts: ScriptLibrary;
  /** The team's quotas (checked at submit) and usage figures. */
  quotas: TeamQuotas;
  /** Interactive jobs: their stdin writes, own budget, idle TTL and lifetime. */
  sessions: InteractiveSessions;
  /** The team's per-task workspaces: where each is, its size, when it was last used. */
  workspaces: Workspaces;
  /** Old rows from D1 (the migration tool, legacy-import.ts) taken in by their owners, each kind idempotently. */
  importRecords(r: TeamRecordsImport): { approvals: ImportCount; tasks: ImportCount; egress: ImportCount };
  /**
   * The capabilities in `alarm` that ask for it (`nextWake`): the host's one alarm fires at the soonest of their wake-ups. Not the
   * agent link: connected agents alone need no alarm (their liveness is read when the object is awake
   * anyway, and by the jobs' alarm while a job runs).
   */
  wakes: readonly Wakes[];
  /** What the alarm runs when it fires, one after another in this order (a capability may do work without asking for the alarm). */
  alarm: readonly TimedWork[];
}

export function capabilities(host: DispatchHost, o: { plan: PlanResult; trace: (step: DispatchStep) => void }): Capabilities {
  const { trace } = o;
  const rows = new JobRows(host);
  const texts = new JobTexts(host);
  const followers = new Followers(
    { get: (id) => rows.get(id), queued: () => rows.queued(), result: (id) => records.result(id), hasUploading: (id) => uploads.streams.hasUploading(id) },
    () => trace('do.settled'),
    {
      // While callers wait, the agents' liveness is checked from a timer (the object is awake for their calls).
      intervalMs: host.heartbeatMs,
      tick: async () => {
        const now = host.now();
        link.onAlarm(now);
        await jobs.onAlarm(now);
      },
      unwatched: () => void host.wake(),
    },
  );
  const link = new AgentLink(host, (agentId, now) => jobs.agentGone(agentId, now));
  const uploads = new ArtifactUploads(host, rows, (jobId) => {
    records.streamStored(jobId);
    followers.settle(jobId);
  });
  const live = new LiveOutput(host, (jobId) => records.liveNeeded(jobId));
  const records: JobRecords = new JobRecords(host, { rows, texts, live, streams: uploads.streams });
  const exits = {
    get: (id: string) => rows.get(id),
    list: (f: Parameters<JobRows['list']>[0]) => rows.list(f),
    result: (id: string) => records.result(id),
    spec: (id: string) => records.spec(id),
  };
  const teamArtifactHours = () => admission.retention().artifactHours ?? ARTIFACT_DEFAULT_HOURS;
  const artifacts = new ArtifactIndex(host, exits, teamArtifactHours);
  const auditLog = new AuditLog(host, {
    auditIdOf: (id) => rows.get(id)?.audit_id ?? null,
    openStateOf: (id) => {
      const r = rows.get(id);
      return r && (r.state === 'queued' || r.state === 'running') ? r.state : null;
    },
  });
  const admission = new TeamAdmission(host, admissionSeed);
  const importRecords = (r: TeamRecordsImport) => ({
    approvals: approvals.import(r.approvals ?? []),
    tasks: tasks.import(r.tasks ?? []),
    egress: egress.import({ connections: r.egressConnections ?? [], jobs: r.egressJobs ?? [] }),
  });
  const legacy = new LegacyImport(host, { audit: auditLog, records: importRecords });
  const quotas = new TeamQuotas(host, {
    jobs: (from, to) => rows.usageBetween(from, to),
    calls: (from, to) => auditLog.denials(from, 0).calls - auditLog.denials(to, 0).calls,
    egressBytes: (from, to) => egress.bytesBetween(from, to),
  });
  const workspaces = new Workspaces(host);
  const jobs: Jobs = new Jobs(host, {
    workspaces,
    rows,
    records,
    live,
    link,
    followers,
    uploads,
    audit: auditLog,
    // Refusals before a job is taken: the team's storage bound (retention), then its quotas (which count what they let through).
    gates: [() => retention.admitJob(), () => quotas.admitJob(host.now())],
    sessions: { has: (id) => sessions.has(id), open: (req, now) => sessions.open(req, now) },
    onStartSent: () => trace('do.job_start_sent'),
    credentials: (names) => secrets.open(names),
    configError: o.plan.ok ? null : { code: o.plan.code, message: o.plan.message },
  });
  const secrets = new TeamSecrets(host);
  const sessions = new InteractiveSessions(host, { rows, link, kill: (id, reason) => jobs.kill(id, reason), stdoutAt: (id) => live.relayed(id, 'stdout') });
  const approvals = new Approvals(host, { onDecided: (row, now) => egress.approvalDecided(row, now) });
  const tasks = new Tasks(host);
  const egress = new Egress(host, { store: exits, link, approvals });
  const retention = new Retention(host, {
    settings: () => admission.retention(),
    audit: auditLog,
    jobs: { prune: (before) => records.prune(before), oldestDayEnded: () => rows.oldestDayEnded() },
    onJobsPruned: (ids) => {
      uploads.forget(ids);
      egress.forget(ids);
      sessions.forget(ids);
    },
  });
  const messages = new AgentMessages(host, {
    link,
    jobs,
    rows,
    records,
    texts,
    live,
    followers,
    uploads,
    egress,
    sessions,
    onExitReceived: () => trace('do.exit_received'),
    onExitStored: (jobId) => artifacts.storeFromExit(jobId, teamArtifactHours()),
    onWorkspaceReport: (agentId, report, now) => workspaces.reported(agentId, report, now),
  });
  // The alarm's one list: each capability's timed work in this order; those that ask for the alarm (`nextWake`) set its time.
  const alarm: readonly (TimedWork | Wakes)[] = [
    // Past days' usage is rolled up before retention drops the rows it is counted from.
    quotas,
    // Silent agents are dropped before the jobs' part finds their jobs orphaned.
    link,
    jobs,
    // After the jobs' part: a session whose job ended there is forgotten, not stopped.
    sessions,
    egress,
    approvals,
    tasks,
    artifacts,
    retention,
    legacy,
    // After retention: the multipart uploads of pruned jobs are abandoned too.
    uploads,
    link.registry,
    workspaces,
  ];
  return {
    rows,
    records,
    link,
    followers,
    uploads,
    artifacts,
    auditLog,
    admission,
    legacy,
    retention,
    jobs,
    views: new JobViews({ rows, records, live, followers }),
    secrets,
    messages,
    egress,
    approvals,
    tasks,
    scripts: new ScriptLibrary(host),
    remoteServers: new RemoteServers(host),
    remoteOAuth: new RemoteOAuth(host),
    quotas,
    sessions,
    workspaces,
    importRecords,
    wakes: alarm.filter(asksForAlarm),
    alarm,
  };
}

function asksForAlarm(w: TimedWork | Wakes): w is Wakes {
  return 'nextWake' in w;
}
