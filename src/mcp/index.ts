/**
 * The MCP endpoint (Streamable HTTP): Origin check, auth, body limit, JSON-RPC parsing,
 * cancellation routing, then SDK v2's `createMcpHandler`, which serves both protocol eras from
 * one endpoint: 2025-era clients (initialize handshake, stateless) and 2026-07-28 clients
 * (`server/discover`, per-request `_meta`), each request with a fresh server for its team.
 */
import { Hono } from 'hono';
import type { AuthInfo, createMcpHandler, McpServerFactory } from '@modelcontextprotocol/server';
import type { AppEnv, Env } from '../env.ts';
import type { Principal } from '../auth/principal.ts';
import { requestLedger } from '../script/request-budget.ts';
import { workersPlan } from '../platform/plan.ts';
import { DEFAULT_MAX_BODY_BYTES, gatewayConfig } from '../platform/config.ts';
import { teamPolicyOf } from '../store/policy-cache.ts';
import { requireAuth } from '../auth/index.ts';
import { mcpCors } from '../edge/cors.ts';
import { rateLimit } from '../edge/rate-limit.ts';
import { batchProblem, batchSubrequestProblem, batchSubrequests } from './bounds.ts';
import { cancelKey, type ToolContext } from '../governed/call-context.ts';
import { cancelByCall } from '../dispatch/client.ts';
import { traceMark } from './trace.ts';

export const mcpRoutes = new Hono<AppEnv>();

function jsonRpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: '2.0', error: { code, message }, id: null }, { status });
}

// Browsers send Origin: a page from an origin not allowed must not drive the endpoint (DNS rebinding, CSRF);
// an allowed one gets its CORS grant, and its preflight is answered here, before auth. The trace
// marks exist only in the bench's traced build (trace.ts).
mcpRoutes.use(
  '*',
  ...traceMark('edge.request'),
  mcpCors(),
  requireAuth({ anyScope: ['execute', 'artifacts:read', 'admin'] }),
  ...traceMark('edge.authenticated'),
  rateLimit('mcp'),
  ...traceMark('edge.rate_limited'),
);

// Stateless: there is no standalone server→client stream to open (the spec allows 405 here).
mcpRoutes.get('/', () => new Response(null, { status: 405, headers: { Allow: 'POST, DELETE' } }));

mcpRoutes.on(['POST', 'DELETE'], '/', async (c) => {
  // The config guard refused the request before here when the vars are broken.
  const cfg = gatewayConfig(c.env);
  const maxBody = cfg.ok ? cfg.config.maxBodyBytes : DEFAULT_MAX_BODY_BYTES;
  let parsedBody: unknown;
  if (c.req.method === 'POST') {
    const declared = c.req.header('Content-Length');
    if (declared !== undefined && Number(declared) > maxBody) {
      return jsonRpcError(413, -32000, `Payload Too Large: the body has ${declared} bytes; the limit is ${maxBody}`);
    }
    const body = await readCapped(c.req.raw, maxBody);
    if (body === null) return jsonRpcError(413, -32000, `Payload Too Large: the limit is ${maxBody} bytes`);
    try {
      parsedBody = JSON.parse(body);
    } catch {
      return jsonRpcError(400, -32700, 'Parse error: the body is not valid JSON');
    }
    const bounds = batchProblem(parsedBody) ?? (await batchBudgetProblem(c.env, c.get('principal'), parsedBody));
    if (bounds) return jsonRpcError(400, -32600, bounds);
    await routeCancellations(c.env, c.get('principal'), parsedBody);
  }
  const p = c.get('principal');
  // The SDK hands `authInfo` back to the factory unchanged: it is the key to this request's team context.
  const authInfo: AuthInfo = { token: '', clientId: p.subject, scopes: p.scopes, extra: { team: p.team, tokenId: p.tokenId } };
  const handlers = await mcpHandlers();
  requestContexts.set(authInfo, {
    ctx: { env: c.env, principal: p, waitUntil: (w) => c.executionCtx.waitUntil(w) },
    onlyTool: handlers.onlyToolOf(parsedBody),
  });
  return (isToolCall(parsedBody) ? handlers.streaming : handlers.auto).fetch(c.req.raw, { authInfo, ...(parsedBody !== undefined ? { parsedBody } : {}) });
});

/** Per-request team context, found by the request's `authInfo` object (dropped with it). */
const requestContexts = new WeakMap<AuthInfo, { ctx: Omit<ToolContext, 'era'>; onlyTool: OnlyTool }>();
type OnlyTool = ReturnType<typeof import('./server.ts').onlyToolOf>;

