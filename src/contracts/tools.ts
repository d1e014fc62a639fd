/**
 * MCP tool contracts: input and output shapes of every tool, defined once (zod) and used by
 * the MCP server for validation and for the JSON Schema it advertises.
 * Names use [a-z_] only: several MCP clients reject dots in tool names.
 */
import { z } from 'zod';
import { ApprovalId, ApprovalInfo } from './approvals.ts';
import { RuntimeName } from './runtimes.ts';
import { AgentLabel } from './agent-protocol.ts';
import { ErrorCodeSchema } from './errors.ts';
import { InteractivePolicy, InteractiveToolInput } from './interactive.ts';
import { ScriptName, ScriptRef, ScriptVars, VARS_RULE } from './scripts.ts';
import { WORKSPACE_ID_RULE, WorkspaceId, WorkspaceSource, WorkspaceView } from './workspaces.ts';

export const LINE_CAP = 500;
export const TRUNCATED_SUFFIX = ' [truncated]';

const EnvMap = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'env names are [A-Za-z_][A-Za-z0-9_]*'), z.string());
const RelCwd = z.string().max(4096).describe('Working directory relative to the agent workspace root; no absolute paths or ".."');

/** Where and how a job runs: in the background, on a given agent, on agents with given labels. */
const Placement = {
  background: z.boolean().optional().describe('Answer at once with job_id and state; follow the job with job_status / job_output'),
  agent: z.string().min(1).max(128).optional().describe('Run only on this executor agent (its id)'),
  labels: z.array(AgentLabel).max(16).optional().describe('Run only on agents that carry all these labels'),
  workspace: WorkspaceId.optional().describe(
    `Run in this workspace: its own directory on the agent that holds it, made on first use (id: ${WORKSPACE_ID_RULE}); omitted: the shared workspace`,
  ),
  workspace_source: WorkspaceSource.optional().describe(
    'Where a new workspace\'s files come from: {"git": "https://…", "ref"?: "…"} (cloned in the job through the team\'s network policy) or {"copyFrom": "<workspace id>"}; ignored once it exists',
  ),
};

/**
 * Every note the policy or the agent made about the call, one line each: a timeout clamped, the
 * network off, a connection refused with the policy key that would allow it (docs/builds.md).
 * Also said in the text content.
 */
const Notices = z
  .array(z.string())
  .optional()
  .describe('What the policy and the agent noted about this call (timeout clamped, network off, connections refused and the policy key that allows them)');

// ---- execute (the shell-exec contract, docs/architecture.md) ----
export const ExecuteInput = {
  command: z
    .string()
    .max(64 * 1024)
    .describe('Command string (run with sh -c) or executable name when args is given'),
  args: z
    .array(z.string().max(64 * 1024))
    .max(1000)
    .optional()
    .describe('Arguments; when present the command is executed directly, without a shell'),
  stdin: z
    .string()
    .max(512 * 1024)
    .optional()
    .describe('Content written to stdin'),
  timeout_ms: z.number().int().positive().optional().describe('Timeout in milliseconds; the whole process tree is killed on timeout'),
  cwd: RelCwd.optional(),
  env: EnvMap.optional().describe('Environment variables; only names the team policy allows are passed'),
  approval_id: ApprovalId.optional().describe('An approval a team admin granted for exactly this call (after an approval_required error); used once'),
  ...Placement,
  ...InteractiveToolInput,
};
export const ExecuteOutput = {
  /** Set on an approval_required error: the pending approval to get approved, then retry with. */
  approval: ApprovalInfo.optional(),
  stdout: z.string(),
  stderr: z.string(),
  exit_code: z.number().int().nullable(),
  timed_out: z.boolean(),
  stdout_truncated: z.boolean(),
  stderr_truncated: z.boolean(),
  elapsed_ms: z.number(),
  // Gatehouse additions: truthful terminal state, the job and its artifact.
  state: z.string(),
  signal: z.string().nullable(),
  job_id: z.string(),
  artifact_handle: z.string(),
  agent_id: z.string().nullable().optional(),
  sandbox: z.enum(['gvisor', 'bwrap', 'none']).nullable().optional(),
  background: z.boolean().optional(),
  notices: Notices,
  /** Why the job failed beyond its exit status: a limit it hit (`workspace_quota`, `disk_write_limit`), a workspace that could not be made. */
  error: z.object({ code: z.string(), message: z.string() }).optional(),
};

