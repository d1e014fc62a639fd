/**
 * What every tool handler answers with: a result, an `isError` result the model can act on, or
 * a refusal for a missing scope. (The call's context: src/governed/call-context.ts.)
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { Scope } from '../contracts/scopes.ts';
import type { ErrorCode } from '../contracts/errors.ts';
import type { ToolContext } from '../governed/call-context.ts';

/**
 * A tool error the model can read and act on: an `isError` result, not a transport error. The
 * structured part always carries a stable `error.code` a client can branch on.
 */
export function toolError(message: string, structured?: Record<string, unknown>, code: ErrorCode = 'tool_error'): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: message }],
    structuredContent: { ...(structured ?? {}), error: { code, message } },
  };
}

export function toolResult(structured: Record<string, unknown>, text?: string): CallToolResult {
  return { content: [{ type: 'text', text: text ?? JSON.stringify(structured) }], structuredContent: structured };
}

/** A per-tool scope check: one /mcp endpoint serves tokens with different scopes. */
export function missingScope(ctx: ToolContext, tool: string, anyOf: Scope[]): CallToolResult | null {
  if (anyOf.some((s) => ctx.principal.scopes.includes(s))) return null;
  return toolError(
    `insufficient_scope: the tool "${tool}" needs a token with scope ${anyOf.map((s) => `"${s}"`).join(' or ')}; this token has ${ctx.principal.scopes.join(', ') || 'no scopes'}`,
    undefined,
    'insufficient_scope',
  );
}

/**
 * A call the policy denied: `Error: policy denied (<stage>): <reason>`, code `policy_denied`. A runtime-shaped tool
 * (runtime_execute, run_script) passes `runtimeShaped`: its result then says `status: 'denied'` (deniedRun).
 */
export function policyDenied(stage: string, reason: string, runtimeShaped = false): CallToolResult {
  return toolError(`Error: policy denied (${stage}): ${reason}`, runtimeShaped ? deniedRun(`${stage}: ${reason}`) : undefined, 'policy_denied');
}

/** The structured result of a runtime-shaped call that never ran: `status: 'denied'`, nothing measured, why in its notes. */
export function deniedRun(note: string): Record<string, unknown> {
  return { status: 'denied', exitCode: null, signal: null, durationMs: 0, outputLines: 0, outputBytes: 0, artifactHandle: null, notes: [note] };
}
