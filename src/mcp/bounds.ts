/**
 * Bounds on one JSON-RPC POST, checked after parsing and before anything is routed (no DO call,
 * no server built): a batch holds at most MAX_BATCH_MESSAGES messages, and at most
 * MAX_CANCELLATIONS_PER_REQUEST of them may be `notifications/cancelled` (each one is a call to
 * the team's Durable Object). The body's byte size is capped before parsing (MAX_BODY_BYTES).
 * A batch whose calls together could pass Cloudflare's subrequests-per-request limit is refused
 * whole (batchSubrequestProblem): all of a batch runs in one request.
 */
import { REQUEST_SUBREQUESTS, planPhrase } from '../script/request-budget.ts';
import { SUBREQUESTS_PER_REQUEST, type WorkersPlan } from '../platform/limits.ts';
import type { ToolCost } from './register.ts';

/** The MCP TypeScript SDK refuses larger batches too; here the refusal comes before any work. */
export const MAX_BATCH_MESSAGES = 100;
/** A client cancels the calls it has in flight; more than this in one request is not a client. */
export const MAX_CANCELLATIONS_PER_REQUEST = 10;

/** Null when `body` is within bounds, else the message for a 400. */
export function batchProblem(body: unknown): string | null {
  if (!Array.isArray(body)) return null;
  if (body.length === 0) return 'Invalid Request: an empty batch';
  if (body.length > MAX_BATCH_MESSAGES) return `Invalid Request: the batch has ${body.length} messages; at most ${MAX_BATCH_MESSAGES} are accepted per request`;
  const cancels = body.filter((m) => !!m && typeof m === 'object' && (m as { method?: unknown }).method === 'notifications/cancelled').length;
  if (cancels > MAX_CANCELLATIONS_PER_REQUEST) {
    return `Invalid Request: the batch has ${cancels} notifications/cancelled; at most ${MAX_CANCELLATIONS_PER_REQUEST} are accepted per request`;
  }
  return null;
}

type Message = { method?: unknown; params?: { name?: unknown } };

/** A tool the table does not know (refused when it runs): counted like a job tool. */
const UNKNOWN_TOOL_COST: ToolCost = { subrequests: 3, decidesPolicy: false };

/** A `notifications/cancelled` is one call to the team's DO. */
const CANCEL_SUBREQUESTS = 1;

/** Each tool's `ToolCost` by name (src/mcp/server.ts, TOOL_COSTS). */
export type ToolCosts = Readonly<Record<string, ToolCost>>;

/**
 * What a batch's calls may need in subrequests besides the request's own and run_script's (each
 * tool's `ToolCost`): `fixed`, and `governed` calls that each add one per remote OPA evaluator.
 */
export function batchSubrequests(body: unknown, costs: ToolCosts): { fixed: number; governed: number } {
  const out = { fixed: 0, governed: 0 };
  if (!Array.isArray(body)) return out;
  for (const m of body as Message[]) {
    if (m?.method === 'notifications/cancelled') out.fixed += CANCEL_SUBREQUESTS;
    if (m?.method !== 'tools/call') continue;
    const name = String(m.params?.name);
    const cost = Object.hasOwn(costs, name) ? costs[name] : UNKNOWN_TOOL_COST;
    out.fixed += cost.subrequests;
    if (cost.decidesPolicy) out.governed += 1;
  }
  return out;
}

/**
 * Null when a batch's calls fit the plan's subrequests per request, else the message for a 400: a
 * batch is one HTTP request on Cloudflare, so its calls share one budget, and a call past it would
 * fail half-done. Refused before any call runs, with how many execute calls would fit.
 */
export function batchSubrequestProblem(need: number, plan: WorkersPlan, opaEvaluators: number, execute: ToolCost): string | null {
  const limit = SUBREQUESTS_PER_REQUEST[plan];
  if (REQUEST_SUBREQUESTS + need <= limit) return null;
  const perExecute = execute.subrequests + opaEvaluators;
  return (
    `Invalid Request: the batch's calls may need up to ${REQUEST_SUBREQUESTS + need} subrequests and ${planPhrase(plan)}; ` +
    `send fewer calls per request (at most ${Math.floor((limit - REQUEST_SUBREQUESTS) / perExecute)} execute calls, up to ${perExecute} subrequests each) or one call per request`
  );
}
