/**
 * Agent protocol v3 (see PROTOCOL_VERSION): the messages exchanged over the WebSocket between an executor agent and
 * its team's TeamDispatcher, as JSON text frames — except live output, which goes as binary
 * frames (`output-frame.ts`). One schema per message; `parseAgentMessage`/`parseEdgeMessage`
 * are the only way in, so a malformed message is a logged rejection, never a crash.
 */
import { z } from 'zod';
import { SANDBOX_KINDS } from './sandbox-kinds.ts';
import { RuntimeName } from './runtimes.ts';
import { describeIssues } from './errors.ts';
import { SandboxReuse } from './sandbox-reuse.ts';
import { CREDENTIAL_BINDINGS_MAX, EgressAnswer, EgressAsk, EgressLog, NetworkGrant } from './network.ts';
import { CredentialValue } from './secrets.ts';
import { InteractiveSpec, JobInput, JobInputAck } from './interactive.ts';
import { JobWorkspace, WorkspaceId, WorkspaceReport } from './workspaces.ts';

/**
 * The version an agent says in `hello` and the edge answers in `welcome`. 5: `job.input` / `job.input.ack`
 * (interactive.ts): an interactive job's stdin stays open; older agents are never given one. 4: a stream whose `job.exit`
 * holds it whole (`exitHoldsStream`, inline-result.ts) is not uploaded; the edge keeps its artifact in the
 * exit (a v3 agent uploads it all the same, which still works). 3: the heartbeat is the fixed
 * AGENT_PING text, which the platform answers with AGENT_PONG without waking the team's object, and the
 * jobs an agent holds travel as `running` only when they change. 2: a `job.exit` may leave its inline
 * output to the live frames (`inlineFromLive`), which a v1 edge would drop unread, losing the output.
 */
export const PROTOCOL_VERSION = 5;
/**
 * The oldest agent protocol the edge still welcomes: v2, whose agents send `heartbeat` with their jobs every
 * interval (each one wakes the team's object); v3 agents upload every stream. Both keep working.
 */
export const OLDEST_AGENT_PROTOCOL = 2;
/**
 * The versions the edge welcomes (in the version the agent said). An agent speaks PROTOCOL_VERSION only.
 * The edge closes a hello of any other version with AGENT_PROTOCOL_CLOSE.
 */
export const EDGE_PROTOCOL_VERSIONS: readonly number[] = Array.from(
  { length: PROTOCOL_VERSION - OLDEST_AGENT_PROTOCOL + 1 },
  (_, i) => OLDEST_AGENT_PROTOCOL + i,
);
/** An agent silent for this many heartbeat intervals is gone to the edge; an edge that has not answered its pings as long is gone to the agent. */
export const MISSED_HEARTBEATS = 3;
/**
 * The heartbeat and its answer, byte for byte: the team's object has the platform answer AGENT_PING
 * with AGENT_PONG (the WebSocket auto-response, which matches one exact text and never wakes the object),
 * and reads when it last did for each socket. Both are also the JSON of `ping`/`pong` below, so an
 * edge that does see a ping still reads it.
 */
export const AGENT_PING = '{"type":"ping"}';
export const AGENT_PONG = '{"type":"pong"}';
/** Upper bound of an agent's reconnect backoff: after a gateway restart every agent is back within it. */
export const AGENT_RECONNECT_MAX_BACKOFF_MS = 10_000;
export const AGENT_CONNECT_PATH = '/agent/v1/connect';
/** `PUT {gateway}/agent/v1/artifacts/{handle}/{stream}` with Content-Length and X-Gatehouse-* headers. */
export const ARTIFACT_UPLOAD_PATH = '/agent/v1/artifacts';
/** Upload request headers: the agent the job runs on, and the job's upload token from its `job.start` (`UploadGrant`). */
export const UPLOAD_AGENT_HEADER = 'X-Gatehouse-Agent';
export const UPLOAD_TOKEN_HEADER = 'X-Gatehouse-Upload-Token';
/**
 * WebSocket close code of a connection that sent more than its message budget
 * (src/dispatch/agent-budget.ts): 1008 "policy violation" in the range RFC 6455 leaves to
 * applications. The agent reconnects; a well-behaved one never gets it.
 */
