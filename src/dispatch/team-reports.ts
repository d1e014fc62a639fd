/**
 * The admin API's reads that span several of the team object's capabilities: the dashboard's landing
 * figures and the audit export's pages. Each reads first what an older deployment left in D1
 * (legacy-import.ts), so the history is whole.
 */
import type { Capabilities } from './capabilities.ts';
import type { AuditExportPage, TeamOverview, TeamOverviewQuery } from './events.ts';
import type { JobView } from '../contracts/job-view.ts';
import type { TeamTask } from './tasks.ts';

/** Exported batches a page names at most. */
const BATCHES_PER_PAGE = 3;

/** The dashboard's landing figures from the team's own tables (src/admin/overview.ts). */
export async function teamOverview(c: Capabilities, q: TeamOverviewQuery, now: number): Promise<TeamOverview> {
  await c.legacy.catchUp();
  const failed = c.rows.failed(q.failuresSince, q.failures);
  return {
    jobsByState: c.rows.countByState(q.since),
    denials: c.auditLog.denials(q.since, q.recent),
    storage: c.retention.storage(now),
    failures: failed.map((r) => c.records.view(r)),
  };
}

/**
 * One page of the audit export (src/admin/audit-export.ts): the exported batches (in R2) holding
 * rows after `after`, or, once past them, the rows still here. `since` (ms) resolves the start.
 */
export async function auditExportPage(c: Capabilities, q: { after: number | null; since: number | null; limit: number }): Promise<AuditExportPage> {
  await c.legacy.catchUp();
  let after = q.after ?? 0;
  if (q.after === null && q.since !== null) {
    const first = c.retention.firstExportIdAt(q.since) ?? c.auditLog.firstIdAt(q.since);
    after = first === null ? Number.MAX_SAFE_INTEGER : first - 1;
  }
  const batches = c.retention.exportsAfter(after, BATCHES_PER_PAGE);
  if (batches.length) return { after, batches, rows: [] };
  return { after, batches: [], rows: c.auditLog.oldest(after, q.limit) };
}

/** The subject's task and its job's state, in one call (tasks/get, tasks/cancel). */
export async function taskWithView(c: Capabilities, subject: string, taskId: string, now: number): Promise<{ task: TeamTask; view: JobView } | null> {
  const task = c.tasks.find(subject, taskId, now);
  if (!task) return null;
  const view = await c.views.status(taskId, 0);
  return view ? { task, view } : null;
}
