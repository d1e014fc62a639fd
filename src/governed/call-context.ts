/**
 * One call's context, whichever face it came through (an MCP tool, or a script's subprocess acting
 * for the run_script call): the Worker's bindings, the verified caller, the protocol era of the
 * request, and the SDK's per-request context (`ctx.mcpReq`: request id, progress token,
 * notification sender, abort signal). Its cancel key finds the call's jobs again.
 */
import type { ServerContext } from '@modelcontextprotocol/server';
import type { Env } from '../env.ts';
import type { Principal } from '../auth/principal.ts';

/** The SDK's per-call context (v2 `ServerContext`); named for what tools use it for. */
export type ToolExtra = ServerContext;

/** 2025-era clients (initialize handshake) are `legacy`; 2026-07-28 clients are `modern`. */
type ProtocolEra = 'legacy' | 'modern';

export interface ToolContext {
  env: Env;
  principal: Principal;
  /** Which protocol era this request speaks; decides how cancellation reaches a running job. */
  era: ProtocolEra;
  /** Keeps work alive after the response is gone (a cancellation sent when the client hangs up). */
  waitUntil: (p: Promise<unknown>) => void;
  /**
   * A nonce per request (the server and this context are built per request): 2026-era calls are
   * cancelled by closing their own stream, so their jobs need not be found by request id alone,
   * and two calls that reuse a request id must not cancel each other's jobs.
   */
  callNonce?: string;
}

/** The cancel key of this call's jobs (every job a call starts shares it). */
export function callCancelKey(ctx: ToolContext, extra: ToolExtra): string {
  return cancelKey(ctx.principal, extra.mcpReq.id, ctx.callNonce);
}

/**
 * Identifies one MCP call across requests, so `notifications/cancelled` (2025 era: its own POST,
 * maybe in another isolate) can find its job. 2026-era calls are cancelled by closing their own
 * stream, so a per-request nonce keeps two calls that reuse a request id apart.
 */
export function cancelKey(p: Principal, requestId: string | number, nonce?: string): string {
  return `${p.tokenId}:${p.subject}:${String(requestId)}${nonce ? `:${nonce}` : ''}`;
}
