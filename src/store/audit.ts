/**
 * The audit log's shapes and redaction: one row per tool call — allowed, denied, asked or failed —
 * kept in the team's Durable Object (src/dispatch/audit-log.ts). Commands and reasons are redacted
 * before storage (a secret in an argv or env must not become readable by every admin).
 */
import type { AuditRow, AuditTool } from '../contracts/audit.ts';

export interface AuditEntry {
  /** When the call was made (ms); now when absent. A job's row reaches D1 after the call (the team's DO writes it). */
  at?: number;
  team: string;
  subject: string;
  tokenId?: string;
  tool: string;
  /** argv, shell string or runtime request; secrets are redacted before storage. */
  command?: unknown;
  cwd?: string;
  /** `asked`: a policy rule needs a person's approval first; the row carries the approval id. */
  decision: 'allowed' | 'denied' | 'failed' | 'asked';
  reason?: string;
  jobId?: string;
  exitStatus?: string;
  durationMs?: number;
  bytes?: number;
  /** Set on a run_script subprocess's row: the script's job id (its own row has that jobId). */
  parentJobId?: string;
  /** The approval this row is about: the ask, the decision on it, and the run that used it. */
  approvalId?: string;
}

/**
 * A JSON column as stored (an audit row's command): at most this many characters, ≤ 192 KiB of
 * UTF-8, so the row stays far below the team object's row limit (SQLITE_ROW_MAX_BYTES, 2 MB:
 * src/platform/limits.ts) whatever a caller sent (1,000 arguments of 64 KiB pass the tool's
 * schema). A write storage refuses would fail the call; a longer value keeps its start instead.
 */
const STORED_JSON_MAX_CHARS = 64 * 1024;

/** `value` as JSON, or, past STORED_JSON_MAX_CHARS, an object that says so and keeps the start. */
function boundedJson(value: unknown): string {
  const s = JSON.stringify(value);
  if (s.length <= STORED_JSON_MAX_CHARS) return s;
  return JSON.stringify({ truncated: true, chars: s.length, head: s.slice(0, STORED_JSON_MAX_CHARS - 256) });
}

/** A text column as stored (an audit row's reason), bounded like boundedJson: the start, then how long it was. */
function boundedText(s: string): string {
  return s.length <= STORED_JSON_MAX_CHARS ? s : `${s.slice(0, STORED_JSON_MAX_CHARS - 64)}… (${s.length} characters)`;
}

/** An agent's connection refused by its team's Durable Object (a `hello` claiming more than its token grants). */
export const AGENT_CONNECT_AUDIT_TOOL = 'agent.connect' satisfies AuditTool;

/** The tools whose audit rows are governed jobs': one row per job, found by its job id. */
const JOB_TOOLS = ['execute', 'runtime_execute', 'run_script'] as const;
/** The same as an SQL list. */
export const AUDIT_JOB_TOOLS = `(${JOB_TOOLS.map((t) => `'${t}'`).join(', ')})`;

/** Whether `tool`'s audit row is a governed job's. */
export function isJobTool(tool: string): boolean {
  return (JOB_TOOLS as readonly string[]).includes(tool);
}

/**
 * One audit row's stored columns, in order: at, subject, token_id, tool, command, cwd, decision,
 * reason, job_id, exit_status, duration_ms, bytes, parent_job_id, approval_id — redacted and bounded.
 */
export function auditColumns(e: AuditEntry, now: number): (string | number | null)[] {
  return [
    e.at ?? now,
    e.subject,
    e.tokenId ?? null,
    e.tool,
    e.command === undefined ? null : boundedJson(redact(e.command)),
    e.cwd ?? null,
    e.decision,
    e.reason === undefined ? null : boundedText(redactString(e.reason)),
    e.jobId ?? null,
    e.exitStatus ?? null,
    e.durationMs ?? null,
    e.bytes ?? null,
    e.parentJobId ?? null,
    e.approvalId ?? null,
  ];
}

// ---------------------------------------------------------------------------------------------
// Redaction

const REDACTED = '[redacted]';

/** Names of env vars / object keys whose values are secrets. */
const SECRET_NAME = /(secret|token|passw|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credential|auth|session|cookie|signature|bearer)/i;
/** Flags whose next argv element is a secret (`--password hunter2`). */
const SECRET_FLAG = /^-{1,2}[a-z0-9-]*(password|passwd|token|secret|api-?key|auth|credential)[a-z0-9-]*$/i;

/**
 * Patterns of secret values inside any string; each replacement keeps the non-secret prefix.
 * Quantifiers are bounded so a hostile 50 KB argument cannot make redaction quadratic-slow.
 */
