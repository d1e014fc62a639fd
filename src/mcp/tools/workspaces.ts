/** `workspace_list` / `workspace_delete`: the team's per-task workspaces (docs/workspaces.md). */
import type { McpServer } from '@modelcontextprotocol/server';
import { WorkspaceDeleteInput, WorkspaceDeleteOutput, WorkspaceListInput, WorkspaceListOutput } from '../../contracts/tools.ts';
import { teamWorkspaces } from '../../dispatch/client.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { READ_ONLY, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, toolError, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';
import { auditJobCall } from './job-common.ts';

/** The DO call and the audit row, counted as 3 like every job tool. */
export const WORKSPACE_LIST_COST: ToolCost = { subrequests: 3, decidesPolicy: false };
export const WORKSPACE_DELETE_COST: ToolCost = { subrequests: 3, decidesPolicy: false };

const mib = (b: number) => `${(b / 1048576).toFixed(1)} MiB`;

export function registerWorkspaceTools(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'workspace_list',
    {
      title: "List the team's workspaces",
      description:
        'Workspaces of your team (made by execute / runtime_execute with "workspace"): size, quota, last used, the agent that holds each, when it expires.',
      annotations: READ_ONLY,
      inputSchema: toolInput(WorkspaceListInput),
      outputSchema: toolOutput(WorkspaceListOutput),
    },
    async () => {
      const denied = missingScope(ctx, 'workspace_list', ['artifacts:read']);
      if (denied) return denied;
      const started = Date.now();
      const r = await teamWorkspaces(ctx.env, ctx.principal.team, { op: 'list' });
      await auditJobCall(ctx, 'workspace_list', { command: {}, ok: r.ok, started });
      if (!r.ok) return toolError(`Error: ${r.error.message}`, undefined, r.error.code);
      const list = 'workspaces' in r ? r.workspaces : [];
      const text = list.length
        ? list
            .map(
              (w) =>
                `${w.id}  ${mib(w.bytes)} of ${mib(w.quota_bytes)}  last used ${new Date(w.last_used_at).toISOString()}  agent ${w.agent_id}${w.agent_connected ? '' : ' (not connected)'}`,
            )
            .join('\n')
        : 'no workspaces yet: execute with "workspace" makes one';
      return toolResult({ workspaces: list }, text);
    },
  );
  server.registerTool(
    'workspace_delete',
    {
      title: 'Delete a workspace',
      description: 'Deletes a workspace of your team and every file in it, on the agent that holds it (after the jobs running in it end).',
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      inputSchema: toolInput(WorkspaceDeleteInput),
      outputSchema: toolOutput(WorkspaceDeleteOutput),
    },
    async (input) => {
      const denied = missingScope(ctx, 'workspace_delete', ['execute']);
      if (denied) return denied;
      const started = Date.now();
      const r = await teamWorkspaces(ctx.env, ctx.principal.team, { op: 'delete', id: input.workspace });
      await auditJobCall(ctx, 'workspace_delete', { command: input, ok: r.ok, started });
      if (!r.ok) return toolError(`Error: ${r.error.message}`, undefined, r.error.code);
      const d = 'deleted' in r ? r.deleted : { id: input.workspace, agentId: '', told: false };
      return toolResult({ workspace: d.id, agent_id: d.agentId, deleted: true }, `workspace ${d.id} deleted on agent ${d.agentId}`);
    },
  );
}
