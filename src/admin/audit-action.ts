/** Admin actions (policy set, token create/revoke, job kill) leave an audit row like tool calls do. */
import type { Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { recordAudit } from '../dispatch/audit-client.ts';

export type AdminAction =
  | 'admin.policy_set'
  | 'admin.token_create'
  | 'admin.token_revoke'
  | 'admin.job_kill'
  | 'admin.oauth_grant_revoke'
  | 'admin.oauth_client_revoke'
  | 'admin.oauth_client_unblock'
  | 'admin.member_invite'
  | 'admin.member_invitation_revoke'
  | 'admin.member_role'
  | 'admin.member_remove'
  | 'admin.script_push'
  | 'admin.script_remove';

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
