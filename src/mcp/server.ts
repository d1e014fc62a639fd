/**
 * One McpServer per request (both eras are stateless): every isolate can serve every call.
 * The factory closes over the caller's team context, so a tool never sees another team.
 */
import { McpServer } from '@modelcontextprotocol/server';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { toolError } from './tool-result.ts';
import type { ToolContext, ToolExtra } from '../governed/call-context.ts';
import { type ToolCost, cachedInput } from './register.ts';
import { EXECUTE_COST, registerExecute } from './tools/execute.ts';
import { RUNTIME_EXECUTE_COST, registerRuntimeExecute } from './tools/runtime-execute.ts';
import { QUERY_OUTPUT_COST, registerQueryOutput } from './tools/query-output-tool.ts';
import { POLICY_CHECK_COST, registerPolicyCheck } from './tools/policy-check.ts';
import { LIST_RUNTIMES_COST, registerListRuntimes } from './tools/list-runtimes.ts';
import { JOB_STATUS_COST, registerJobStatus } from './tools/job-status.ts';
import { JOB_OUTPUT_COST, registerJobOutput } from './tools/job-output.ts';
import { JOB_KILL_COST, registerJobKill } from './tools/job-kill.ts';
import { JOB_LIST_COST, registerJobList } from './tools/job-list.ts';
import { JOB_INPUT_COST, registerJobInput } from './tools/job-input.ts';
import { WORKSPACE_DELETE_COST, WORKSPACE_LIST_COST, registerWorkspaceTools } from './tools/workspaces.ts';
import { RUN_SCRIPT_COST, registerRunScript } from './tools/run-script.ts';
import { registerArtifactResources } from './resources.ts';
import { registerPrompts } from './prompts.ts';
import { registerJobViewer } from './apps/job-viewer.ts';
import { promptStateVerifier } from '../approval/prompt-state.ts';
import { installTasks } from './tasks/index.ts';
import { closeCall, openCall } from '../edge/call-log.ts';

const SERVER_INFO = { name: 'gatehouse', version: '0.1.0' };

/**
 * What one call of each tool registered below may cost, declared beside the tool: the batch check adds up a
 * JSON-RPC batch's calls with it (bounds.ts). Here, not in bounds.ts, so the tools load with the server, at the
 * first MCP request (index.ts).
 */
export const TOOL_COSTS = {
  execute: EXECUTE_COST,
  runtime_execute: RUNTIME_EXECUTE_COST,
  query_output: QUERY_OUTPUT_COST,
  policy_check: POLICY_CHECK_COST,
  list_runtimes: LIST_RUNTIMES_COST,
  job_status: JOB_STATUS_COST,
  job_output: JOB_OUTPUT_COST,
  job_kill: JOB_KILL_COST,
  job_list: JOB_LIST_COST,
  job_input: JOB_INPUT_COST,
  workspace_list: WORKSPACE_LIST_COST,
  workspace_delete: WORKSPACE_DELETE_COST,
  run_script: RUN_SCRIPT_COST,
} as const satisfies Record<string, ToolCost>;

/**
 * 2026-07-28 caching hints. The tool list is the same for every caller of a deployment but the
 * endpoint is authenticated, so only the caller may cache it (`private`); five minutes is short
 * enough that a deploy adding a tool is seen soon after.
 */
const CACHE_HINTS = {
  'tools/list': { ttlMs: 300_000, cacheScope: 'private' },
  'prompts/list': { ttlMs: 300_000, cacheScope: 'private' },
  'resources/templates/list': { ttlMs: 300_000, cacheScope: 'private' },
  'server/discover': { ttlMs: 300_000, cacheScope: 'private' },
  // The team's artifact list changes with every job.
  'resources/list': { ttlMs: 0, cacheScope: 'private' },
} as const;

/** Each tool's registration, by name: `buildServer` registers one of them for a request that calls only it. */
const TOOL_REGISTRATIONS: Record<keyof typeof TOOL_COSTS, (server: McpServer, ctx: ToolContext) => void> = {
  execute: registerExecute,
  runtime_execute: registerRuntimeExecute,
  query_output: registerQueryOutput,
  policy_check: registerPolicyCheck,
  list_runtimes: registerListRuntimes,
  job_status: registerJobStatus,
  job_output: registerJobOutput,
  job_kill: registerJobKill,
  job_list: registerJobList,
  job_input: registerJobInput,
  workspace_list: registerWorkspaceTools,
  workspace_delete: registerWorkspaceTools,
  run_script: registerRunScript,
};

/** The tool a request's only message calls, when it is one of ours: its server needs no other. */
export function onlyToolOf(body: unknown): keyof typeof TOOL_COSTS | undefined {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const m = body as { method?: unknown; params?: { name?: unknown } };
  const name = m.method === 'tools/call' ? m.params?.name : undefined;
  return typeof name === 'string' && Object.hasOwn(TOOL_REGISTRATIONS, name) ? (name as keyof typeof TOOL_COSTS) : undefined;
}

/**
 * The server for one request. `onlyTool`: the request is a single `tools/call` of that tool, so
 * only it is registered (with the call log and tasks around it) — registering every tool, resource
 * and prompt is most of the cost of building a server, and a call answers the same either way.
 */
