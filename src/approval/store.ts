/**
 * Pending approvals in D1 (table `approvals`). D1 rather than the team's Durable Object: the
 * admin API, the CLI and the audit log already read D1 by team, approvals are rare, and every
 * state change is one conditional UPDATE, which D1's single primary database applies
 * atomically — so an approval is used at most once however many retries race for it.
 */
import type { ApprovalChannel, ApprovalStatus, ApprovalView } from '../contracts/approvals.ts';

export interface ApprovalRow {
  id: string;
  team: string;
  subject: string;
  token_id: string | null;
  tool: string;
  request_hash: string;
  summary: string;
  rule_reason: string;
  channel: ApprovalChannel;
  status: Exclude<ApprovalStatus, 'expired'> | 'expired';
  created_at: number;
  expires_at: number;
  decided_by: string | null;
  decided_at: number | null;
  decision_note: string | null;
  used_at: number | null;
  job_id: string | null;
}

function newApprovalId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return `ap_${btoa(String.fromCharCode(...b))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '')}`;
}

/** A row's status as of `now`: a pending or approved row past its expiry is expired. */
function statusAt(row: Pick<ApprovalRow, 'status' | 'expires_at'>, now: number): ApprovalStatus {
  if ((row.status === 'pending' || row.status === 'approved') && row.expires_at <= now) return 'expired';
  return row.status;
}

export interface OpenApproval {
  team: string;
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

/**
 * A pending approval for this exact request: the caller's existing one if it is still pending
 * (a client retrying without the id must not flood the admins' list), else a new one.
 */
export async function openApproval(db: D1Database, o: OpenApproval): Promise<{ row: ApprovalRow; reused: boolean }> {
  if (o.channel === 'admin') {
    const existing = await db
      .prepare(
        `SELECT * FROM approvals WHERE team = ? AND subject = ? AND request_hash = ? AND channel = 'admin' AND status = 'pending' AND expires_at > ?
         ORDER BY created_at DESC LIMIT 1`,
      )
      .bind(o.team, o.subject, o.hash, o.now)
      .first<ApprovalRow>();
    if (existing) return { row: existing, reused: true };
  }
  const row: ApprovalRow = {
    id: newApprovalId(),
    team: o.team,
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
  await db
    .prepare(
      `INSERT INTO approvals (id, team, subject, token_id, tool, request_hash, summary, rule_reason, channel, status, created_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
    )
    .bind(row.id, row.team, row.subject, row.token_id, row.tool, row.request_hash, row.summary, row.rule_reason, row.channel, row.created_at, row.expires_at)
    .run();
  return { row, reused: false };
}

export async function getApproval(db: D1Database, team: string, id: string): Promise<ApprovalRow | null> {
  return db.prepare('SELECT * FROM approvals WHERE team = ? AND id = ?').bind(team, id).first<ApprovalRow>();
}

export async function listApprovals(db: D1Database, team: string, f: { status?: ApprovalStatus; limit: number; now: number }): Promise<ApprovalRow[]> {
  const where = ['team = ?'];
  const params: unknown[] = [team];
  if (f.status === 'expired') {
    where.push(`status IN ('pending', 'approved') AND expires_at <= ?`);
    params.push(f.now);
  } else if (f.status === 'pending' || f.status === 'approved') {
    where.push('status = ? AND expires_at > ?');
    params.push(f.status, f.now);
  } else if (f.status) {
    where.push('status = ?');
    params.push(f.status);
  }
  params.push(f.limit);
  const r = await db
    .prepare(`SELECT * FROM approvals WHERE ${where.join(' AND ')} ORDER BY created_at DESC LIMIT ?`)
    .bind(...params)
    .all<ApprovalRow>();
  return r.results;
}

export type Refusal = { code: ApprovalRefusalCode; message: string };
export type ApprovalRefusalCode =
  | 'approval_not_found'
  | 'approval_pending'
  | 'approval_denied'
  | 'approval_used'
  | 'approval_expired'
  | 'approval_mismatch'
  | 'approval_wrong_channel';

/**
 * An admin's decision on a pending approval. Approving starts the time the caller has to use it
 * (`ttlMs` from now). Only `admin`-channel approvals: a prompt shown to the client's user is
 * that user's to answer.
 */
export async function decideApproval(
  db: D1Database,
  team: string,
  id: string,
  d: { approve: boolean; by: string; note?: string; ttlMs: number; now: number },
): Promise<{ ok: true; row: ApprovalRow } | { ok: false; refusal: Refusal }> {
  const r = await db
    .prepare(
      `UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, decision_note = ?, expires_at = CASE WHEN ? THEN ? ELSE expires_at END
       WHERE team = ? AND id = ? AND channel = 'admin' AND status = 'pending' AND expires_at > ?`,
    )
    .bind(d.approve ? 'approved' : 'denied', d.by, d.now, d.note ?? null, d.approve ? 1 : 0, d.now + d.ttlMs, team, id, d.now)
    .run();
  const row = await getApproval(db, team, id);
  if (r.meta.changes === 1 && row) return { ok: true, row };
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
  return { ok: false, refusal: alreadyDecided(row, d.now) };
}

/**
 * Uses an approved approval for one run: only the same team and subject, only for the exact
 * request it was asked for, only once, only before it expires. Another team's or subject's id
 * is "not found" (its existence is not theirs to learn).
 */
export async function consumeApproval(
  db: D1Database,
  c: { team: string; subject: string; id: string; hash: string; jobId: string; now: number },
): Promise<{ ok: true; row: ApprovalRow } | { ok: false; refusal: Refusal }> {
  const r = await db
    .prepare(
      `UPDATE approvals SET status = 'used', used_at = ?, job_id = ?
       WHERE id = ? AND team = ? AND subject = ? AND request_hash = ? AND channel = 'admin' AND status = 'approved' AND expires_at > ?`,
    )
    .bind(c.now, c.jobId, c.id, c.team, c.subject, c.hash, c.now)
    .run();
  const row = await getApproval(db, c.team, c.id);
  if (r.meta.changes === 1 && row) return { ok: true, row };
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
  return { ok: false, refusal: alreadyDecided(row, c.now) };
}

/**
 * The client's user answered the approval prompt: approve (the run uses it at once) or refuse.
 * A prompt answered twice — the same request state replayed — changes nothing the second time.
 */
export async function answerPrompt(
  db: D1Database,
  c: { team: string; subject: string; id: string; hash: string; approve: boolean; by: string; jobId: string; now: number },
): Promise<{ ok: true; row: ApprovalRow } | { ok: false; refusal: Refusal }> {
  const r = await db
    .prepare(
      `UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, used_at = CASE WHEN ? THEN ? ELSE NULL END, job_id = CASE WHEN ? THEN ? ELSE NULL END
       WHERE id = ? AND team = ? AND subject = ? AND request_hash = ? AND channel = 'elicitation' AND status = 'pending' AND expires_at > ?`,
    )
    .bind(c.approve ? 'used' : 'denied', c.by, c.now, c.approve ? 1 : 0, c.now, c.approve ? 1 : 0, c.jobId, c.id, c.team, c.subject, c.hash, c.now)
    .run();
  const row = await getApproval(db, c.team, c.id);
  if (r.meta.changes === 1 && row) return { ok: true, row };
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
  return {
    ok: false,
    refusal: {
      code: 'approval_used',
      message: `this approval prompt was already answered (${row.status}); an answer counts once — call again to be asked again`,
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

export const iso = (ms: number): string => new Date(ms).toISOString();

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
