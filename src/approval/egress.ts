/**
 * Approvals of a job's connection to a host its network grant does not list (`unlisted: "ask"`):
 * the same approval rows, admin channel, as an `ask` rule's (record.ts), so the dashboard's
 * Approvals list, `gatehouse approvals approve|deny` and the admin API decide them. The team's
 * Durable Object opens one per ask and answers the ask from its decision (src/dispatch/egress.ts);
 * what is asked and what a decision means for the job are decided here.
 */
import { EGRESS_ASK_WAIT_MS } from '../contracts/network.ts';
import { statusAt, type ApprovalRow, type OpenApproval } from './record.ts';

/** The `tool` of an egress approval row (the Approvals list shows it). */
export const EGRESS_APPROVAL_TOOL = 'egress';

export interface EgressAskInfo {
  /** Who started the job (the approval is theirs). */
  subject: string;
  tokenId: string;
  jobId: string;
  host: string;
  port: number;
  method?: string;
  /** The job's command, for the approver. */
  command: string;
  /** The grant's policy key (`network` or `rules[i].network`). */
  source: string;
}

async function askHash(a: EgressAskInfo): Promise<string> {
  // The method is part of what is approved: a pending GET ask is not the approval a POST waits on (a tunnel's is CONNECT).
  const bytes = new TextEncoder().encode(JSON.stringify(['egress', 2, a.jobId, a.host.toLowerCase(), a.port, a.method?.toUpperCase() ?? 'CONNECT']));
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** What the approver reads: which job wants which host, and what the job runs. */
function egressSummary(a: Pick<EgressAskInfo, 'jobId' | 'host' | 'port' | 'method' | 'command'>): string {
  const cmd = a.command.length > 300 ? `${a.command.slice(0, 300)}…` : a.command;
  return `job ${a.jobId} wants to connect to ${a.host}:${a.port}${a.method ? ` (${a.method})` : ''}; command: ${cmd}`;
}

/** The admin approval an ask opens (the job's pending one for the same host, port and method is reused). */
export async function egressApproval(a: EgressAskInfo, now: number): Promise<OpenApproval> {
  return {
    subject: a.subject,
    tokenId: a.tokenId,
    tool: EGRESS_APPROVAL_TOOL,
    hash: await askHash(a),
    summary: egressSummary(a),
    ruleReason: `${a.host} is not in the job's network allowlist and ${a.source}.unlisted is "ask"; approving allows ${a.method ?? 'CONNECT'} to ${a.host}:${a.port} for the rest of this job only`,
    channel: 'admin',
    ttlMs: EGRESS_ASK_WAIT_MS,
    now,
  };
}

/**
 * What an egress approval's state means for the job's ask: allow (an approved one is used by that
 * job, once: `used` is the row to store), deny (denied), or nothing yet (still pending, or ran out:
 * the ask's own expiry answers it).
 */
export function egressVerdict(
  ap: ApprovalRow | null,
  jobId: string,
  now: number,
): { decision: 'allow'; by: string; used: ApprovalRow | null } | { decision: 'deny'; by: string } | null {
  if (!ap || ap.tool !== EGRESS_APPROVAL_TOOL) return null;
  const by = `approval ${ap.id} (approved by ${ap.decided_by ?? 'an admin'})`;
  if (ap.status === 'used' && ap.job_id === jobId) return { decision: 'allow', by, used: null };
  if (statusAt(ap, now) === 'approved') return { decision: 'allow', by, used: { ...ap, status: 'used', used_at: now, job_id: jobId } };
  if (ap.status === 'denied')
    return { decision: 'deny', by: `approval ${ap.id} (denied by ${ap.decided_by ?? 'an admin'}${ap.decision_note ? `: ${ap.decision_note}` : ''})` };
  return null;
}
