/**
 * An approval's record and the rules over it: its status at a time, what an admin's decision, a
 * caller's retry with the id, or a prompt's answer does to it, and how long it is kept. Pure: the
 * team's Durable Object stores the rows (src/dispatch/approvals.ts) and applies these rules to a row
 * within one synchronous step of its own, so an approval is used at most once however many retries
 * race for it.
 */
import type { ApprovalChannel, ApprovalStatus, ApprovalView } from '../contracts/approvals.ts';
import { JOB_RETENTION_MS } from '../contracts/job-view.ts';

/** One approval as the team's object keeps it (the object is the team's: no team column). */
export interface ApprovalRow {
  id: string;
  subject: string;
  token_id: string | null;
  tool: string;
  request_hash: string;
  summary: string;
  rule_reason: string;
  channel: ApprovalChannel;
  /** `expired` is never stored: a pending or approved row past `expires_at` is expired (`statusAt`). */
  status: Exclude<ApprovalStatus, 'expired'>;
  created_at: number;
  /** pending: until decided; approved: until used. */
  expires_at: number;
  decided_by: string | null;
  decided_at: number | null;
  decision_note: string | null;
  used_at: number | null;
  /** The run that used it. */
  job_id: string | null;
}

/**
 * How long an approval is kept after it ended (used, denied, or expired): as long as the team keeps
 * the jobs and audit rows that name it, so `GET /admin/v1/audit?approval=ID` and the approval read as one story.
 */
export const APPROVAL_RETENTION_MS = JOB_RETENTION_MS;

export type ApprovalRefusalCode =
  | 'approval_not_found'
  | 'approval_pending'
  | 'approval_denied'
  | 'approval_used'
  | 'approval_expired'
  | 'approval_mismatch'
  | 'approval_wrong_channel';
type Refusal = { code: ApprovalRefusalCode; message: string };
export type ApprovalOutcome = { ok: true; row: ApprovalRow } | { ok: false; refusal: Refusal };

export const iso = (ms: number): string => new Date(ms).toISOString();

function newApprovalId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return `ap_${btoa(String.fromCharCode(...b))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '')}`;
}

/** A row's status as of `now`: a pending or approved row past its expiry is expired. */
export function statusAt(row: Pick<ApprovalRow, 'status' | 'expires_at'>, now: number): ApprovalStatus {
  if ((row.status === 'pending' || row.status === 'approved') && row.expires_at <= now) return 'expired';
  return row.status;
}

/** When the row may be dropped: APPROVAL_RETENTION_MS after it was used, denied, or ran out. */
export function keptUntil(row: Pick<ApprovalRow, 'status' | 'expires_at' | 'decided_at' | 'used_at'>): number {
  const ended = row.status === 'used' ? row.used_at : row.status === 'denied' ? row.decided_at : row.expires_at;
  return (ended ?? row.expires_at) + APPROVAL_RETENTION_MS;
}

export interface OpenApproval {
  subject: string;
  tokenId: string;
  tool: string;
  hash: string;
  summary: string;
  ruleReason: string;
  channel: ApprovalChannel;
  ttlMs: number;
  now: number;
}

/** A caller's pending admin approval for this exact request is reused: a client retrying without the id must not flood the admins' list. */
export function reusable(row: ApprovalRow, o: OpenApproval): boolean {
  return (
    o.channel === 'admin' &&
    row.channel === 'admin' &&
    row.subject === o.subject &&
    row.request_hash === o.hash &&
    row.status === 'pending' &&
    row.expires_at > o.now
  );
}

export function newApproval(o: OpenApproval): ApprovalRow {
  return {
    id: newApprovalId(),
    subject: o.subject,
    token_id: o.tokenId,
    tool: o.tool,
    request_hash: o.hash,
    summary: o.summary,
    rule_reason: o.ruleReason,
    channel: o.channel,
    status: 'pending',
    created_at: o.now,
    expires_at: o.now + o.ttlMs,
    decided_by: null,
    decided_at: null,
    decision_note: null,
    used_at: null,
    job_id: null,
  };
}

export interface AdminDecision {
  approve: boolean;
  by: string;
  note?: string;
  /** Approving starts the time the caller has to use it (`ttlMs` from now). */
  ttlMs: number;
  now: number;
}

/**
 * An admin's decision on a pending approval. Only `admin`-channel approvals: a prompt shown to the
 * client's user is that user's to answer.
 */
export function decide(row: ApprovalRow | null, id: string, d: AdminDecision): ApprovalOutcome {
  if (!row) return { ok: false, refusal: { code: 'approval_not_found', message: `approval "${id}" not found in this team` } };
  if (row.channel !== 'admin') {
    return {
      ok: false,
      refusal: {
        code: 'approval_wrong_channel',
        message: `approval "${id}" was asked of the MCP client's user through its approval prompt; an admin cannot decide it`,
      },
    };
  }
  if (statusAt(row, d.now) !== 'pending') return { ok: false, refusal: alreadyDecided(row, d.now) };
  return {
    ok: true,
    row: {
      ...row,
      status: d.approve ? 'approved' : 'denied',
      decided_by: d.by,
      decided_at: d.now,
      decision_note: d.note ?? null,
      expires_at: d.approve ? d.now + d.ttlMs : row.expires_at,
    },
  };
}

