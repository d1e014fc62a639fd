/**
 * An audit row as the admin API answers it (`GET /admin/v1/audit`, the export): written by the edge
 * (src/store/audit.ts), read by the CLI (cli/audit.ts).
 */
export interface AuditRow {
  id: number;
  at: number;
  subject: string;
  tokenId: string | null;
  tool: string;
  command: unknown;
  cwd: string | null;
  decision: string;
  reason: string | null;
  jobId: string | null;
  exitStatus: string | null;
  durationMs: number | null;
  bytes: number | null;
  parentJobId: string | null;
  approvalId: string | null;
}

/** What an admin sees of the team's storage and what retention drops next (`GET /admin/v1/audit/storage`, the CLI, the dashboard). */
export interface StorageView {
  bytes: number;
  maxBytes: number;
  auditDays: number;
  oldestAuditAt: number | null;
  /** When the oldest audit rows are due (exported, then dropped). */
  nextDropAt: number | null;
  exported: { batches: number; rows: number; lastId: number | null };
  lastError: string | null;
}

export const AUDIT_DECISIONS = ['allowed', 'denied', 'failed', 'asked'] as const;
/**
 * Every tool name an audit row can carry: MCP tools, admin actions (`admin.*`), and the gateway's own events. The
 * admin API's `?tool=` filter, `gatehouse audit tail --tool` and the admin actions' type (src/admin/audit-action.ts)
 * all read this one list.
 */
export const AUDIT_TOOLS = [
  'execute',
  'runtime_execute',
  'query_output',
  'policy_check',
  'list_runtimes',
  'run_script',
  'job_status',
  'job_output',
  'job_kill',
  'job_list',
  'job_input',
  'admin.policy_set',
  'admin.token_create',
  'admin.token_revoke',
  'admin.oauth_grant_revoke',
  'admin.oauth_client_revoke',
  'admin.oauth_client_unblock',
  'oauth.grant_create',
  'admin.job_kill',
  'admin.approval_approve',
  'admin.approval_deny',
  'approval.elicitation',
  'agent.connect',
  'admin.member_invite',
  'admin.member_invitation_revoke',
  'admin.member_role',
  'admin.member_remove',
  'admin.script_push',
  'admin.script_remove',
  'admin.secret_set',
  'admin.secret_remove',
  'member.join',
  'admin.server_put',
  'admin.server_remove',
  'admin.server_connect',
  'oauth.server_connected',
  'admin.workspace_delete',
] as const;
export type AuditTool = (typeof AUDIT_TOOLS)[number];
/** The admin API's actions: the `admin.*` names of AUDIT_TOOLS. */
export type AdminAuditTool = Extract<AuditTool, `admin.${string}`>;
