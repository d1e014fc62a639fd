/**
 * The team policy document (versioned JSON, stored in D1, set by `admin` tokens only).
 * Stages are decided in the governed-runtime contract's order (docs/architecture.md); see src/policy/ for the engine.
 */
import { z } from 'zod';
import { DO_STORAGE_MAX_BYTES, WORKER_CPU_DEFAULT_MS, WORKER_CPU_MAX_MS } from '../platform/limits.ts';
import { POLICY_MAX_ARTIFACT_BYTES } from './limits.ts';
import { RuntimeName } from './runtimes.ts';
import { DEFAULT_RESOURCE_LIMITS, ResourceLimits } from './resource-limits.ts';
import { SandboxReuse } from './sandbox-reuse.ts';
import { INTERACTIVE_DEFAULT, InteractivePolicy } from './interactive.ts';
import { WORKSPACE_DEFAULT_IDLE_HOURS, WORKSPACE_DEFAULT_QUOTA_BYTES, WorkspacesPolicy } from './workspaces.ts';
import { NETWORK_DEFAULT_BYTES_DOWN, NETWORK_DEFAULT_BYTES_UP, NetworkPolicy } from './network.ts';

const POLICY_SCHEMA_VERSION = 1;

const ArgumentRule = z.object({
  /** Regular expressions (JavaScript syntax) tested against each argument; any match denies. */
  deny: z.array(z.string()).default([]),
  /** Interpreters' inline-code flags (`-c`, `-e`, …) are denied unless this is true. */
  allowInlineCode: z.boolean().default(false),
  /**
   * Arguments the gateway puts before the caller's (never screened: they are the policy's own),
   * e.g. git's `-c core.hooksPath=/dev/null` so a workspace's hooks cannot run.
   */
  prependArgs: z.array(z.string().max(4096)).max(50).default([]),
});

const OpaEvaluator = z.object({
  /** Base URL of an OPA-compatible server: `POST {url}/v1/data/{policyPath}`. */
  url: z.string().url(),
  policyPath: z
    .string()
    .regex(/^[A-Za-z0-9_]+(\/[A-Za-z0-9_]+)*$/, 'policyPath is slash-separated rule path like mcp/subprocess')
    .default('mcp/subprocess'),
});

/**
 * Script mode (`run_script`): off unless enabled. Subprocesses are a separate switch — without a
 * `subprocess` section a script may compute but start nothing.
 */
const ScriptSubprocessPolicy = z.object({
  /** Subprocesses one script may start (each one is a governed job with its own audit row). */
  maxCount: z.number().int().min(1).max(1000).default(50),
  /** Total wall time of one script's subprocesses added together. */
  maxTotalMs: z.number().int().min(100).max(3_600_000).default(600_000),
});
/**
 * Which MCP servers a script may call (`servers.<id>.call`), and which of their tools: rules tried in
 * order, the first whose server and tool match decides; no match → `default`. Without this section a
 * script's catalog is empty of callable servers: every call is denied.
 */
const ServerRule = z.object({
  /** A server id from the catalog, or `*` for any. */
  server: z.string().regex(/^(\*|[A-Za-z0-9_-]{1,64})$/, 'server is a server id (A-Z, a-z, 0-9, _ and -) or "*"'),
  /** Tool names this rule covers (default: every tool of the server). */
  tools: z.array(z.string().min(1).max(256)).min(1).max(200).optional(),
  decision: z.enum(['allow', 'ask', 'deny']),
  /** Shown to the script ("writes to the tracker"). */
  reason: z.string().max(500).optional(),
});
export type ServerRule = z.infer<typeof ServerRule>;
export const ScriptServersPolicy = z.object({
  rules: z.array(ServerRule).max(200).default([]),
  default: z.enum(['allow', 'ask', 'deny']).default('deny'),
  /** How long a server has to answer `initialize`; the call fails after that. */
  initializeTimeoutMs: z.number().int().min(100).max(120_000).default(20_000),
  /** How long one tool call may take. */
  callTimeoutMs: z.number().int().min(100).max(600_000).default(60_000),
  /** Server calls one script may make in all (each is an audit row). */
  maxCalls: z.number().int().min(1).max(1000).default(100),
  /** Stdio servers (`.mcp.json`) one script may have started; each is a long-running job counted as an interactive session. */
  maxServers: z.number().int().min(0).max(16).default(2),
});
export type ScriptServersPolicy = z.infer<typeof ScriptServersPolicy>;

