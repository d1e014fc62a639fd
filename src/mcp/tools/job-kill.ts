/** `job_kill`: stops a job — queued: cancelled at once; running: TERM, then KILL after a grace, whole sandbox. */
import type { McpServer } from '@modelcontextprotocol/server';
import { JobKillInput, JobKillOutput } from '../../contracts/job-tools.ts';
import { killJob } from '../../dispatch/client.ts';
import type { JobState } from '../../contracts/job-view.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { STOPS_JOBS, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { auditJobCall, jobNotFound } from './job-common.ts';

/** The DO call and the audit row, counted as 3 like every job tool. */
export const JOB_KILL_COST: ToolCost = { subrequests: 3, decidesPolicy: false };

export function registerJobKill(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'job_kill',
    {
      title: 'Stop a job',
      description:
        'Stops a job of your team: a queued job is cancelled at once; a running one is killed with its whole process tree (TERM, then KILL) and ends "cancelled". Follow with job_status.',
      annotations: STOPS_JOBS,
      inputSchema: toolInput(JobKillInput),
      outputSchema: toolOutput(JobKillOutput),
    },
    async (input) => {
      const denied = missingScope(ctx, 'job_kill', ['execute']);
      if (denied) return denied;
      const started = Date.now();
      const reason = input.reason ?? `killed by ${ctx.principal.subject} (job_kill)`;
      const r = await killJob(ctx.env, ctx.principal.team, input.job_id, reason);
      await auditJobCall(ctx, 'job_kill', {
        jobId: input.job_id,
        command: { job_id: input.job_id, reason },
        ok: r.found,
        reason: r.found ? `state ${r.state}` : 'not_found',
        started,
      });
      if (!r.found) return jobNotFound(input.job_id);
      const state = r.state as JobState;
      return toolResult({ job_id: input.job_id, state, signalled: state === 'running' || state === 'cancelled' });
    },
  );
}
