/**
 * The Worker's side of the TeamDispatcher, over Workers RPC: submit a job, follow its events
 * (a byte stream of NDJSON lines), read its status and output, kill it, list jobs and agents.
 * One DO per team, addressed by the team's name (which the DO reads as its own `ctx.id.name`).
 *
 * Following a job survives a restart of the DO: when the event stream breaks before the job's
 * end, the caller long-polls the job's status from the durable job table and reads its result.
 */
import type { WorkspaceAnswer, WorkspaceOp } from './workspace-rpc.ts';
import type { Env } from '../env.ts';
import type { JobExit, SandboxKind, StreamName } from '../contracts/agent-protocol.ts';
import { AGENT_GRANT_HEADER, type AgentGrant } from '../contracts/agent-grant.ts';
import type { AgentView, JobListFilter, JobState, JobView } from '../contracts/job-view.ts';
import { isSettled, isTerminal } from '../contracts/job-view.ts';
import { asErrorCode, err, ok, type Result } from '../contracts/errors.ts';
import {
  DispatchEvent,
  type DispatchRequest,
  type KeptOutput,
  type MultipartAbandonAnswer,
  type MultipartBeginAnswer,
  type MultipartFinishAnswer,
  type MultipartPartAnswer,
  type MultipartRef,
  type MultipartShape,
  type SubmitAnswer,
  type TeamOverview,
  type TeamOverviewQuery,
  type UploadAnswer,
  type UploadWho,
} from './events.ts';
import { stamp } from '../contracts/trace.ts';
import { SANDBOX_KINDS } from '../contracts/sandbox-kinds.ts';
import { lostExit } from './outcomes.ts';
import type { DispatchHealth } from './job-metrics.ts';

/** The team's Durable Object (one per team, addressed by the team's name). */
export function teamStub(env: Env, team: string) {
  return env.TEAM_DISPATCHER.get(env.TEAM_DISPATCHER.idFromName(team));
}

const stub = teamStub;

/**
 * Forwards an (already authenticated) agent WebSocket upgrade to the team's DO (a 101 needs fetch),
 * with the token's agent grant: the DO checks the agent's `hello`, which comes after the upgrade.
 */
export function connectAgent(env: Env, team: string, who: { subject: string; tokenId: string; agentGrant?: AgentGrant }): Promise<Response> {
  const headers = new Headers({ Upgrade: 'websocket', 'X-Gatehouse-Subject': who.subject, 'X-Gatehouse-Token-Id': who.tokenId });
  if (who.agentGrant) headers.set(AGENT_GRANT_HEADER, JSON.stringify(who.agentGrant));
  return stub(env, team).fetch(new Request('https://team-dispatcher/connect', { headers }));
}

/** Submits a job and, for a foreground job the DO took, opens its event stream in the same hop (pass it to `awaitJob`). */
export async function submitAndFollow(
  env: Env,
  team: string,
  req: DispatchRequest,
): Promise<{ answer: SubmitAnswer; events: ReadableStream<Uint8Array> | null }> {
  return await stub(env, team).submitAndFollow(req);
}

export interface DispatchOutcome {
  exit: JobExit;
  agentId: string;
  sandbox: SandboxKind;
}

/** How long one long-poll waits when the event stream broke (DO restart, deploy). */
const REPOLL_MS = 30_000;
/** How often a caller whose event stream broke checks an ended job's uploads. */
const UPLOAD_POLL_MS = 1000;
/** Attempts to reach the DO again after it went away mid-job (each waits up to REPOLL_MS). */
const MAX_REPOLLS = 200;

/**
 * Waits for a submitted job's end. `onEvent` sees queued/started/output events as they arrive
 * (the MCP tools turn them into progress notifications). A refusal (no agent, busy, queue full)
 * comes back as an error value with the DO's code and message.
 */