export const AGENT_BUDGET_CLOSE = 4008;
/** WebSocket close code of a hello in a protocol version the edge does not speak (4426: HTTP's 426 Upgrade Required). */
export const AGENT_PROTOCOL_CLOSE = 4426;
/**
 * Most `job.exit.part` messages one stream of a result takes. The largest inline output a policy
 * allows (10 MiB, `limits.inlineOutputBytes` in policy.ts) is at most that many characters: 10
 * pieces of EXIT_PART_CHARS (limits.ts), 11 when a cut steps back out of a surrogate pair. 16 leaves room.
 */
export const EXIT_PARTS_MAX = 16;
/** Notices an agent may attach to one exit (each is one short line; more refusals than this are counted in job_status). */
export const JOB_NOTICES_MAX = 10;

export const SandboxKind = z.enum(SANDBOX_KINDS);
export type SandboxKind = z.infer<typeof SandboxKind>;
export const StreamName = z.enum(['stdout', 'stderr']);
export type StreamName = z.infer<typeof StreamName>;

/** Terminal states are distinct and truthful; there is no "exit 0" for a job that did not run. */
export const TerminalState = z.enum(['exited', 'signaled', 'timed_out', 'cancelled', 'lost', 'failed_to_start']);
export type TerminalState = z.infer<typeof TerminalState>;

export const JobLimits = z.object({
  /** Combined inline stdout+stderr returned in the result (the shell-exec contract's default: 40000). */
  inlineBytes: z.number().int().min(0),
  /** Per-stream cap of what is kept in the artifact. */
  artifactBytes: z.number().int().min(0),
  maxProcesses: z.number().int().positive().optional(),
  maxOpenFiles: z.number().int().positive().optional(),
  maxFileBytes: z.number().int().positive().optional(),
  memoryBytes: z.number().int().positive().optional(),
  /** RLIMIT_CPU seconds per process. Absent limits get the agent's defaults (src/contracts/resource-limits.ts). */
  cpuSeconds: z.number().int().positive().optional(),
  /** Size of the job's private /tmp. */
  tmpBytes: z.number().int().positive().optional(),
  /** Bytes the job may write to disk (workspace and job dir) before the agent stops it. */
  diskWriteBytes: z.number().int().positive().optional(),
});
export type JobLimits = z.infer<typeof JobLimits>;

export const JobSpec = z.object({
  jobId: z.string().min(1),
  artifactHandle: z.string().min(1),
  /** argv: exec `command` with `args`; shell: `sh -c command`; code: runtime code mode. */
  mode: z.enum(['argv', 'shell', 'code']),
  command: z.string(),
  args: z.array(z.string()),
  runtime: RuntimeName.optional(),
  code: z.string().optional(),
  stdin: z.string().optional(),
  /** Relative to the agent's workspace root; '' is the root. Re-checked by the agent (realpath). */
  cwd: z.string(),
  /** Already scrubbed by the edge; the agent adds PATH/HOME/TMPDIR for the sandbox, nothing of its own. */
  env: z.record(z.string(), z.string()),
  timeoutMs: z.number().int().positive(),
  limits: JobLimits,
  /**
   * Executables (names or absolute paths) the policy allows; the agent resolves the job's
   * executable inside the sandbox PATH and refuses it unless the resolved path matches.
   * Absent in shell mode, where the edge decided on the whole string.
   */
  allowedExecutables: z.array(z.string()).optional(),
  /** The team's `sandbox.reuse`: a gVisor agent may run this job in a sandbox a previous job of the team used. */
  reuse: SandboxReuse.optional(),
  /**
   * argv-mode git under a policy with `git.repositoryPrograms = "disable"`: the agent runs it with
   * the repository's filters, drivers, aliases, hooks and helpers switched off
   * (src/contracts/git-hardening.ts).
   */
  hardenGit: z.literal(true).optional(),
  /** The job's network: absent or `off` = none; otherwise only through the agent's egress proxy (src/contracts/network.ts). */
  network: NetworkGrant.optional(),
  /** Set: stdin stays open for `job.input` (interactive.ts), and `tty` runs the job on a pseudo-terminal. */
  interactive: InteractiveSpec.optional(),
  /** The job's own workspace (src/contracts/workspaces.ts); absent: the agent's shared workspace root. */
  workspace: JobWorkspace.optional(),
});
export type JobSpec = z.infer<typeof JobSpec>;