const SECRET_PATTERNS: Array<[RegExp, string]> = [
  // Authorization header values.
  [/\b(Bearer|Basic|Token)(\s{1,8})[A-Za-z0-9\-._~+/]{1,8192}=*/gi, `$1$2${REDACTED}`],
  // JWTs anywhere.
  // (?=(x))\1 is an atomic group: a failed match never backtracks through the segment.
  [/\beyJ(?=([A-Za-z0-9_-]{5,4096}))\1\.(?=([A-Za-z0-9_-]{5,8192}))\2\.[A-Za-z0-9_-]{0,4096}/g, REDACTED],
  // Well-known API key shapes: sk-…/rk_live_…, GitHub, GitLab, Slack, AWS access key ids, Google API keys.
  [/\b(?:sk|rk|pk)[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9_-]{12,}/g, REDACTED],
  [/\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}/g, REDACTED],
  [/\bglpat-[A-Za-z0-9_-]{16,}/g, REDACTED],
  [/\bxox[abposr]-[A-Za-z0-9-]{10,}/g, REDACTED],
  [/\bAKIA[0-9A-Z]{16}\b/g, REDACTED],
  [/\bAIza[0-9A-Za-z_-]{30,}/g, REDACTED],
  // PEM private keys.
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g, REDACTED],
  // Credentials in URLs: scheme://user:password@host.
  [/\b([a-z][a-z0-9+.-]{0,20}:\/\/[^\s:/@]{1,256}:)[^\s@/]{1,1024}@/gi, `$1${REDACTED}@`],
];

/** Replaces secret-looking substrings of `s`. */
/** `name=value` / `name: value` (--token=x, PASSWORD=x, api_key: x): the name is checked in code, not by backtracking. */
const NAME_VALUE = /([A-Za-z0-9_.-]{1,64})([ \t]{0,4}[=:][ \t]{0,4})("[^"]{0,4096}"|'[^']{0,4096}'|[^\s&;,'"]{1,4096})/g;
const SECRET_WORD = /secret|token|passw|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credential/i;

export function redactString(s: string): string {
  let out = s;
  for (const [re, rep] of SECRET_PATTERNS) out = out.replace(re, rep);
  return out.replace(NAME_VALUE, (m, name: string, sep: string, value: string) =>
    SECRET_WORD.test(name) && value !== REDACTED ? `${name}${sep}${REDACTED}` : m,
  );
}

/**
 * Deep copy of `value` with secrets replaced by '[redacted]': values under secret-looking keys
 * (env vars like GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY), the argv element after a secret flag,
 * and token-shaped substrings of every string (JWTs, Bearer values, API keys, URL passwords).
 */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 20) return REDACTED;
  if (typeof value === 'string') return redactString(value);
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (let i = 0; i < value.length; i++) {
      const prev = value[i - 1];
      out.push(typeof prev === 'string' && SECRET_FLAG.test(prev) && typeof value[i] === 'string' ? REDACTED : redact(value[i], depth + 1));
    }
    return out;
  }
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = SECRET_NAME.test(k) && v !== null && v !== undefined && typeof v !== 'boolean' && typeof v !== 'object' ? REDACTED : redact(v, depth + 1);
    }
    return out;
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// Queries

/** A row as the API shows it: its shape is the contract's (the CLI reads it too). */
export type { AuditRow };

export interface AuditFilter {
  limit?: number;
  cursor?: string;
  decision?: string;
  tool?: string;
  subject?: string;
  /** Inclusive lower bound on `at` (ms since the epoch). */
  since?: number;
  /** Exclusive upper bound on `at` (ms since the epoch). */
  until?: number;
  /** Rows about one approval: the ask, the decision, the run. */
  approvalId?: string;
  /** The row of one governed job. */
  jobId?: string;
}

export const AUDIT_DEFAULT_LIMIT = 50;
export const AUDIT_MAX_LIMIT = 500;

/** Opaque paging cursor: the id of the last row returned (rows are ordered by id, newest first). */
export const encodeCursor = (id: number): string => btoa(`audit:${id}`).replace(/=+$/, '');
export function decodeCursor(c: string): number | null {
  try {
    const m = /^audit:(\d{1,15})$/.exec(atob(c));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** An audit row as its table stores it (the team's object's `audit`, an older deployment's D1 `audit`). */
export type StoredAuditRow = {
  id: number;
  at: number;
  subject: string;
  token_id: string | null;
  tool: string;
  command: string | null;
  cwd: string | null;
  decision: string;
  reason: string | null;
  job_id: string | null;
  exit_status: string | null;
  duration_ms: number | null;
  bytes: number | null;
  parent_job_id: string | null;
  approval_id: string | null;
};

/** A stored audit row as the API shows it (its command parsed back from JSON). */
export function auditRowOf(x: StoredAuditRow): AuditRow {
  return {
    id: x.id,
    at: x.at,
    subject: x.subject,
    tokenId: x.token_id,
    tool: x.tool,
    command: parseJson(x.command),
    cwd: x.cwd,
    decision: x.decision,
    reason: x.reason,
    jobId: x.job_id,
    exitStatus: x.exit_status,
    durationMs: x.duration_ms,
    bytes: x.bytes,
    parentJobId: x.parent_job_id,
    approvalId: x.approval_id,
  };
}

/** A JSON column as its value; text that is not JSON (an older row) as itself. */
function parseJson(s: string | null): unknown {
  if (s === null) return null;
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}
