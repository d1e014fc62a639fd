/**
 * The edge's side of the team's approvals, MCP tasks and egress log, each kept in the team's
 * Durable Object (approvals.ts, tasks.ts, egress.ts): the approval gate, the admin API, the task
 * methods and job_status read and write them here, one DO call each; the shared D1 is not touched.
 */
import type { Env } from '../env.ts';
import type { AdminDecision, ApprovalOutcome, ApprovalRow, OpenApproval, UseApproval } from '../approval/record.ts';
import type { JobView } from '../contracts/job-view.ts';
import type { EgressConnectionView, JobNetworkView } from '../contracts/network.ts';
import type { TaskRecord } from '../contracts/tasks.ts';
import type { ApprovalListFilter } from './approvals.ts';
import { teamStub } from './client.ts';

/** A pending approval for this exact request (the caller's pending admin one for it, if there is one). */
export async function openApproval(env: Env, team: string, o: OpenApproval): Promise<{ row: ApprovalRow; reused: boolean }> {
  return await teamStub(env, team).openApproval(o);
}

export async function getApproval(env: Env, team: string, id: string): Promise<ApprovalRow | null> {
  return await teamStub(env, team).approval(id);
}

/** Newest first. */
export async function listApprovals(env: Env, team: string, f: ApprovalListFilter): Promise<ApprovalRow[]> {
  return await teamStub(env, team).approvals(f);
}

/** An admin approves or denies a pending approval (admin channel only). */
export async function decideApproval(env: Env, team: string, id: string, d: AdminDecision): Promise<ApprovalOutcome> {
  return await teamStub(env, team).decideApproval(id, d);
}

/** Uses an approved approval for one run: only its subject, only for the exact request, only once, only before it expires. */
export async function consumeApproval(env: Env, team: string, c: UseApproval): Promise<ApprovalOutcome> {
  return await teamStub(env, team).consumeApproval(c);
}

/** The client's user answered the approval prompt (an answer counts once). */
export async function answerPrompt(env: Env, team: string, c: UseApproval & { approve: boolean; by: string }): Promise<ApprovalOutcome> {
  return await teamStub(env, team).answerApprovalPrompt(c);
}

/** Records that a job became a task; resolves once the team's object has it. */
export async function saveTask(env: Env, t: TaskRecord): Promise<void> {
  const { team, ...task } = t;
  await teamStub(env, team).saveTask(task);
}

/** The subject's own task and its job, or null: unknown, another subject's, past its TTL, or its job is gone. */
export async function findTask(env: Env, team: string, subject: string, taskId: string, now = Date.now()): Promise<{ rec: TaskRecord; view: JobView } | null> {
  // The stub types the answer as `never`: `shaping`'s values are `unknown`, which it cannot prove serializable.
  const r = (await teamStub(env, team).task(subject, taskId, now)) as { task: Omit<TaskRecord, 'team'>; view: JobView } | null;
  return r ? { rec: { ...r.task, team }, view: r.view } : null;
}

/** A job's grant and the connections its egress proxy reported; null when it has neither. */
export async function jobNetwork(env: Env, team: string, jobId: string): Promise<JobNetworkView | null> {
  return await teamStub(env, team).jobNetwork(jobId);
}

/** The team's latest connections, newest first (the audit page), optionally only refused ones. */
export async function teamConnections(env: Env, team: string, f: { limit: number; refusedOnly?: boolean; before?: number }): Promise<EgressConnectionView[]> {
  return await teamStub(env, team).egressConnections(f);
}

/**
 * Old rows of D1's `approvals`, `tasks`, `egress_connections` and `egress_jobs` for one team, as
 * `SELECT *` returns them (their `team` and `id` columns are ignored), taken in by the legacy import (legacy-import.ts, through `importRecords` in capabilities.ts)
 * (idempotent: run it again and nothing changes; keep one call's rows well under 32 MiB). Each row's
 * shape is its capability's import schema: ApprovalImportRow (approvals.ts), TaskImportRow (tasks.ts),
 * EgressConnectionImportRow and EgressJobImportRow (egress.ts).
 */
export interface TeamRecordsImport {
  approvals?: unknown[];
  tasks?: unknown[];
  egressConnections?: unknown[];
  egressJobs?: unknown[];
}
/** Rows taken in (a job's egress counts: every row applied), and rows refused as malformed; a row already there is not taken again. */
export type ImportCount = { inserted: number; refused: number };