export const ScriptPolicy = z.object({
  enabled: z.boolean().default(false),
  defaultTimeoutMs: z.number().int().min(100).max(3_600_000).default(120_000),
  maxTimeoutMs: z.number().int().min(100).max(3_600_000).default(120_000),
  /** CPU budget of the script's isolate: at most what Cloudflare lets a Worker have, by default its default. */
  cpuMs: z.number().int().min(10).max(WORKER_CPU_MAX_MS).default(WORKER_CPU_DEFAULT_MS),
  subprocess: ScriptSubprocessPolicy.optional(),
  /**
   * `run_script {"name"}` may fall back to `.gatehouse/scripts/<name>.ts` in the job workspace of one of the team's
   * agents when the team library has no such name. Off by default: a workspace file is whatever the repository holds.
   */
  workspaceScripts: z.boolean().default(false),
  servers: ScriptServersPolicy.optional(),
});
export type ScriptPolicy = z.infer<typeof ScriptPolicy>;

/**
 * One element of a rule's pattern: exact text, `/regex/` (anchored at both ends, like shell.allow
 * entries), or a list of alternatives. The first element names the executable: without a `/` it
 * is compared with the executable's base name, so `/usr/bin/git` is `git` too.
 */
const RulePatternElement = z.union([z.string().min(1).max(4096), z.array(z.string().min(1).max(4096)).min(1).max(50)]);

/**
 * A decision rule on top of the allowlists: `allow` (no further question), `ask` (a person must
 * approve each run) or `deny`. Rules are tried in order and the first whose pattern is a prefix
 * of the argv decides; a request no rule matches is decided by the rest of the policy alone. A
 * rule can only narrow: whatever an earlier stage denies stays denied.
 */
export const PolicyRule = z.object({
  /** argv prefix: the executable, then its first arguments (`["git", "push"]`). */
  pattern: z.array(RulePatternElement).min(1).max(50),
  decision: z.enum(['allow', 'ask', 'deny']),
  /** Shown to the caller and to the approver ("pushes leave the sandbox"). */
  reason: z.string().max(500).optional(),
  /** Only these tools (default: every tool that runs something). */
  tools: z
    .array(z.enum(['execute', 'runtime_execute', 'run_script']))
    .min(1)
    .optional(),
  /**
   * The network of the commands this rule matches, instead of the team's `network` (e.g. `npm ci`
   * gets the package registries, everything else none). Absent: the team's applies.
   */
  network: NetworkPolicy.optional(),
});
export type PolicyRule = z.infer<typeof PolicyRule>;

/** How long approvals of `ask` decisions live. */
const ApprovalPolicy = z.object({
  /** A pending approval an admin has not decided expires after this; an approval granted expires this long after it was granted. */
  ttlSeconds: z
    .number()
    .int()
    .min(1)
    .max(7 * 24 * 3600)
    .default(3600),
  /** How long a person has to answer an approval prompt shown by an MCP client (elicitation). */
  promptTtlSeconds: z.number().int().min(1).max(3600).default(600),
  /**
   * Ask the MCP client's own user (an approval prompt, when the client supports elicitation).
   * Whoever runs that client answers it — an agent's host may answer it by itself — so set this
   * false when only a team admin may approve.
   */
  askClient: z.boolean().default(true),
});

/** The team's network when the policy does not say: none. */
const NETWORK_OFF: NetworkPolicy = {
  mode: 'off',
  allow: [],
  presets: [],
  unlisted: 'deny',
  maxBytesUp: NETWORK_DEFAULT_BYTES_UP,
  maxBytesDown: NETWORK_DEFAULT_BYTES_DOWN,
  credentials: [],
};

/** A compliance default: 90 days of audit in the team's object (older rows stay in the R2 export). */
const RETENTION_DEFAULT_AUDIT_DAYS = 90;
/** 1 GiB of the object's 10 GB: room for ~90 days at a few thousand calls a day; the bound is what a team pays for in storage. */
const RETENTION_DEFAULT_MAX_BYTES = 1024 ** 3;
/** The longest a team keeps job output: 90 days. */
const ARTIFACT_MAX_HOURS = 24 * 90;
/** How long job output is kept when the policy does not say. */
export const ARTIFACT_DEFAULT_HOURS = 24;
/** The least a team may keep: below it one busy hour could trigger retention. */
const RETENTION_MIN_BYTES = 16 * 1024 ** 2;

