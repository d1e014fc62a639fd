/**
 * The MCP Tasks extension (`io.modelcontextprotocol/tasks`) on a 2026-07-28 server: advertises
 * it, serves `tasks/get`, `tasks/update` and `tasks/cancel`, and lets a `tools/call` answer with
 * a CreateTaskResult. A task is a durable job of the caller's team (task id = job id) that its
 * creator (same team and token subject) follows; anyone else gets "not found". 2025-era
 * servers get none of it (their clients follow jobs with the job_* tools).
 *
 * Implemented here from the extension's specification: `@modelcontextprotocol/ext-tasks` is a
 * requester (client) library and has no server side for 2026-07-28 tool tasks.
 */
import { MissingRequiredClientCapabilityError, ProtocolError, ProtocolErrorCode, type McpServer, type ServerContext } from '@modelcontextprotocol/server';
import { TASKS_EXTENSION_ID, TaskIdParams, UpdateTaskParams } from '../../contracts/tasks.ts';
import { killJob } from '../../dispatch/client.ts';
import type { Scope } from '../../contracts/scopes.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { auditJobCall } from '../tools/job-common.ts';
import { takeCreatedTask } from './create.ts';
import { declaresTasks } from './negotiation.ts';
import { findOwnTask, readTask } from './read.ts';
import { isTerminal } from '../../contracts/job-view.ts';

type RawHandler = (request: unknown, ctx: ServerContext) => Promise<unknown>;

/** Call after every tool is registered (the `tools/call` handler exists only then). */
export function installTasks(server: McpServer, ctx: ToolContext): void {
  if (ctx.era !== 'modern') return;
  server.server.registerCapabilities({ extensions: { [TASKS_EXTENSION_ID]: {} } });
  const low = server.server;

  low.setRequestHandler('tasks/get', { params: TaskIdParams }, async ({ taskId }, extra) => {
    gate(ctx, extra, ['execute', 'artifacts:read']);
    const task = await readTask(ctx, taskId);
    if (!task) throw notFound(taskId);
    return task;
  });

  // Gatehouse tasks never ask for input (no `input_required`): a known task's update is acknowledged and ignored.
  low.setRequestHandler('tasks/update', { params: UpdateTaskParams }, async ({ taskId }, extra) => {
    gate(ctx, extra, ['execute', 'artifacts:read']);
    if (!(await findOwnTask(ctx, taskId))) throw notFound(taskId);
    return {};
  });

  // Cancelling kills the job's whole process tree (a queued job never starts); the task then reads `cancelled`.
  low.setRequestHandler('tasks/cancel', { params: TaskIdParams }, async ({ taskId }, extra) => {
    gate(ctx, extra, ['execute']);
    const started = Date.now();
    const own = await findOwnTask(ctx, taskId);
    if (!own) throw notFound(taskId);
    // A job that already ended keeps its end (and the task its status): nothing to kill, nothing to audit.
    if (!isTerminal(own.view.state)) {
      const r = await killJob(ctx.env, ctx.principal.team, taskId, `cancelled by ${ctx.principal.subject} (tasks/cancel)`);
      await auditJobCall(ctx, 'job_kill', {
        jobId: taskId,
        command: { task_id: taskId, via: 'tasks/cancel' },
        ok: r.found,
        reason: `tasks/cancel: state ${r.state}`,
        started,
      });
    }
    return {};
  });

  wrapToolsCall(server);
}

/**
 * The SDK checks a tool's answer against the CallToolResult shape, which a CreateTaskResult is
 * not; so the tool handler answers as usual and this outer wrapper swaps in the task. (Pinned SDK
 * 2.4.0: the request handlers live in the protocol's `_requestHandlers` map; test/e2e/tasks.test.ts
 * fails if a long call stops becoming a task.)
 */
function wrapToolsCall(server: McpServer): void {
  const handlers = (server.server as unknown as { _requestHandlers: Map<string, RawHandler> })._requestHandlers;
  const inner = handlers.get('tools/call');
  if (!inner) throw new Error('installTasks: register the tools first');
  handlers.set('tools/call', async (request, extra) => {
    const result = await inner(request, extra);
    return takeCreatedTask(extra.mcpReq.signal) ?? result;
  });
}

/** Only a client that declares the extension on this very request may use the task methods. */
function gate(ctx: ToolContext, extra: ServerContext, scopes: Scope[]): void {
  if (!declaresTasks(ctx, extra)) {
    throw new MissingRequiredClientCapabilityError(
      { requiredCapabilities: { extensions: { [TASKS_EXTENSION_ID]: {} } } },
      `Missing required client capability: declare the "${TASKS_EXTENSION_ID}" extension in this request's _meta["io.modelcontextprotocol/clientCapabilities"].extensions to use tasks`,
    );
  }
  if (!scopes.some((s) => ctx.principal.scopes.includes(s))) {
    throw new ProtocolError(ProtocolErrorCode.InvalidRequest, `insufficient_scope: this needs a token with scope ${scopes.map((s) => `"${s}"`).join(' or ')}`);
  }
}

function notFound(taskId: string): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.InvalidParams,
    `Failed to retrieve task: task "${taskId}" not found (a task is visible to the token subject that created it, in its own team, for 7 days)`,
  );
}
