/**
 * When a tool call may become a task, and the numbers a task carries. Tasks are for 2026-07-28
 * clients that put the extension in the request's own client capabilities (the server alone
 * decides per call; a client that did not declare it never gets a task).
 */
import { CLIENT_CAPABILITIES_META_KEY, TASKS_EXTENSION_ID } from '../../contracts/tasks.ts';
import { JOB_RETENTION_MS } from '../../contracts/job-view.ts';
import type { ToolContext, ToolExtra } from '../../governed/call-context.ts';

/**
 * How long a call waits for its job before it answers with a task instead: a job that ends
 * sooner answers as a plain result, so quick commands cost the client no extra round trip.
 */
export const TASK_AFTER_MS = 1000;

/** The polling interval suggested to clients (a poll is one Durable Object call, two when the job has ended). */
export const TASK_POLL_INTERVAL_MS = 2000;

/**
 * A task lives as long as its job is kept: the team's Durable Object keeps a finished job
 * `JOB_RETENTION_MS` after it ended, so a task is readable at least that long after it was created.
 */
export const TASK_TTL_MS = JOB_RETENTION_MS;

/**
 * A tool's `_meta` entry saying whether its call may become a task: `optional` (execute,
 * runtime_execute: each runs one durable job) or `forbidden` (run_script: the script runs inside
 * the request at the edge, not as a durable job, so there is nothing a task could follow).
 * The 2026-07-28 tool shape has no `execution.taskSupport` field any more.
 */
export const TASK_SUPPORT_META_KEY = 'gatehouse/taskSupport';

/** Whether this request declares the Tasks extension in its per-request client capabilities. */
export function declaresTasks(ctx: ToolContext, extra: ToolExtra): boolean {
  if (ctx.era !== 'modern') return false;
  const envelope = extra.mcpReq.envelope as Record<string, unknown> | undefined;
  const caps = (envelope?.[CLIENT_CAPABILITIES_META_KEY] ?? extra.mcpReq._meta?.[CLIENT_CAPABILITIES_META_KEY]) as { extensions?: unknown } | undefined;
  const ext =
    caps && typeof caps === 'object' && caps.extensions && typeof caps.extensions === 'object'
      ? (caps.extensions as Record<string, unknown>)[TASKS_EXTENSION_ID]
      : undefined;
  // The extension defines no settings: an object (empty) declares it; anything else does not.
  return !!ext && typeof ext === 'object' && !Array.isArray(ext);
}

/**
 * The task offer for a job-running call: only when the client declared the extension and did
 * not ask for `background` (which keeps its own answer: a job id to follow with the job_* tools).
 */
export function taskOffer(ctx: ToolContext, extra: ToolExtra, input: { background?: boolean }): { afterMs: number } | undefined {
  if (input.background === true || !declaresTasks(ctx, extra)) return undefined;
  return { afterMs: TASK_AFTER_MS };
}