export const RetentionPolicy = z.object({
  auditDays: z.number().int().min(1).max(3650).default(RETENTION_DEFAULT_AUDIT_DAYS),
  /** The team object's storage bound; at most 90 % of a Durable Object's 10 GB, so retention acts before the platform refuses writes. */
  maxBytes: z
    .number()
    .int()
    .min(RETENTION_MIN_BYTES)
    .max(Math.floor(DO_STORAGE_MAX_BYTES * 0.9))
    .default(RETENTION_DEFAULT_MAX_BYTES),
  /**
   * Hours a job's output (its artifacts) is kept; absent: `artifacts.retentionHours`, the older name
   * of the same setting (a policy giving both must give one value: policy/parse.ts).
   */
  artifactHours: z.number().min(1).max(ARTIFACT_MAX_HOURS).optional(),
});
export type RetentionPolicy = z.infer<typeof RetentionPolicy>;

/** The hours a team keeps job output: `retention.artifactHours`, else `artifacts.retentionHours`. */
export function artifactHoursOf(p: Pick<PolicyDocument, 'retention' | 'artifacts'>): number {
  return p.retention.artifactHours ?? p.artifacts.retentionHours;
}

/** The retention a team's object applies (its artifacts' hours resolved from either name). */
export function teamRetentionOf(p: Pick<PolicyDocument, 'retention' | 'artifacts'>): RetentionPolicy {
  return { ...p.retention, artifactHours: artifactHoursOf(p) };
}

