/**
 * A task as `tasks/get` answers it: the task's row (who may see it, how to shape its result)
 * and its job, both in the team's Durable Object. The job's state maps onto the task's:
 * queued/running → working; cancelled → cancelled; any other end → completed, with the tool's
 * own result inlined (a job that failed is a tool error inside a completed task, never a
 * `failed` task: that status is for JSON-RPC errors only).
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { DetailedTask, TaskRecord } from '../../contracts/tasks.ts';
import { isSettled, isTerminal, type JobView } from '../../contracts/job-view.ts';
import { jobOutcome } from '../../dispatch/client.ts';
import { findTask } from '../../dispatch/team-records-client.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { executeEnded, executeFailed } from '../tools/execute.ts';
import { RuntimeShaping, runtimeEnded, runtimeFailed } from '../tools/runtime-execute.ts';
import { TASK_POLL_INTERVAL_MS } from './negotiation.ts';

const iso = (ms: number) => new Date(ms).toISOString();

/** The caller's task (own team and subject) and its job, or null: unknown, another team's or subject's, past its TTL, or its job is gone. */
export async function findOwnTask(ctx: ToolContext, taskId: string): Promise<{ rec: TaskRecord; view: JobView } | null> {
  // One call to the team's object: the task's row and its job's state.
  return findTask(ctx.env, ctx.principal.team, ctx.principal.subject, taskId);
}

/** The caller's task as `tasks/get` answers it, or null (see `findOwnTask`). */
export async function readTask(ctx: ToolContext, taskId: string): Promise<DetailedTask | null> {
  const own = await findOwnTask(ctx, taskId);
  if (!own) return null;
  const { rec, view } = own;
  const base = {
    taskId,
    createdAt: iso(rec.createdAt),
    lastUpdatedAt: iso(view.ended_at ?? view.started_at ?? rec.createdAt),
    ttlMs: rec.ttlMs,
    pollIntervalMs: TASK_POLL_INTERVAL_MS,
  };
  if (!isSettled(view)) return { ...base, status: 'working', statusMessage: workingMessage(view) };
  if (view.state === 'cancelled') return { ...base, status: 'cancelled', statusMessage: view.error?.message ?? 'the job was cancelled' };
  const result = await finalResult(ctx, rec, view);
  return { ...base, status: 'completed', statusMessage: `job ${taskId} ${endedAs(view)}`, result: { ...result, resultType: 'complete' } };
}

function workingMessage(v: JobView): string {
  if (isTerminal(v.state)) return `job ${v.job_id} ${endedAs(v)}; storing its output`;
  return v.state === 'running' ? `job ${v.job_id} running on agent ${v.agent_id} (${v.sandbox})` : `job ${v.job_id} queued: waiting for a free executor agent`;
}

function endedAs(v: JobView): string {
  if (v.state === 'exited') return `exited ${v.exit_code}`;
  if (v.state === 'signaled') return `died of ${v.signal}`;
  return v.state.replace(/_/g, ' ');
}

/** The tool's own answer for the ended job, shaped as the original call asked. */
async function finalResult(ctx: ToolContext, rec: TaskRecord, view: JobView): Promise<CallToolResult> {
  const notes = Array.isArray(rec.shaping.notes) ? rec.shaping.notes.filter((n): n is string => typeof n === 'string') : [];
  const res = await jobOutcome(ctx.env, ctx.principal.team, rec.taskId);
  if (!res.ok) return rec.tool === 'execute' ? executeFailed(res.error, rec.taskId) : runtimeFailed(res.error, rec.taskId);
  const ended = { ...res.value, jobId: rec.taskId, handle: view.artifact_handle, notes };
  if (rec.tool === 'execute') return executeEnded(ended);
  return runtimeEnded(ctx, ended, RuntimeShaping.parse({ outputMode: 'minimal', ...rec.shaping, notes }));
}