export const RuntimeInfo = z.object({
  name: RuntimeName,
  executable: z.string().max(256),
  path: z.string().max(4096),
  version: z.string().max(4096),
});

/**
 * An agent's id as it says it in `hello`: the characters `gatehouse agent --id` takes (a hostname
 * with the process id by default), so it can never carry a control or bidi character into a log,
 * the audit trail or the dashboard.
 */
const AgentId = z.string().regex(/^[\w.@:-]{1,128}$/, 'agentId must be 1-128 characters of letters, digits, . _ - @ : (as `gatehouse agent --id` takes)');

/** A label an agent advertises (`--label gpu`) and a job may require. */
export const AgentLabel = z.string().regex(/^[A-Za-z0-9._:=-]{1,64}$/, 'labels are 1-64 characters of letters, digits, . _ : = -');
export type RuntimeInfo = z.infer<typeof RuntimeInfo>;

const StreamSummary = z.object({
  bytes: z.number().int().min(0),
  lines: z.number().int().min(0),
  /** The artifact hit its cap: it holds the first `artifactBytes` bytes only. */
  artifactTruncated: z.boolean(),
});

/**
 * Longest error message kept from an agent (characters): ours are at most ~8,000 (a compile
 * error's first stderr bytes). A longer one is cut, not refused — the job's result must not be
 * lost — so the DO's row and the D1 audit row stay far below their 2 MB limits whatever an agent sends.
 */
export const ERROR_MESSAGE_MAX_CHARS = 16_384;
/** Longest error code kept from an agent (ours are short names like `compile_error`). */
export const ERROR_CODE_MAX_CHARS = 64;
// A cut text stays as it is when parsed again (the DO re-reads what it stored): up to max + the marker's room.
const cut = (max: number) => (s: string) => (s.length <= max + 64 ? s : `${s.slice(0, max)}… (cut: ${s.length} characters)`);
const ErrorMessageText = z.string().transform(cut(ERROR_MESSAGE_MAX_CHARS));
/** An error code or a signal's name (`compile_error`, `SIGKILL`). */
const NameText = z.string().transform(cut(ERROR_CODE_MAX_CHARS));

export const JobExit = z.object({
  type: z.literal('job.exit'),
  jobId: z.string(),
  state: TerminalState,
  exitCode: z.number().int().nullable(),
  signal: NameText.nullable(),
  timedOut: z.boolean(),
  durationMs: z.number().min(0),
  stdout: z.string(),
  stderr: z.string(),
  stdoutTruncated: z.boolean(),
  stderrTruncated: z.boolean(),
  streams: z.object({ stdout: StreamSummary, stderr: StreamSummary }),
  /** Whether the full streams reached the edge (HTTP PUT) before this message was sent. */
  artifactsUploaded: z.boolean(),
  /**
   * Streams whose artifact upload starts after this message: the exit is reported when the process
   * ends, and one `job.artifact` per listed stream follows with how its upload ended. Absent or
   * empty: no upload follows (`artifactsUploaded` says how the earlier ones went).
   */
  pendingArtifacts: z.array(StreamName).max(2).optional(),
  /**
   * Inline output too large for one message came first as `job.exit.part` messages: how many
   * parts per stream (`stdout`/`stderr` here are then empty).
   */
  parts: z.object({ stdout: z.number().int().min(0).max(EXIT_PARTS_MAX), stderr: z.number().int().min(0).max(EXIT_PARTS_MAX) }).optional(),
  /**
   * `stdout`/`stderr` are left empty: the edge rebuilds them (and their `*Truncated` flags) with
   * `inlineResult` (inline-result.ts) from the live output frames relayed on this same connection,
   * which hold every byte they need, and from `streams`. The output then crosses the socket once, as
   * binary, instead of a second time as JSON (where a NUL byte takes 6). Set on an exit's first send
   * only, and only when no reconnect came between the job's first frame and it: frames and the exit
   * on one WebSocket arrive in order, so the edge has them all. Re-sends carry the text.
   */
  inlineFromLive: z.literal(true).optional(),
  /** Set for failed_to_start and other errors worth showing: e.g. spawn failed, compile error. */
  error: z.object({ code: NameText, message: ErrorMessageText }).optional(),
  /** Code mode: which step produced this result. A failing build is a compile error, not a run error. */
  phase: z.enum(['build', 'run']).optional(),
  /**
   * What the agent noted about the job, said in the call's result (`notices`): its timeout lowered
   * to the agent's ceiling, connections its egress proxy refused with the policy key that allows them.
   */
  notices: z.array(ErrorMessageText).max(JOB_NOTICES_MAX).optional(),
  /** A workspace job: its workspace's size after the job (the edge keeps it for `workspace_list`). */
  workspace: WorkspaceReport.optional(),
});
export type JobExit = z.infer<typeof JobExit>;