export async function awaitJob(
  env: Env,
  team: string,
  jobId: string,
  onEvent: (e: DispatchEvent) => void | Promise<void>,
  opened?: ReadableStream<Uint8Array> | null,
): Promise<Result<DispatchOutcome>> {
  try {
    const stream = opened ?? (await stub(env, team).follow(jobId));
    // Decoded here rather than through a TextDecoderStream: one stream and its pipe fewer per call.
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let buffered = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (value) buffered += decoder.decode(value, { stream: true });
      if (done) buffered += decoder.decode();
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (!line) continue;
        const raw: unknown = JSON.parse(line);
        const exit = exitEvent(raw);
        const parsed = exit ? null : DispatchEvent.safeParse(raw);
        if (parsed && !parsed.success) continue;
        const e = exit ?? parsed!.data!;
        if (e.type === 'exit') stamp(env, 'edge.exit_event');
        if (e.type === 'exit') return ok({ exit: e.exit, agentId: e.agentId, sandbox: e.sandbox });
        if (e.type === 'error') return err(e.code, e.message);
        await onEvent(e);
      }
      if (done) break;
    }
  } catch (e) {
    console.warn(`job ${jobId}: event stream broke (${(e as Error).message}); polling its status`);
  }
  return pollToEnd(env, team, jobId);
}

/**
 * The exit event, its envelope checked here; its `exit` is the team object's record of a `job.exit` the
 * object validated (JobExit, agent-protocol.ts) when the agent sent it, so it is not parsed a second time.
 * null for any other event (parsed whole) or an envelope that does not fit (parsed whole, and dropped).
 */
function exitEvent(v: unknown): Extract<DispatchEvent, { type: 'exit' }> | null {
  const e = v as { type?: unknown; exit?: { type?: unknown; jobId?: unknown }; agentId?: unknown; sandbox?: unknown } | null;
  if (e?.type !== 'exit' || typeof e.agentId !== 'string' || !SANDBOX_KINDS.includes(e.sandbox as SandboxKind)) return null;
  if (e.exit?.type !== 'job.exit' || typeof e.exit.jobId !== 'string') return null;
  return e as Extract<DispatchEvent, { type: 'exit' }>;
}

/** The event stream ended early (the DO restarted): the durable job table still has the answer. */
async function pollToEnd(env: Env, team: string, jobId: string): Promise<Result<DispatchOutcome>> {
  let lastError = '';
  for (let i = 0; i < MAX_REPOLLS; i++) {
    try {
      const v = await jobStatus(env, team, jobId, REPOLL_MS);
      if (!v) return err('not_found', `job "${jobId}" not found`);
      if (isSettled(v)) return outcomeOf(env, team, jobId);
      if (isTerminal(v.state)) {
        // Ended, its uploads still running (they end: reported, or failed once the agent is gone); the status
        // long-poll returns at once for an ended job, so wait here. Not an attempt to reach the dispatcher.
        await new Promise((r) => setTimeout(r, UPLOAD_POLL_MS));
        i -= 1;
      }
    } catch (e) {
      lastError = (e as Error).message;
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** i)));
    }
  }
  return err('upstream_error', `lost contact with the team dispatcher while waiting for job ${jobId}: ${lastError}; ask job_status later`);
}

/** A finished job's outcome, read from the durable job table (what `awaitJob` would have returned). */
export function jobOutcome(env: Env, team: string, jobId: string): Promise<Result<DispatchOutcome>> {
  return outcomeOf(env, team, jobId);
}

async function outcomeOf(env: Env, team: string, jobId: string): Promise<Result<DispatchOutcome>> {
  const r = await jobResult(env, team, jobId);
  if (!r) return err('not_found', `job "${jobId}" not found`);
  const { view, exit } = r;
  if (exit) return ok({ exit, agentId: view.agent_id ?? '', sandbox: view.sandbox ?? 'none' });
  if (view.state === 'lost') {
    return ok({ exit: lostExit(jobId, view.duration_ms ?? 0, view.error?.message ?? 'lost'), agentId: view.agent_id ?? '', sandbox: view.sandbox ?? 'none' });
  }
  return err(asErrorCode(view.error?.code ?? view.state, 'internal'), view.error?.message ?? `job ${view.state}`);
}