// ---- runtime_execute (the governed-runtime contract, docs/architecture.md) ----
export const OutputMode = z.enum(['minimal', 'summary', 'intent']);
export const RuntimeExecuteInput = {
  runtime: RuntimeName.describe('One of the 16 runtimes'),
  executable: z.string().max(4096).optional().describe("Executable compatible with the runtime (default: the runtime's first available)"),
  args: z
    .array(z.string().max(64 * 1024))
    .max(100)
    .optional()
    .describe('Args mode: arguments for the executable'),
  code: z
    .string()
    .max(1024 * 1024)
    .optional()
    .describe('Code mode: source written to a temp file, compiled if needed, then run'),
  stdin: z
    .string()
    .max(512 * 1024)
    .optional(),
  relativeCwd: RelCwd.optional(),
  timeoutMs: z.number().int().min(100).max(600_000).optional(),
  env: EnvMap.optional(),
  approvalId: ApprovalId.optional().describe('An approval a team admin granted for exactly this call (after an approval_required error); used once'),
  outputMode: OutputMode.optional().describe('minimal (default), summary (head+tail), intent (lines matching queryTerms)'),
  queryTerms: z.array(z.string().min(1).max(200)).max(10).optional(),
  contextLines: z.number().int().min(0).max(20).optional(),
  maxResponseLines: z.number().int().min(5).max(1000).optional(),
  ...Placement,
  ...InteractiveToolInput,
};
export const Excerpt = z.object({
  lineStart: z.number().int(),
  lineEnd: z.number().int(),
  content: z.string(),
  source: z.enum(['stdout', 'stderr']),
});
export type Excerpt = z.infer<typeof Excerpt>;
export const RuntimeExecuteOutput = {
  approval: ApprovalInfo.optional(),
  /** `queued` / `running`: a background job's answer (follow it with job_status). */
  status: z.enum(['success', 'failure', 'timeout', 'cancelled', 'denied', 'queued', 'running']),
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  durationMs: z.number(),
  outputLines: z.number().int(),
  outputBytes: z.number().int(),
  artifactHandle: z.string().nullable(),
  stdoutSummary: z.string().optional(),
  stderrSummary: z.string().optional(),
  excerpts: z.array(Excerpt).optional(),
  phase: z.enum(['build', 'run']).optional(),
  notes: z.array(z.string()).optional(),
  jobId: z.string().optional(),
  agentId: z.string().nullable().optional(),
  sandbox: z.enum(['gvisor', 'bwrap', 'none']).nullable().optional(),
  notices: Notices,
};

// ---- run_script (script mode) ----
export const RunScriptInput = {
  code: z
    .string()
    .optional()
    .describe(
      'JavaScript, or TypeScript (types are stripped): top-level statements with await and a top-level return, or a module with export default. At most 51200 bytes. Exactly one of code or name.',
    ),
  name: ScriptName.optional().describe(
    "A script of the team's library (or, where the policy allows, .gatehouse/scripts/<name>.ts in the workspace) instead of code. Exactly one of code or name.",
  ),
  version: z.number().int().min(1).max(999_999_999).optional().describe("With name: that version of the library's script (default: the newest)"),
  vars: ScriptVars.optional().describe(`JSON values the script reads as the frozen global "vars": ${VARS_RULE}`),
  workspace: WorkspaceId.optional().describe(
    `Run every subprocess of the script (and read .mcp.json and workspace scripts) in this workspace (id: ${WORKSPACE_ID_RULE}); omitted: the shared workspace`,
  ),
  workspace_source: WorkspaceSource.optional().describe("Where a new workspace's files come from, as for execute; ignored once it exists"),
  timeout_ms: z.number().int().min(100).max(3_600_000).optional().describe('Wall time for the whole script (default 120000; the team policy sets the maximum)'),
  outputMode: OutputMode.optional().describe(
    'minimal (default: status, result, counts, artifactHandle), summary (console head+tail), intent (console lines matching queryTerms)',
  ),
  queryTerms: z.array(z.string().min(1).max(200)).max(10).optional(),
  contextLines: z.number().int().min(0).max(20).optional(),
  maxResponseLines: z.number().int().min(5).max(1000).optional(),
};
export const RunScriptOutput = {
  ...RuntimeExecuteOutput,
  /** The script's return value (JSON). Absent when it returned nothing or failed. */
  result: z.unknown().optional(),
  /** When the script failed: code `sandbox_error`, message `Sandbox error: …`. */
  error: z.object({ code: ErrorCodeSchema, message: z.string() }).optional(),
  scriptId: z.string().optional(),
  /** Which script ran, when it was called by name: library or workspace, version, SHA-256 of the source. */
  script: ScriptRef.optional(),
  /** `cap`: how many subprocesses this script could start (the policy's maxCount, lowered by the plan's subrequest limit). */
  subprocesses: z.object({ count: z.number().int(), totalMs: z.number(), cap: z.number().int().optional() }).optional(),
  consoleTruncated: z.boolean().optional(),
};