export interface UseApproval {
  subject: string;
  id: string;
  hash: string;
  jobId: string;
  now: number;
}

/**
 * Uses an approved approval for one run: only by the subject that asked, only for the exact
 * request it was asked for, only once, only before it expires. Another subject's id is "not found"
 * (its existence is not theirs to learn).
 */
export function consume(row: ApprovalRow | null, c: UseApproval): ApprovalOutcome {
  if (!row || row.subject !== c.subject) {
    return {
      ok: false,
      refusal: {
        code: 'approval_not_found',
        message: `approval "${c.id}" not found for this caller; an approval can be used only by the subject that asked for it`,
      },
    };
  }
  if (row.request_hash !== c.hash) {
    return {
      ok: false,
      refusal: {
        code: 'approval_mismatch',
        message: `approval "${c.id}" was granted for a different request (${row.summary}); retry exactly that call, or call without approval_id to ask for this one`,
      },
    };
  }
  if (row.channel !== 'admin')
    return { ok: false, refusal: { code: 'approval_wrong_channel', message: `approval "${c.id}" belongs to an approval prompt, not to an admin approval` } };
  if (statusAt(row, c.now) !== 'approved') return { ok: false, refusal: alreadyDecided(row, c.now) };
  return { ok: true, row: { ...row, status: 'used', used_at: c.now, job_id: c.jobId } };
}

/**
 * The client's user answered the approval prompt: approve (the run uses it at once) or refuse.
 * A prompt answered twice — the same request state replayed — changes nothing the second time.
 */
export function answerPrompt(row: ApprovalRow | null, c: UseApproval & { approve: boolean; by: string }): ApprovalOutcome {
  if (!row || row.subject !== c.subject || row.request_hash !== c.hash || row.channel !== 'elicitation') {
    return { ok: false, refusal: { code: 'approval_not_found', message: 'the approval prompt this answer belongs to was not found for this request' } };
  }
  const s = statusAt(row, c.now);
  if (s === 'expired')
    return {
      ok: false,
      refusal: {
        code: 'approval_expired',
        message: `the approval prompt expired at ${iso(row.expires_at)} before it was answered; call again to be asked again`,
      },
    };
  if (s !== 'pending')
    return {
      ok: false,
      refusal: {
        code: 'approval_used',
        message: `this approval prompt was already answered (${row.status}); an answer counts once — call again to be asked again`,
      },
    };
  return {
    ok: true,
    row: {
      ...row,
      status: c.approve ? 'used' : 'denied',
      decided_by: c.by,
      decided_at: c.now,
      used_at: c.approve ? c.now : null,
      job_id: c.approve ? c.jobId : null,
    },
  };
}

function alreadyDecided(row: ApprovalRow, now: number): Refusal {
  const s = statusAt(row, now);
  switch (s) {
    case 'pending':
      return {
        code: 'approval_pending',
        message: `approval "${row.id}" is still pending: a team admin has not approved it yet (gatehouse approvals approve ${row.id})`,
      };
    case 'denied':
      return {
        code: 'approval_denied',
        message: `approval "${row.id}" was denied by ${row.decided_by ?? 'an admin'} at ${iso(row.decided_at ?? row.created_at)}${row.decision_note ? `: ${row.decision_note}` : ''}`,
      };
    case 'used':
      return {
        code: 'approval_used',
        message: `approval "${row.id}" was already used (job ${row.job_id ?? '?'} at ${iso(row.used_at ?? now)}); an approval runs one call once — call again without approval_id to ask for a new one`,
      };
    case 'expired':
      return {
        code: 'approval_expired',
        message: `approval "${row.id}" expired at ${iso(row.expires_at)}; call again without approval_id to ask for a new one`,
      };
    case 'approved':
      return { code: 'approval_pending', message: `approval "${row.id}" is approved already` };
  }
}

export function approvalView(row: ApprovalRow, now: number): ApprovalView {
  return {
    id: row.id,
    status: statusAt(row, now),
    channel: row.channel,
    subject: row.subject,
    tool: row.tool,
    summary: row.summary,
    reason: row.rule_reason,
    created_at: iso(row.created_at),
    expires_at: iso(row.expires_at),
    decided_by: row.decided_by,
    decided_at: row.decided_at === null ? null : iso(row.decided_at),
    note: row.decision_note,
    used_at: row.used_at === null ? null : iso(row.used_at),
    job_id: row.job_id,
  };
}
