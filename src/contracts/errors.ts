/**
 * Errors are values: a stable `code` callers branch on and a `message` a user can act on.
 * Shared by the edge and the agent; never throw bare strings across layers.
 */
export type ErrorCode =
  | 'invalid_argument'
  | 'unauthenticated'
  | 'forbidden'
  | 'insufficient_scope'
  | 'not_found'
  | 'policy_denied'
  | 'no_agent'
  | 'concurrency_limit'
  | 'cancelled'
  | 'runtime_unavailable'
  | 'spawn_failed'
  | 'payload_too_large'
  | 'config_error'
  | 'upstream_error'
  | 'internal';

export interface GatehouseErrorShape {
  code: ErrorCode;
  message: string;
}

export class GatehouseError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.code = code;
    this.name = 'GatehouseError';
  }
  toJSON(): GatehouseErrorShape {
    return { code: this.code, message: this.message };
  }
}

export type Result<T, E = GatehouseErrorShape> = { ok: true; value: T } | { ok: false; error: E };

export const ok = <T>(value: T): Result<T, never> => ({ ok: true, value });
export const err = (code: ErrorCode, message: string): Result<never> => ({
  ok: false,
  error: { code, message },
});

/** Turns anything caught into a GatehouseErrorShape without losing the message. */
export function toErrorShape(e: unknown): GatehouseErrorShape {
  if (e instanceof GatehouseError) return e.toJSON();
  const message = e instanceof Error ? e.message : String(e);
  return { code: 'internal', message };
}

/** Formats zod issues as "path: message; path: message" so users see what failed where. */
export function describeIssues(issues: ReadonlyArray<{ path: PropertyKey[]; message: string }>): string {
  return issues
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}
