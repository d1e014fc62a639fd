/**
 * Errors are values: a stable `code` callers branch on and a `message` a user can act on.
 * Shared by the edge and the agent; never throw bare strings across layers.
 */
import { z } from 'zod';

/**
 * Every error code Gatehouse answers with, anywhere: tool results, the admin API, the Durable
 * Object's answers and the agent protocol. Callers branch on these; a detail (a limit, a path, a
 * job id) travels as its own field, never parsed back out of a message. A new code is added here
 * with its meaning, or not at all.
 */
export const ERROR_CODES = {
  invalid_argument: 'the request is malformed or a value is outside what is allowed (the message says which)',
  unauthenticated: 'no valid credential: missing, malformed, expired, revoked or for another audience',
  forbidden: 'the credential is valid but may not do this (another team, an origin or host not allowed)',
  insufficient_scope: "the token's scopes do not include what this needs",
  not_found: 'no such thing in this team (a job, artifact, token, grant, approval, member)',
  conflict: 'the thing exists but is in a state that refuses this (already written, already ended)',
  payload_too_large: 'a body or value over its documented limit',
  rate_limited: 'too many requests; retry after the time given',
  misdirected_request: 'the Host header names another gateway',
  config_error: 'the deployment is misconfigured (the message names the variable)',
  policy_denied: "the team's policy refuses the call",
  policy_error: "the team's policy could not be evaluated (an OPA evaluator failed): refused",
  approval_required: 'a person must approve the call first',
  approval_pending: 'the approval was asked and is not decided yet',
  approval_denied: 'a person denied the call',
  approval_expired: 'the approval timed out',
  approval_used: 'the approval was already used by a call',
  approval_mismatch: 'the approval was given for a different call',
  approval_wrong_channel: 'the approval belongs to another client or subject',
  approval_not_found: 'no such approval in this team',
  no_agent: 'no executor agent of the team can run the job now',
  concurrency_limit: "the team's concurrent-job limit is reached and the wait ran out",
  queue_full: "the team's queue is full",
  session_limit: "the team's interactive sessions (interactive.maxSessions) are all in use",
  team_suspended: 'the team is suspended by an operator: every call is refused until it is resumed',
  quota_exceeded: 'a team quota is reached (calls per day, storage): the message names the quota and the setting',
  capacity: 'the agent is at capacity (the job is requeued)',
  runtime_unavailable: 'the runtime is not installed on any agent',
  spawn_failed: 'the process could not be started',
  network_unavailable: "the agent cannot enforce the job's network grant (its sandbox cannot, or the forwarder's python3 is missing): refused",
  compile_error: 'the code did not compile',
  syntax_error: 'the script is not valid JavaScript or TypeScript',
  sandbox_error: "the script's sandbox failed",
  limit_reached: 'a limit of the script (calls, time, subprocesses) is reached',
  memory_limit: 'the job went over its memory limit',
  disk_write_limit: 'the job wrote more than its disk limit',
  workspace_quota: "the job filled its workspace's size quota (the policy's workspaces.quotaBytes)",
  workspace_error: 'the workspace could not be created, copied, cloned or deleted (the message says why)',
  cancelled: 'the call or job was cancelled',
  lost: 'the job was lost with its executor agent (also its state)',
  client_url_invalid: "an OAuth client's metadata document URL is malformed",
  client_url_not_https: "an OAuth client's metadata document URL is not HTTPS",
  client_url_not_public: "an OAuth client's metadata document URL is not a public address",
  oauth_not_connected: 'a remote MCP server that requires OAuth has no connection yet: an admin connects it (gatehouse servers connect <id>)',
  oauth_expired: "a remote MCP server's OAuth connection can no longer be refreshed: an admin reconnects it (gatehouse servers connect <id>)",
  oauth_state_invalid: 'an OAuth callback whose state is unknown, used, expired or for another team or server',
  upstream_error: 'a service behind the gateway (D1, R2, the Durable Object, an evaluator) failed',
  tool_error: 'the tool failed (the message says why)',
  internal: 'a bug: the message has what is known',
} as const;
export type ErrorCode = keyof typeof ERROR_CODES;
export const ErrorCodeSchema = z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]);

/** Whether `s` is one of the codes above (for codes that arrive from outside, e.g. an agent). */
export function isErrorCode(s: string): s is ErrorCode {
  return Object.hasOwn(ERROR_CODES, s);
}

/** A code read from outside the type system (an agent's message, a stored row) as one of ours, or `fallback`. */
export function asErrorCode(s: string | null | undefined, fallback: ErrorCode): ErrorCode {
  return s && isErrorCode(s) ? s : fallback;
}

export interface GatehouseErrorShape {
  code: ErrorCode;
  message: string;
}

export type Result<T, E = GatehouseErrorShape> = { ok: true; value: T } | { ok: false; error: E };

export const ok = <T>(value: T): Result<T, never> => ({ ok: true, value });
export const err = (code: ErrorCode, message: string): Result<never> => ({
  ok: false,
  error: { code, message },
});

/** Turns anything caught into a GatehouseErrorShape without losing the message. */
export function toErrorShape(e: unknown): GatehouseErrorShape {
  const message = e instanceof Error ? e.message : String(e);
  return { code: 'internal', message };
}

/** Formats zod issues as "path: message; path: message" so users see what failed where. */
export function describeIssues(issues: ReadonlyArray<{ path: PropertyKey[]; message: string }>): string {
  return issues.map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`).join('; ');
}
