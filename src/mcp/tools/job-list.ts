/** `job_list`: the team's jobs, newest first, filtered by state / subject / tool, paged by cursor. */
import type { McpServer } from '@modelcontextprotocol/server';
import { JobListInput, JobListOutput } from '../../contracts/job-tools.ts';
import { listJobs } from '../../dispatch/client.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { READ_ONLY, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { auditJobCall } from './job-common.ts';

/** The DO call and the audit row, counted as 3 like every job tool. */
export const JOB_LIST_COST: ToolCost = { subrequests: 3, decidesPolicy: false };

export function registerJobList(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'job_list',
    {
      title: "List the team's jobs",
      description: 'Recent jobs of your team, newest first. Filters: state, subject, tool. Pass next_cursor as cursor for the next page.',
      annotations: READ_ONLY,
      inputSchema: toolInput(JobListInput),
      outputSchema: toolOutput(JobListOutput),
    },
    async (input) => {
      const denied = missingScope(ctx, 'job_list', ['artifacts:read']);
      if (denied) return denied;
      const started = Date.now();
      const r = await listJobs(ctx.env, ctx.principal.team, { ...input, limit: input.limit ?? 50 });
      await auditJobCall(ctx, 'job_list', { command: input, ok: true, started });
      return toolResult(r);
    },
  );
}
