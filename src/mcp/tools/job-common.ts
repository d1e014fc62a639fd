/** What the job_* tools share: audit of each call, and the "not found" answer (also for another team's job). */
import { recordAudit } from '../../dispatch/audit-client.ts';
import { toolError } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';

export async function auditJobCall(
  ctx: ToolContext,
  tool: 'job_status' | 'job_output' | 'job_kill' | 'job_list' | 'job_input' | 'workspace_list' | 'workspace_delete',
  o: {
    jobId?: string;
    command?: unknown;
    ok: boolean;
    reason?: string;
    started: number;
    bytes?: number;
  },
): Promise<void> {
  const p = ctx.principal;
  await recordAudit(ctx.env, {
    team: p.team,
    subject: p.subject,
    tokenId: p.tokenId,
    tool,
    command: o.command,
    jobId: o.jobId,
    decision: o.ok ? 'allowed' : 'failed',
    reason: o.reason,
    durationMs: Date.now() - o.started,
    bytes: o.bytes,
  });
}

export function jobNotFound(jobId: string) {
  return toolError(`Error: job "${jobId}" not found (jobs are visible to their own team only; finished jobs are kept 7 days)`, undefined, 'not_found');
}