export const PolicyDocument = z.object({
  version: z.literal(POLICY_SCHEMA_VERSION),
  /** Feature gates: `runtime.enabled = false` denies every runtime_execute call. */
  execute: z.object({ enabled: z.boolean().default(true) }).default({ enabled: true }),
  runtime: z
    .object({
      enabled: z.boolean().default(true),
      allowedRuntimes: z.array(RuntimeName).default([]),
    })
    .default({ enabled: true, allowedRuntimes: [] }),
  /** Executable allowlist: bare names (resolved in the sandbox PATH) or absolute paths. */
  executables: z.object({ allow: z.array(z.string().min(1)).default([]) }).default({ allow: [] }),
  /** Per-executable argument screens, on top of the built-in screens for known escapes. */
  argumentRules: z.record(z.string(), ArgumentRule).default({}),
  /**
   * `disable`: git (run as argv) gets the repository's filters, diff/merge drivers, aliases, hooks,
   * fsmonitor and helpers switched off by the agent, and `submodule`/`--recurse-submodules` are
   * refused (src/contracts/git-hardening.ts). `run`: the repository's configuration applies.
   */
  git: z.object({ repositoryPrograms: z.enum(['run', 'disable']).default('run') }).default({ repositoryPrograms: 'run' }),
  /** Shell strings (`execute` without args, runtime `shell` code). Off by default. */
  shell: z
    .object({
      enabled: z.boolean().default(false),
      /** The whole string must match one entry: exact text, or `/regex/` anchored by the engine. */
      allow: z.array(z.string()).default([]),
    })
    .default({ enabled: false, allow: [] }),
  env: z.object({ allow: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/)).default([]) }).default({ allow: [] }),
  limits: z
    .object({
      defaultTimeoutMs: z.number().int().min(100).default(30_000),
      maxTimeoutMs: z.number().int().min(100).max(3_600_000).default(30_000),
      /** What to do with a requested timeout above the max: clamp it (and say so) or refuse. */
      overMax: z.enum(['clamp', 'deny']).default('deny'),
      inlineOutputBytes: z
        .number()
        .int()
        .min(0)
        .max(10 * 1024 * 1024)
        .default(40_000),
      maxArtifactBytes: z
        .number()
        .int()
        .min(0)
        .max(POLICY_MAX_ARTIFACT_BYTES)
        .default(100 * 1024 * 1024),
      maxConcurrentJobs: z.number().int().min(1).max(256).default(2),
      /** How long a call may wait for a free slot before "Concurrency limit reached". */
      queueWaitMs: z.number().int().min(0).max(60_000).default(5_000),
      // What one job may use of the agent's machine (src/contracts/resource-limits.ts).
      memoryBytes: ResourceLimits.shape.memoryBytes.default(DEFAULT_RESOURCE_LIMITS.memoryBytes),
      maxProcesses: ResourceLimits.shape.maxProcesses.default(DEFAULT_RESOURCE_LIMITS.maxProcesses),
      maxOpenFiles: ResourceLimits.shape.maxOpenFiles.default(DEFAULT_RESOURCE_LIMITS.maxOpenFiles),
      maxFileBytes: ResourceLimits.shape.maxFileBytes.default(DEFAULT_RESOURCE_LIMITS.maxFileBytes),
      cpuSeconds: ResourceLimits.shape.cpuSeconds.default(DEFAULT_RESOURCE_LIMITS.cpuSeconds),
      tmpBytes: ResourceLimits.shape.tmpBytes.default(DEFAULT_RESOURCE_LIMITS.tmpBytes),
      diskWriteBytes: ResourceLimits.shape.diskWriteBytes.default(DEFAULT_RESOURCE_LIMITS.diskWriteBytes),
    })
    .default({
      defaultTimeoutMs: 30_000,
      maxTimeoutMs: 30_000,
      overMax: 'deny',
      inlineOutputBytes: 40_000,
      maxArtifactBytes: 100 * 1024 * 1024,
      maxConcurrentJobs: 2,
      queueWaitMs: 5_000,
      ...DEFAULT_RESOURCE_LIMITS,
    }),
  opa: z
    .object({
      mode: z.enum(['any', 'all']).default('any'),
      evaluators: z.array(OpaEvaluator).default([]),
      timeoutMs: z.number().int().min(100).max(10_000).default(2_000),
    })
    .default({ mode: 'any', evaluators: [], timeoutMs: 2_000 }),
  /**
   * Isolation floor: agents whose sandbox is weaker never get this team's jobs
   * (gvisor > bwrap > none). `none` admits every agent.
   */
  sandbox: z
    .object({
      minimum: z.enum(['gvisor', 'bwrap', 'none']).default('none'),
      /** Absent: every job gets a fresh sandbox. Set: gVisor agents may reuse one (src/contracts/sandbox-reuse.ts). */
      reuse: SandboxReuse.optional(),
    })
    .default({ minimum: 'none' }),
  /** Jobs waiting for a slot or an agent; beyond `maxLength` a call is refused at once ("queue is full"). */
  queue: z.object({ maxLength: z.number().int().min(0).max(10_000).default(1_000) }).default({ maxLength: 1_000 }),
  script: ScriptPolicy.default({ enabled: false, defaultTimeoutMs: 120_000, maxTimeoutMs: 120_000, cpuMs: 30_000, workspaceScripts: false }),
  artifacts: z
    .object({
      /** The older name of `retention.artifactHours`. */
      retentionHours: z.number().min(1).max(ARTIFACT_MAX_HOURS).default(ARTIFACT_DEFAULT_HOURS),
    })
    .default({ retentionHours: ARTIFACT_DEFAULT_HOURS }),
  /**
   * How long and how much of the team's history its Durable Object keeps (docs/retention.md): audit
   * rows older than `auditDays`, or the oldest beyond `maxBytes` of the object's storage, are exported
   * to R2 (read back with `gatehouse audit export`) and then dropped, oldest first.
   */
  retention: RetentionPolicy.default({ auditDays: RETENTION_DEFAULT_AUDIT_DAYS, maxBytes: RETENTION_DEFAULT_MAX_BYTES }),
  /** Decision rules (allow / ask / deny by argv prefix), tried in order after the allowlists. */
  rules: z.array(PolicyRule).max(200).default([]),
  approvals: ApprovalPolicy.default({ ttlSeconds: 3600, promptTtlSeconds: 600, askClient: true }),
  /**
   * The jobs' network (docs/network.md): `off` (no network at all), `allowlist` (only the listed
   * hosts and presets, through the agent's egress proxy) or `open`. A matching rule's `network`
   * replaces this for its commands.
   */
  network: NetworkPolicy.default(NETWORK_OFF),
  /** Interactive jobs (job_input, tty): off unless enabled; sessions have their own budget and TTLs (src/contracts/interactive.ts). */
  interactive: InteractivePolicy.default(INTERACTIVE_DEFAULT),
  /** Per-task workspaces (docs/workspaces.md): each one's size quota and idle time-to-live. */
  workspaces: WorkspacesPolicy.default({ quotaBytes: WORKSPACE_DEFAULT_QUOTA_BYTES, idleHours: WORKSPACE_DEFAULT_IDLE_HOURS }),
});
export type PolicyDocument = z.infer<typeof PolicyDocument>;
export type PolicyDocumentInput = z.input<typeof PolicyDocument>;
