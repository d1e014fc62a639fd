/**
 * Turning a call into a task. The tool handler still returns its ordinary answer (the SDK checks
 * it against the tool's output schema); the CreateTaskResult is handed to the `tools/call`
 * wrapper (index.ts) through this request's own slot, and replaces that answer on the wire.
 */
import type { Task, TaskTool } from '../../contracts/tasks.ts';
import type { ToolContext, ToolExtra } from '../../governed/call-context.ts';
import { saveTask } from '../../dispatch/team-records-client.ts';
import { TASK_POLL_INTERVAL_MS, TASK_TTL_MS } from './negotiation.ts';

export type CreateTaskResult = Task & { resultType: 'task' };

/** Keyed by the request's abort signal: one per inbound request, kept when the SDK copies the request context. */
const created = new WeakMap<AbortSignal, CreateTaskResult>();

/**
 * Makes this call's job a task: the task id is the job id. Resolves true once the task is
 * durably recorded (a `tasks/get` for it would resolve), false if it could not be recorded —
 * then the call keeps its ordinary answer (a job id to follow with the job_* tools).
 */
export async function becomeTask(
  ctx: ToolContext,
  extra: ToolExtra,
  t: { tool: TaskTool; jobId: string; state: 'queued' | 'running'; shaping: Record<string, unknown> },
): Promise<boolean> {
  const now = Date.now();
  try {
    await saveTask(ctx.env, {
      team: ctx.principal.team,
      taskId: t.jobId,
      subject: ctx.principal.subject,
      tool: t.tool,
      shaping: t.shaping,
      createdAt: now,
      ttlMs: TASK_TTL_MS,
    });
  } catch (e) {
    console.warn(`job ${t.jobId}: could not record it as a task (${(e as Error).message}); answering with the job id`);
    return false;
  }
  const at = new Date(now).toISOString();
  created.set(extra.mcpReq.signal, {
    resultType: 'task',
    taskId: t.jobId,
    status: 'working',
    statusMessage: `job ${t.jobId} ${t.state}; poll tasks/get`,
    createdAt: at,
    lastUpdatedAt: at,
    ttlMs: TASK_TTL_MS,
    pollIntervalMs: TASK_POLL_INTERVAL_MS,
  });
  return true;
}

/** The CreateTaskResult this request's tool call produced, if it became a task (taken once). */
export function takeCreatedTask(signal: AbortSignal): CreateTaskResult | undefined {
  const t = created.get(signal);
  created.delete(signal);
  return t;
}