export function buildServer(ctx: ToolContext, onlyTool?: keyof typeof TOOL_COSTS): McpServer {
  const server = new McpServer(SERVER_INFO, {
    // The tool list is fixed per deployment: there is never a list_changed notification to send.
    capabilities: { tools: { listChanged: false }, resources: { listChanged: false }, prompts: { listChanged: false } },
    cacheHints: CACHE_HINTS,
    // Approval prompts (src/approval/): echoed request state is checked before any tool sees it.
    requestState: { verify: promptStateVerifier(ctx.env, ctx.principal) },
    instructions:
      "Gatehouse runs commands for your team under its policy, in gVisor sandboxes on the team's executor agents. " +
      'Prefer runtime_execute with outputMode "minimal", then query_output on the artifactHandle when you need to see output. ' +
      'Use policy_check to learn why something would be denied. Long jobs: pass background: true, then job_status / job_output / job_kill.',
  });
  withCodedSdkErrors(server);
  withCachedSchemas(server);
  if (onlyTool) {
    TOOL_REGISTRATIONS[onlyTool](server, ctx);
    logToolCalls(server, ctx);
    installTasks(server, ctx);
    return server;
  }
  registerExecute(server, ctx);
  registerRuntimeExecute(server, ctx);
  registerQueryOutput(server, ctx);
  registerPolicyCheck(server, ctx);
  registerListRuntimes(server, ctx);
  registerJobStatus(server, ctx);
  registerJobOutput(server, ctx);
  registerJobKill(server, ctx);
  registerJobList(server, ctx);
  registerJobInput(server, ctx);
  registerWorkspaceTools(server, ctx);
  registerRunScript(server, ctx);
  registerArtifactResources(server, ctx);
  registerPrompts(server);
  registerJobViewer(server);
  logToolCalls(server, ctx);
  installTasks(server, ctx);
  return server;
}

/**
 * Every tool's input schema converts to JSON Schema once per isolate, not once per request
 * (output schemas already do, through `toolOutput`). Tool files keep calling
 * `server.registerTool` as usual.
 */
function withCachedSchemas(server: McpServer): void {
  const register = server.registerTool.bind(server) as (name: string, config: { inputSchema?: unknown }, cb: unknown) => unknown;
  (server as unknown as { registerTool: typeof register }).registerTool = (name, config, cb) =>
    register(name, config.inputSchema === undefined ? config : { ...config, inputSchema: cachedInput(config.inputSchema) }, cb);
}

/**
 * The SDK answers arguments that fail a tool's input schema (and a handler that throws) with a
 * tool error of its own, without a code. Give those the same `structuredContent.error` shape as
 * every other failure. (Pinned SDK 2.4.0: `createToolError` is the single place it builds them;
 * test/e2e/mcp-eras.test.ts fails if that changes.)
 */
function withCodedSdkErrors(server: McpServer): void {
  const sdk = server as unknown as { createToolError(message: string): CallToolResult };
  sdk.createToolError = (message) => toolError(message, undefined, message.startsWith('Input validation error') ? 'invalid_argument' : 'internal');
}

type RawHandler = (request: { params?: { name?: unknown } }, extra: ToolExtra) => Promise<unknown>;

/** A tool name as the line names it: tool names are `[a-z_]`, anything else a caller sent is not repeated. */
const TOOL_NAME = /^[a-z_]{1,64}$/;

/**
 * Every `tools/call` leaves one line (src/edge/call-log.ts), whatever answers it: the tool, the
 * SDK's refusal of its arguments, an unknown tool. Tools add what they learn under the call's
 * abort signal (src/governed/governed-run.ts: the decision, the job, who ran it). Wraps the request handler the
 * way installTasks does (pinned SDK 2.4.0: `_requestHandlers`; test/e2e/observability.test.ts fails
 * if calls stop leaving lines).
 */
function logToolCalls(server: McpServer, ctx: ToolContext): void {
  const handlers = (server.server as unknown as { _requestHandlers: Map<string, RawHandler> })._requestHandlers;
  const inner = handlers.get('tools/call');
  if (!inner) throw new Error('logToolCalls: register the tools first');
  handlers.set('tools/call', async (request, extra) => {
    const key = extra.mcpReq.signal;
    const name = request.params?.name;
    openCall(key, { surface: 'mcp', tool: typeof name === 'string' && TOOL_NAME.test(name) ? name : '(invalid)', principal: ctx.principal });
    let outcome = 'internal';
    try {
      const result = (await inner(request, extra)) as Partial<CallToolResult>;
      const code = (result.structuredContent as { error?: { code?: unknown } } | undefined)?.error?.code;
      outcome = result.isError ? (typeof code === 'string' ? code : 'tool_error') : 'ok';
      return result;
    } catch (e) {
      // The SDK's own refusals (an unknown tool) are JSON-RPC "invalid params".
      if ((e as { code?: unknown }).code === -32602) outcome = 'invalid_argument';
      throw e;
    } finally {
      closeCall(ctx.env, key, outcome);
    }
  });
}
