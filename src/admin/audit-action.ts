/** Admin actions (policy set, token create/revoke, job kill) leave an audit row like tool calls do. */
import type { Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import type { AdminAuditTool } from '../contracts/audit.ts';

/** One list of audited tool names (src/contracts/audit.ts): an action missing there cannot be audited or filtered. */
export type AdminAction = AdminAuditTool;

export async function auditAdmin(
  c: Context<AppEnv>,
  action: AdminAction,
  o: { command?: unknown; ok: boolean; reason?: string; jobId?: string },
): Promise<void> {
  const p = c.get('principal');
  await recordAudit(c.env, {
    team: p.team,
    subject: p.subject,
    tokenId: p.tokenId,
    tool: action,
    command: o.command,
    jobId: o.jobId,
    decision: o.ok ? 'allowed' : 'failed',
    reason: o.reason,
  });
}
