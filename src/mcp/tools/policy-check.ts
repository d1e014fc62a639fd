/** `policy_check`: a dry run of the team policy for a command, with the stage and reason. */
import type { McpServer } from '@modelcontextprotocol/server';
import { PolicyCheckInput, PolicyCheckOutput } from '../../contracts/tools.ts';
import { toolInput } from '../../contracts/strict-input.ts';
import { dryRun } from '../../policy/dry-run.ts';
import { teamPolicyOf } from '../../store/policy-cache.ts';
import { grantLine } from '../../policy/network.ts';
import { interactiveLine } from '../../policy/interactive-line.ts';
import { recordAudit } from '../../dispatch/audit-client.ts';
import { stamp } from '../../contracts/trace.ts';
import { READ_ONLY, toolOutput, type ToolCost } from '../register.ts';
import { missingScope, toolResult } from '../tool-result.ts';
import type { ToolContext } from '../../governed/call-context.ts';

/** The policy read (D1, on a cache miss) and its audit row. */
export const POLICY_CHECK_COST: ToolCost = { subrequests: 2, decidesPolicy: true };

export function registerPolicyCheck(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'policy_check',
    {
      title: 'Dry-run the team policy',
      description:
        'Says whether the team policy would allow a command, deny it, or ask a person to approve it first (decision allow|ask|deny; args given: direct exec; omitted: shell string), which stage decides, and why. Nothing runs.',
      annotations: READ_ONLY,
      inputSchema: toolInput(PolicyCheckInput),
      outputSchema: toolOutput(PolicyCheckOutput),
    },
    async (input) => {
      const denied = missingScope(ctx, 'policy_check', ['execute', 'admin']);
      if (denied) return denied;
      const { policy } = await teamPolicyOf(ctx.env, ctx.principal);
      const { decision: d, answer } = await dryRun(policy, input, ctx.principal);
      stamp(ctx.env, 'edge.decided');
      const p = ctx.principal;
      await recordAudit(ctx.env, {
        team: p.team,
        subject: p.subject,
        tokenId: p.tokenId,
        tool: 'policy_check',
        command: { command: input.command, args: input.args, runtime: input.runtime, env: input.env },
        cwd: input.cwd,
        decision: d.allowed ? 'allowed' : 'denied',
        reason: `dry run; ${answer.decision}; ${d.stage}: ${d.reason}`,
      });
      stamp(ctx.env, 'edge.audited');
      const { network } = answer;
      const label = answer.decision === 'ask' ? 'needs approval' : d.allowed ? 'allowed' : 'denied';
      const text = `${label} (${d.stage}): ${d.reason}${d.notes.length ? `\nnotes: ${d.notes.join('; ')}` : ''}${network ? `\n${grantLine(network)}` : ''}\n${interactiveLine(policy.interactive)}`;
      return toolResult(answer, text);
    },
  );
}
