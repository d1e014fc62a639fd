/**
 * The MCP Tasks extension (`io.modelcontextprotocol/tasks`, protocol revision 2026-07-28) as
 * Gatehouse speaks it: the wire shapes of a task and of the `tasks/*` requests, and the record a
 * task keeps besides its job. Defined once; the handlers validate with these and the tests
 * check them against the published extension schemas.
 */
import { z } from 'zod';

export const TASKS_EXTENSION_ID = 'io.modelcontextprotocol/tasks';
/** Where a 2026-07-28 request carries the client's capabilities (per request, no sessions). */
export const CLIENT_CAPABILITIES_META_KEY = 'io.modelcontextprotocol/clientCapabilities';

const TaskStatus = z.enum(['working', 'input_required', 'completed', 'failed', 'cancelled']);

/** The `Task` base shape: what `CreateTaskResult`, `tasks/get` and `notifications/tasks` share. */
export const Task = z.object({
  taskId: z.string(),
  status: TaskStatus,
  statusMessage: z.string().optional(),
  /** ISO 8601. */
  createdAt: z.string(),
  lastUpdatedAt: z.string(),
  /** From creation, integer milliseconds; null would mean unlimited (never here). */
  ttlMs: z.number().int().nullable(),
  pollIntervalMs: z.number().int().optional(),
});
export type Task = z.infer<typeof Task>;

/** `tasks/get`'s answer: the task plus, by status, the final `result` (completed) or JSON-RPC `error` (failed). */
export const DetailedTask = Task.extend({
  result: z.record(z.string(), z.unknown()).optional(),
  error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).optional(),
});
export type DetailedTask = z.infer<typeof DetailedTask>;

/** Params of `tasks/get` and `tasks/cancel`. */
export const TaskIdParams = z.object({ taskId: z.string().min(1).max(200) });
/**
 * Params of `tasks/update`. Its `inputResponses` (answers to a task's `inputRequests`, which
 * Gatehouse tasks never send) is lifted off the params by the SDK before a handler sees them.
 */
export const UpdateTaskParams = TaskIdParams.extend({ inputResponses: z.record(z.string(), z.unknown()).optional() });

/** The tools whose call may become a task: each runs exactly one durable job. */
export const TaskTool = z.enum(['execute', 'runtime_execute']);
export type TaskTool = z.infer<typeof TaskTool>;

/**
 * What a task keeps besides its job: who may see it and how the tool shapes its result (the
 * call's output options; never the command, code, stdin or env — the job row has what ran).
 */
export const TaskRecord = z.object({
  team: z.string(),
  taskId: z.string(),
  subject: z.string(),
  tool: TaskTool,
  /** runtime_execute's outputMode, queryTerms, contextLines, maxResponseLines; the policy's notes. */
  shaping: z.record(z.string(), z.unknown()),
  createdAt: z.number().int(),
  ttlMs: z.number().int(),
});
export type TaskRecord = z.infer<typeof TaskRecord>;