// ---- agent → edge ----
/** The jobs an agent runs: at most its capacity (≤ 256), ids as the edge makes them. */
const RunningJobs = z.array(z.string().max(128)).max(256);
export const AgentHello = z.object({
  type: z.literal('hello'),
  /** Any version parses, so the edge can answer one it does not speak with AGENT_PROTOCOL_CLOSE instead of silence. */
  v: z.number().int(),
  agentId: AgentId,
  version: z.string().max(256),
  capacity: z.number().int().min(1).max(256),
  sandbox: SandboxKind,
  runtimes: z.array(RuntimeInfo).max(64),
  /** Free-form placement labels (`--label gpu`); a job may require some. */
  labels: z.array(AgentLabel).max(32).default([]),
  /**
   * What this agent can do beyond protocol PROTOCOL_VERSION: `workspaces` (WORKSPACES_CAPABILITY). An agent that
   * does not announce one never gets a job that needs it. Unknown names are kept, so a newer agent is still welcome.
   */
  capabilities: z
    .array(z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/))
    .max(16)
    .optional(),
  /** Jobs still running from before a reconnect; their results will follow. */
  running: RunningJobs,
});
/** Protocol 2's heartbeat, every interval: still read from an agent of that version. */
const AgentHeartbeat = z.object({
  type: z.literal('heartbeat'),
  running: RunningJobs,
});
/** The heartbeat (AGENT_PING): answered by the platform; the edge's code sees one only if no auto-response is set. */
const AgentPing = z.object({ type: z.literal('ping') });
/** The jobs the agent holds (running, or ended and not yet acknowledged), sent at a heartbeat when they changed since it last said. */
const AgentRunning = z.object({ type: z.literal('running'), jobs: RunningJobs });
/** One piece of a result's inline output, sent before a `job.exit` that says `parts`. */
const JobExitPart = z.object({
  type: z.literal('job.exit.part'),
  jobId: z.string(),
  stream: StreamName,
  seq: z
    .number()
    .int()
    .min(0)
    .max(EXIT_PARTS_MAX - 1),
  data: z.string(),
});
/**
 * How one stream's artifact upload ended, sent after the job's `job.exit` (which listed the stream
 * in `pendingArtifacts`). `complete`: the whole spool is stored; `failed`: the upload gave up
 * after its retries (the edge keeps what it received live). Accepted once, from the job's agent.
 */
