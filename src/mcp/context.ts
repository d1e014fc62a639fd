/**
 * What every tool handler gets: the Worker's bindings, the verified caller, and the MCP
 * request's extras (progress token, request id, notification sender).
 */
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Env, Principal, Scope } from '../env.ts';

export type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export interface ToolContext {
  env: Env;
  principal: Principal;
}

/** A tool error the model can read and act on: `isError` result, not a transport error. */
export function toolError(message: string, structured?: Record<string, unknown>): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: message }], ...(structured ? { structuredContent: structured } : {}) };
}

export function toolResult(structured: Record<string, unknown>, text?: string): CallToolResult {
  return { content: [{ type: 'text', text: text ?? JSON.stringify(structured) }], structuredContent: structured };
}

/** A per-tool scope check: one /mcp endpoint serves tokens with different scopes. */
export function missingScope(ctx: ToolContext, tool: string, anyOf: Scope[]): CallToolResult | null {
  if (anyOf.some((s) => ctx.principal.scopes.includes(s))) return null;
  return toolError(`insufficient_scope: the tool "${tool}" needs a token with scope ${anyOf.map((s) => `"${s}"`).join(' or ')}; this token has ${ctx.principal.scopes.join(', ') || 'no scopes'}`);
}

/** Identifies one MCP call across requests, so `notifications/cancelled` can find its job. */
export function cancelKey(p: Principal, requestId: string | number): string {
  return `${p.tokenId}:${p.subject}:${String(requestId)}`;
}