export async function jobStatus(env: Env, team: string, jobId: string, waitMs = 0): Promise<JobView | null> {
  return await stub(env, team).status(jobId, waitMs);
}

export async function jobResult(env: Env, team: string, jobId: string): Promise<{ view: JobView; exit: JobExit | null } | null> {
  return await stub(env, team).result(jobId);
}

export async function liveOutput(env: Env, team: string, jobId: string, stream: StreamName, offset: number, maxBytes: number): Promise<KeptOutput | null> {
  return await stub(env, team).liveOutput(jobId, stream, offset, maxBytes);
}

export async function listJobs(env: Env, team: string, filter: JobListFilter): Promise<{ jobs: JobView[]; next_cursor: string | null }> {
  return await stub(env, team).list(filter);
}

/** The team's workspaces (list), or deletes one (docs/workspaces.md). */
export async function teamWorkspaces(env: Env, team: string, op: WorkspaceOp): Promise<WorkspaceAnswer> {
  return await stub(env, team).workspaces(op);
}

export async function killJob(env: Env, team: string, jobId: string, reason: string): Promise<{ found: boolean; state: JobState | null }> {
  return await stub(env, team).kill(jobId, reason);
}

export async function cancelByCall(env: Env, team: string, cancelKey: string, reason: string): Promise<boolean> {
  return await stub(env, team).cancelByKey(cancelKey, reason);
}

/**
 * The readiness probe's Durable Object: not a team (a team name has no space), and `ping` touches
 * no storage, so probing never wakes a team's object or writes a row.
 */
const PROBE_OBJECT = 'readiness probe';

/** One round trip to a Durable Object of the namespace (`/readyz`). */
export async function pingDispatcher(env: Env): Promise<void> {
  await stub(env, PROBE_OBJECT).ping();
}

/** The team object's own counters: queue depth, running jobs, the last job's timing. */
export async function teamOverview(env: Env, team: string, q: TeamOverviewQuery): Promise<TeamOverview> {
  return await stub(env, team).overview(q);
}

export async function dispatchHealth(env: Env, team: string): Promise<DispatchHealth> {
  return await stub(env, team).health();
}

/** The team's connected agents. */
export async function listAgents(env: Env, team: string): Promise<AgentView[]> {
  return (await listAllAgents(env, team)).filter((a) => a.state === 'connected');
}

/** Every agent the team's DO knows, connected or not (recently seen). */
export async function listAllAgents(env: Env, team: string): Promise<AgentView[]> {
  return await stub(env, team).agents();
}

export async function beginUpload(env: Env, team: string, u: UploadWho): Promise<UploadAnswer> {
  return await stub(env, team).beginUpload(u);
}

export async function multipartBegin(env: Env, team: string, who: UploadWho, shape: MultipartShape): Promise<MultipartBeginAnswer> {
  return await stub(env, team).multipartBegin(who, shape);
}

export async function multipartCreated(env: Env, team: string, who: UploadWho, ref: MultipartRef, shape: MultipartShape): Promise<void> {
  await stub(env, team).multipartCreated(who, ref, shape);
}

export async function multipartPart(env: Env, team: string, who: UploadWho, part: number, bytes: number): Promise<MultipartPartAnswer> {
  return await stub(env, team).multipartPart(who, part, bytes);
}

export async function multipartPartStored(env: Env, team: string, who: UploadWho, ref: MultipartRef, part: number, etag: string, bytes: number): Promise<void> {
  await stub(env, team).multipartPartStored(who, ref, part, etag, bytes);
}

export async function multipartFinish(env: Env, team: string, who: UploadWho): Promise<MultipartFinishAnswer> {
  return await stub(env, team).multipartFinish(who);
}

export async function multipartAbandon(env: Env, team: string, who: UploadWho): Promise<MultipartAbandonAnswer> {
  return await stub(env, team).multipartAbandon(who);
}