// ---- query_output (the governed-runtime contract, docs/architecture.md) ----
export const QueryOutputInput = {
  artifactHandle: z.string().min(1).max(200),
  queryTerms: z.array(z.string().min(1).max(200)).min(1).max(10),
  maxExcerpts: z.number().int().min(1).max(50).optional(),
  contextLines: z.number().int().min(0).max(10).optional(),
  stream: z.enum(['stdout', 'stderr', 'both']).optional(),
};
export const QueryOutputOutput = {
  artifactHandle: z.string(),
  excerpts: z.array(Excerpt),
  totalLines: z.number().int(),
  totalBytes: z.number().int(),
  searchedStreams: z.array(z.enum(['stdout', 'stderr'])),
  matchCount: z.number().int(),
  matchStatus: z.enum(['matched', 'noMatch']),
};

// ---- policy_check ----
/** Exactly the arguments of the execute call it checks (so any call can be checked as sent), plus a runtime. */
export const PolicyCheckInput = {
  ...ExecuteInput,
  runtime: RuntimeName.optional().describe('Check the call as runtime_execute of this runtime would make it'),
};
export const PolicyCheckOutput = {
  allowed: z.boolean(),
  /** `ask`: the policy allows it once a person approves (allowed is false until then). */
  decision: z.enum(['allow', 'ask', 'deny']),
  stage: z.string(),
  reason: z.string(),
  notes: z.array(z.string()),
  /** The network the command would get (absent when it is denied): docs/network.md. */
  network: z
    .object({
      mode: z.enum(['off', 'allowlist', 'open']),
      /** The policy key that decides it: `network`, or `rules[i].network` of the matching rule. */
      source: z.string(),
      /** Each allowed host entry with its ports and methods, presets expanded. */
      hosts: z.array(z.string()),
      presets: z.array(z.string()),
      unlisted: z.enum(['deny', 'ask']),
      max_bytes_up: z.number().int(),
      max_bytes_down: z.number().int(),
      /** Set when agents without an enforcing sandbox may take the team's jobs. */
      sandbox_note: z.string().optional(),
    })
    .optional(),
  /** The policy's `interactive` section: whether jobs may take input after they start (job_input, tty), and its limits. */
  interactive: InteractivePolicy.optional(),
};

// ---- list_runtimes ----
export const ListRuntimesOutput = {
  runtimes: z.array(
    z.object({
      name: RuntimeName,
      allowed: z.boolean(),
      agents: z.array(z.object({ agentId: z.string(), executable: z.string(), path: z.string(), version: z.string() })),
    }),
  ),
};

// ---- tool errors (every tool) ----
/** What a failed call carries in `structuredContent.error`: a stable code and an actionable message. */
export const ToolErrorShape = z.object({
  code: ErrorCodeSchema.describe(
    'Stable error code to branch on (policy_denied, no_agent, invalid_argument, insufficient_scope, …; the list: src/contracts/errors.ts)',
  ),
  message: z.string(),
});

// ---- workspace_list / workspace_delete (docs/workspaces.md) ----
export const WorkspaceListInput = {};
export const WorkspaceListOutput = { workspaces: z.array(WorkspaceView) };
export const WorkspaceDeleteInput = { workspace: WorkspaceId.describe('The workspace to delete, with every file in it') };
export const WorkspaceDeleteOutput = { workspace: WorkspaceId, agent_id: z.string(), deleted: z.boolean() };