/**
 * How often an open SSE stream gets a keep-alive comment. Writing is how the Worker learns that a
 * client hung up (the platform reports a closed connection on the next write), and a 2026-era
 * client cancels a call by hanging up: so this bounds how long a cancelled job keeps running.
 */
const SSE_KEEPALIVE_MS = 1000;

/**
 * One pair of handlers per isolate, both eras (`legacy: 'stateless'` serves 2025-era clients per request).
 * `auto` answers in JSON unless a call reports progress, which upgrades it to SSE; `tools/call`
 * always streams, so the keep-alive can notice a client that hangs up on a silent job.
 *
 * Built at the first MCP request, not at start-up: the SDK, the tools and what they import (the
 * script runner's TypeScript transpiler among them) build hundreds of schemas when their modules are
 * evaluated, which would count against the Worker's start-up CPU limit (bench/startup.ts) for every
 * isolate, including those that only serve the agent socket, the dashboard or the admin API.
 */
let handlers: Promise<McpHandlers> | null = null;
type McpHandler = ReturnType<typeof createMcpHandler>;
interface McpHandlers {
  auto: McpHandler;
  streaming: McpHandler;
  onlyToolOf: (body: unknown) => OnlyTool;
}

function mcpHandlers(): Promise<McpHandlers> {
  handlers ??= Promise.all([import('@modelcontextprotocol/server'), import('./server.ts')]).then(([sdk, { buildServer, onlyToolOf }]) => {
    /** The per-request factory: a fresh server for the caller's team, in the request's era. */
    const factory: McpServerFactory = ({ era, authInfo }) => {
      const base = authInfo ? requestContexts.get(authInfo) : undefined;
      if (!base) throw new Error('MCP request without a verified principal');
      return buildServer({ ...base.ctx, era, ...(era === 'modern' ? { callNonce: crypto.randomUUID() } : {}) }, base.onlyTool);
    };
    return {
      onlyToolOf,
      auto: sdk.createMcpHandler(factory, { legacy: 'stateless', keepAliveMs: SSE_KEEPALIVE_MS }),
      streaming: sdk.createMcpHandler(factory, { legacy: 'stateless', keepAliveMs: SSE_KEEPALIVE_MS, responseMode: 'sse' }),
    };
  });
  // A failed import is not kept: the next request tries again.
  handlers.catch(() => (handlers = null));
  return handlers;
}

function isToolCall(body: unknown): boolean {
  return !!body && typeof body === 'object' && (body as { method?: unknown }).method === 'tools/call';
}

async function readCapped(req: Request, max: number): Promise<string | null> {
  if (!req.body) return '';
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let o = 0;
  for (const ch of chunks) {
    all.set(ch, o);
    o += ch.byteLength;
  }
  return new TextDecoder().decode(all);
}

/**
 * `notifications/cancelled` arrives as its own POST, possibly in another isolate than the call
 * it cancels; the team's DO finds the job by (token, request id) and tells the agent to kill it.
 */
async function routeCancellations(env: AppEnv['Bindings'], p: Principal, body: unknown): Promise<void> {
  const messages = Array.isArray(body) ? body : [body];
  for (const m of messages) {
    if (!m || typeof m !== 'object') continue;
    const msg = m as { method?: unknown; params?: { requestId?: unknown; reason?: unknown } };
    if (msg.method !== 'notifications/cancelled') continue;
    const id = msg.params?.requestId;
    if (typeof id !== 'string' && typeof id !== 'number') continue;
    const reason = typeof msg.params?.reason === 'string' ? msg.params.reason : 'cancelled by the client';
    await cancelByCall(env, p.team, cancelKey(p, id), reason);
  }
}

/**
 * A batch's subrequest budget (bounds.ts): refused whole when its calls cannot fit (or the configured
 * plan is unknown: the config_error every call depending on the plan gives); else their share
 * is charged to the request's ledger, so the batch's scripts are admitted from what is left.
 */
async function batchBudgetProblem(env: Env, principal: Principal, body: unknown): Promise<string | null> {
  if (!Array.isArray(body)) return null;
  const plan = workersPlan(env);
  if (!plan.ok) return plan.message;
  // The tools' costs come with the tools, loaded with the server (mcpHandlers): a batch is an MCP request.
  const { TOOL_COSTS } = await import('./server.ts');
  const { fixed, governed } = batchSubrequests(body, TOOL_COSTS);
  const evaluators = governed ? (await teamPolicyOf(env, principal)).policy.opa.evaluators.length : 0;
  const need = fixed + governed * evaluators;
  const problem = batchSubrequestProblem(need, plan.plan, evaluators, TOOL_COSTS.execute);
  if (!problem && need) requestLedger(principal, plan.plan).chargeBatch(need);
  return problem;
}
