/** `job_status`: where a job stands; with wait_ms, waits (long-poll, ≤ 60 s) for it to end. */
import type { McpServer } from '@modelcontextprotocol/server';
import { JobStatusInput, JobStatusOutput } from '../../contracts/job-tools.ts';
import { jobStatus } from '../../dispatch/client.ts';
import { jobNetwork } from '../../dispatch/team-records-client.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { READ_ONLY, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { auditJobCall, jobNotFound } from './job-common.ts';

/** The job from the team's DO, its audit row, its network log (the DO again). */
export const JOB_STATUS_COST: ToolCost = { subrequests: 3, decidesPolicy: false };

export function registerJobStatus(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'job_status',
    {
      title: 'State of a job',
      description:
        'State, exit code, timings, agent and sandbox of a job (background or not), and the network connections it made or was refused. wait_ms (≤ 60000) waits for the job to end first.',
      annotations: READ_ONLY,
      inputSchema: toolInput(JobStatusInput),
      outputSchema: toolOutput(JobStatusOutput),
    },
    async (input) => {
      const denied = missingScope(ctx, 'job_status', ['artifacts:read']);
      if (denied) return denied;
      const started = Date.now();
      const v = await jobStatus(ctx.env, ctx.principal.team, input.job_id, input.wait_ms ?? 0);
      await auditJobCall(ctx, 'job_status', { jobId: input.job_id, ok: v !== null, reason: v ? v.state : 'not_found', started });
      if (!v) return jobNotFound(input.job_id);
      const network = await jobNetwork(ctx.env, ctx.principal.team, v.job_id);
      return toolResult(network ? { ...v, network } : v);
    },
  );
}
