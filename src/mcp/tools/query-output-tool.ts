/** `query_output` (the governed-runtime contract, docs/architecture.md): search a job's artifact instead of reading it whole. */
import type { McpServer } from '@modelcontextprotocol/server';
import { QueryOutputInput, QueryOutputOutput } from '../../contracts/tools.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { QUERY_OUTPUT_SUBREQUESTS, queryOutput } from '../../governed/query-output.ts';
import { recordAudit } from '../../dispatch/audit-client.ts';
import { READ_ONLY, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, toolError, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';

/** The search's reads (QUERY_OUTPUT_SUBREQUESTS) and its audit row. */
export const QUERY_OUTPUT_COST: ToolCost = { subrequests: QUERY_OUTPUT_SUBREQUESTS + 1, decidesPolicy: false };

export function registerQueryOutput(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'query_output',
    {
      title: "Search a job's stored output",
      description:
        'Searches the stored stdout/stderr of a job (artifactHandle from execute or runtime_execute) for queryTerms and returns excerpt ' +
        'windows with line numbers (contextLines around each match, overlapping windows merged).',
      annotations: READ_ONLY,
      inputSchema: toolInput(QueryOutputInput),
      outputSchema: toolOutput(QueryOutputOutput),
    },
    async (input) => {
      const denied = missingScope(ctx, 'query_output', ['artifacts:read']);
      if (denied) return denied;
      const started = Date.now();
      const r = await queryOutput(ctx.env, ctx.principal.team, input);
      const p = ctx.principal;
      await recordAudit(ctx.env, {
        team: p.team,
        subject: p.subject,
        tokenId: p.tokenId,
        tool: 'query_output',
        command: { artifactHandle: input.artifactHandle, queryTerms: input.queryTerms, stream: input.stream },
        decision: r.ok ? 'allowed' : 'failed',
        reason: r.ok ? undefined : `${r.error.code}: ${r.error.message}`,
        durationMs: Date.now() - started,
        bytes: r.ok ? r.value.totalBytes : undefined,
      });
      if (!r.ok) return toolError(`Error: ${r.error.message}`, undefined, r.error.code);
      return toolResult(r.value as unknown as Record<string, unknown>);
    },
  );
}
