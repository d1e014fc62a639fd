/** `list_runtimes`: which of the 16 runtimes the team may use and which its agents have, with versions. */
import type { McpServer } from '@modelcontextprotocol/server';
import { ListRuntimesOutput } from '../../contracts/tools.ts';
import { RUNTIME_NAMES, RUNTIMES } from '../../contracts/runtimes.ts';
import { getTeamPolicy } from '../../store/policies.ts';
import { listAgents } from '../../dispatch/client.ts';
import { recordAudit } from '../../dispatch/audit-client.ts';
import { READ_ONLY, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';

/** The policy read (D1), the DO call for the agents, the audit row. */
export const LIST_RUNTIMES_COST: ToolCost = { subrequests: 3, decidesPolicy: false };

export function registerListRuntimes(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'list_runtimes',
    {
      title: 'List runtimes',
      description: 'Lists the 16 runtimes: whether the team policy allows each, and which connected executor agents have its toolchain (with versions).',
      annotations: READ_ONLY,
      outputSchema: toolOutput(ListRuntimesOutput),
    },
    async () => {
      const denied = missingScope(ctx, 'list_runtimes', ['execute', 'artifacts:read', 'admin']);
      if (denied) return denied;
      const [{ policy }, agents] = await Promise.all([getTeamPolicy(ctx.env, ctx.principal.team), listAgents(ctx.env, ctx.principal.team)]);
      const runtimes = RUNTIME_NAMES.map((name) => ({
        name,
        allowed: policy.runtime.enabled && policy.runtime.allowedRuntimes.includes(name),
        agents: agents.flatMap((a) =>
          a.runtimes.filter((r) => r.name === name).map((r) => ({ agentId: a.agent_id, executable: r.executable, path: r.path, version: r.version })),
        ),
      }));
      const p = ctx.principal;
      await recordAudit(ctx.env, { team: p.team, subject: p.subject, tokenId: p.tokenId, tool: 'list_runtimes', decision: 'allowed' });
      const lines = runtimes.map(
        (r) =>
          `${r.name}: ${r.allowed ? 'allowed' : 'not allowed'}; ${r.agents.length ? r.agents.map((a) => `${a.agentId} ${a.version}`).join(', ') : `no agent has it (Debian package: ${RUNTIMES[r.name].debianPackage})`}`,
      );
      if (agents.length === 0) lines.unshift(`no executor agent is connected for team '${p.team}'`);
      return toolResult({ runtimes }, lines.join('\n'));
    },
  );
}
