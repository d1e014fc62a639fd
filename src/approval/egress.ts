/**
 * Approvals of a job's connection to a host its network grant does not list (`unlisted: "ask"`):
 * the same `approvals` rows, admin channel, as an `ask` rule's (src/approval/store.ts), so the
 * dashboard's Approvals list, `gatehouse approvals approve|deny` and the admin API decide them.
 * The team's Durable Object opens one per ask, reads the decisions, and uses an approved one for
 * the job it was asked for (src/dispatch/egress.ts).
 */
import { EGRESS_ASK_WAIT_MS } from '../contracts/network.ts';
import { openApproval, type ApprovalRow } from './store.ts';

/** The `tool` of an egress approval row (the Approvals list shows it). */
const EGRESS_APPROVAL_TOOL = 'egress';

export interface EgressAskInfo {
  team: string;
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

/** A pending admin approval for the ask (the job's existing one for the same host, port and method, if still pending). */
export async function openEgressApproval(db: D1Database, a: EgressAskInfo, now: number): Promise<ApprovalRow> {
  const { row } = await openApproval(db, {
    team: a.team,
    subject: a.subject,
    tokenId: a.tokenId,
    tool: EGRESS_APPROVAL_TOOL,
    hash: await askHash(a),
    summary: egressSummary(a),
    ruleReason: `${a.host} is not in the job's network allowlist and ${a.source}.unlisted is "ask"; approving allows ${a.method ?? 'CONNECT'} to ${a.host}:${a.port} for the rest of this job only`,
    channel: 'admin',
    ttlMs: EGRESS_ASK_WAIT_MS,
    now,
  });
  return row;
}

/** The current rows of some approvals of the team (one query). */
export async function approvalsByIds(db: D1Database, team: string, ids: readonly string[]): Promise<ApprovalRow[]> {
  if (ids.length === 0) return [];
  const r = await db
    .prepare(`SELECT * FROM approvals WHERE team = ? AND id IN (${ids.map(() => '?').join(', ')})`)
    .bind(team, ...ids)
    .all<ApprovalRow>();
  return r.results;
}

/** An approved egress approval is used by the job it was asked for (once): true when this call used it. */
export async function useEgressApproval(db: D1Database, team: string, id: string, jobId: string, now: number): Promise<boolean> {
  const r = await db
    .prepare(`UPDATE approvals SET status = 'used', used_at = ?, job_id = ? WHERE team = ? AND id = ? AND tool = ? AND status = 'approved' AND expires_at > ?`)
    .bind(now, jobId, team, id, EGRESS_APPROVAL_TOOL, now)
    .run();
  return r.meta.changes === 1;
}