export const JobArtifact = z.object({
  type: z.literal('job.artifact'),
  jobId: z.string(),
  stream: StreamName,
  state: z.enum(['complete', 'failed']),
  /** Bytes the agent uploaded (complete) or tried to (failed). */
  bytes: z.number().int().min(0),
  error: z.string().max(1000).optional(),
});
/** The agent refused or could not take a job (capacity, local floor, unknown runtime). */
export const JobError = z.object({
  type: z.literal('job.error'),
  jobId: z.string(),
  code: NameText,
  message: ErrorMessageText,
});
/** The answer to `workspace.delete`: gone, or why not (a job of it still runs). */
const WorkspaceDeleted = z.object({
  type: z.literal('workspace.deleted'),
  id: WorkspaceId,
  ok: z.boolean(),
  message: z.string().max(1000).optional(),
});
export const AgentMessage = z.discriminatedUnion('type', [
  AgentHello,
  AgentHeartbeat,
  AgentPing,
  AgentRunning,
  JobExitPart,
  JobExit,
  JobArtifact,
  JobError,
  JobInputAck,
  EgressAsk,
  EgressLog,
  WorkspaceDeleted,
]);
export type AgentMessage = z.infer<typeof AgentMessage>;
export type AgentHello = z.infer<typeof AgentHello>;
export type JobError = z.infer<typeof JobError>;
export type JobArtifact = z.infer<typeof JobArtifact>;

// ---- edge → agent ----
const EdgeWelcome = z.object({
  type: z.literal('welcome'),
  /** Any version parses, so the agent can close a welcome in a version it does not speak with AGENT_PROTOCOL_CLOSE instead of ignoring it. */
  v: z.number().int(),
  team: z.string(),
  heartbeatMs: z.number().int().positive(),
});
/**
 * What lets the agent a job was sent to — and no other agent of the same token — upload the job's
 * artifacts: a random token the edge makes for this job and this agent, sent only in `job.start`
 * on that agent's socket, and carried by each upload request (UPLOAD_AGENT_HEADER, UPLOAD_TOKEN_HEADER).
 */
export const UploadGrant = z.object({ agentId: z.string().min(1).max(128), token: z.string().min(32).max(128) });
export type UploadGrant = z.infer<typeof UploadGrant>;
/**
 * `credentials`: the values of the secrets `spec.network.credentials` names, sent only here (never in the
 * spec, which is stored): the agent's egress proxy holds them in memory for this job only.
 */
const JobStart = z.object({
  type: z.literal('job.start'),
  spec: JobSpec,
  upload: UploadGrant.optional(),
  credentials: z.array(CredentialValue).max(CREDENTIAL_BINDINGS_MAX).optional(),
});
const JobCancel = z.object({ type: z.literal('job.cancel'), jobId: z.string(), reason: z.string() });
/**
 * The edge stored this job's result (or, with `stream`, that stream's `job.artifact` report); the
 * agent may forget it (until then it re-sends after every reconnect).
 */
/** Delete a workspace this agent holds (`workspace_delete`); the agent answers with `workspace.deleted`. */
const WorkspaceDelete = z.object({ type: z.literal('workspace.delete'), id: WorkspaceId });
const JobAck = z.object({ type: z.literal('job.ack'), jobId: z.string(), stream: StreamName.optional() });
/** The answer to a ping (AGENT_PONG), from the platform. */
const EdgePong = z.object({ type: z.literal('pong') });
export const EdgeMessage = z.discriminatedUnion('type', [EdgeWelcome, JobStart, JobCancel, JobAck, JobInput, EgressAnswer, EdgePong, WorkspaceDelete]);
export type EdgeMessage = z.infer<typeof EdgeMessage>;

export type Parsed<T> = { ok: true; message: T } | { ok: false; reason: string };

function parseWith<T>(schema: z.ZodType<T>, raw: string | ArrayBuffer): Parsed<T> {
  // Binary frames carry live output only, read by output-frame.ts.
  if (typeof raw !== 'string') return { ok: false, reason: 'a binary frame is live output (output-frame.ts), not a JSON message' };
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return { ok: false, reason: 'message is not valid JSON' };
  }
  const r = schema.safeParse(json);
  if (!r.success) return { ok: false, reason: `malformed message: ${describeIssues(r.error.issues)}` };
  return { ok: true, message: r.data };
}

export const parseAgentMessage = (raw: string | ArrayBuffer) => parseWith(AgentMessage, raw);
export const parseEdgeMessage = (raw: string | ArrayBuffer) => parseWith(EdgeMessage, raw);
