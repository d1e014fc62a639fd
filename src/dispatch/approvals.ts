/**
 * The team's approvals (policy `ask` decisions and a job's egress asks), kept in the object's
 * `approvals` table. What a decision, a use or a prompt's answer does to one is decided by the pure
 * rules in src/approval/record.ts; each is applied here in one synchronous step (read the row, apply
 * the rule, write the row, with no await between), so two retries racing for one approval cannot
 * both use it. The edge reaches this through the object's RPC methods (team-records-client.ts).
 *
 * Rows are dropped APPROVAL_RETENTION_MS after they ended (used, denied, or ran out: `kept_until`),
 * by the object's alarm. Audit rows name approvals by id and are the audit log's own.
 */
import { z } from 'zod';
import type { ApprovalStatus } from '../contracts/approvals.ts';
import {
  answerPrompt,
  consume,
  decide,
  keptUntil,
  newApproval,
  reusable,
  type AdminDecision,
  type ApprovalOutcome,
  type ApprovalRow,
  type OpenApproval,
  type UseApproval,
} from '../approval/record.ts';
import { migrate, type SqlHost, type Migration, type Wakes } from './capability-host.ts';

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-approvals',
    sql: [
      `CREATE TABLE approvals (id TEXT PRIMARY KEY, subject TEXT NOT NULL, token_id TEXT, tool TEXT NOT NULL, request_hash TEXT NOT NULL,
    summary TEXT NOT NULL, rule_reason TEXT NOT NULL, channel TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    decided_by TEXT, decided_at INTEGER, decision_note TEXT, used_at INTEGER, job_id TEXT, kept_until INTEGER NOT NULL)`,
      `CREATE INDEX approvals_created ON approvals (created_at)`,
      `CREATE INDEX approvals_request ON approvals (subject, request_hash)`,
      `CREATE INDEX approvals_kept ON approvals (kept_until)`,
    ],
  },
];

const COLUMNS = [
  'id',
  'subject',
  'token_id',
  'tool',
  'request_hash',
  'summary',
  'rule_reason',
  'channel',
  'status',
  'created_at',
  'expires_at',
  'decided_by',
  'decided_at',
  'decision_note',
  'used_at',
  'job_id',
] as const satisfies readonly (keyof ApprovalRow)[];

/** Rows one list returns at most (the admin API asks for up to 200). */
const LIST_MAX = 500;

export interface ApprovalListFilter {
  status?: ApprovalStatus;
  limit: number;
  now: number;
}

/**
 * One row of D1's old `approvals` table (migrations/0006_approvals.sql, `SELECT *`), for `import`;
 * its `team` column, if present, is ignored (the object is the team's). A stored `expired` status
 * is read as the row's last live state: expiry is computed from `expires_at`.
 */
const ApprovalImportRow = z.object({
  id: z.string().min(1),
  subject: z.string(),
  token_id: z.string().nullable(),
  tool: z.string(),
  request_hash: z.string(),
  summary: z.string(),
  rule_reason: z.string(),
  channel: z.enum(['admin', 'elicitation']),
  status: z.enum(['pending', 'approved', 'denied', 'used', 'expired']),
  created_at: z.number().int(),
  expires_at: z.number().int(),
  decided_by: z.string().nullable(),
  decided_at: z.number().int().nullable(),
  decision_note: z.string().nullable(),
  used_at: z.number().int().nullable(),
  job_id: z.string().nullable(),
});

export class Approvals implements Wakes {
  private readonly host: SqlHost;
  private readonly onDecided: (row: ApprovalRow, now: number) => void;
  /**
   * The soonest `kept_until`, read once and then kept up to date by this capability's own writes (the object
   * asks `nextWake` after every placement: no statement then). It may only be too early, which costs one empty alarm.
   */
  private soonest: number | null | undefined;

  /** `onDecided`: an admin decided one (a job's egress ask may be waiting on it). */
  constructor(host: SqlHost, o: { onDecided?: (row: ApprovalRow, now: number) => void } = {}) {
    this.host = host;
    this.onDecided = o.onDecided ?? (() => {});
    migrate(host, 'approvals', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /** A pending approval for this exact request: the caller's pending admin one if there is one, else a new one. */
  open(o: OpenApproval): { row: ApprovalRow; reused: boolean } {
    if (o.channel === 'admin') {
      const existing = this.rows(`WHERE subject = ? AND request_hash = ? ORDER BY created_at DESC`, o.subject, o.hash).find((r) => reusable(r, o));
      if (existing) return { row: existing, reused: true };
    }
    const row = newApproval(o);
    this.write(row, 'INSERT');
    return { row, reused: false };
  }

  get(id: string): ApprovalRow | null {
    return this.rows('WHERE id = ?', id)[0] ?? null;
  }

  /** Newest first. */
  list(f: ApprovalListFilter): ApprovalRow[] {
    const where: string[] = [];
    const params: SqlStorageValue[] = [];
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
    const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
    return this.rows(`${clause} ORDER BY created_at DESC, id LIMIT ?`, ...params, Math.min(Math.max(1, f.limit), LIST_MAX));
  }

  /** An admin's decision (admin API, CLI, dashboard). */
  decide(id: string, d: AdminDecision): ApprovalOutcome {
    const r = decide(this.get(id), id, d);
    if (r.ok) {
      this.write(r.row);
      this.onDecided(r.row, d.now);
    }
    return r;
  }

  /** A caller's retry with the id of an approved approval: used once, for this run. */
  consume(c: UseApproval): ApprovalOutcome {
    const r = consume(this.get(c.id), c);
    if (r.ok) this.write(r.row);
    return r;
  }

  /** The client's user answered the approval prompt. */
  answerPrompt(c: UseApproval & { approve: boolean; by: string }): ApprovalOutcome {
    const r = answerPrompt(this.get(c.id), c);
    if (r.ok) this.write(r.row);
    return r;
  }

  /** Stores a row the rules changed (egress.ts uses an approved egress approval this way). */
  update(row: ApprovalRow): void {
    this.write(row);
  }

  /** Drops the rows past their `kept_until`. */
  onAlarm(now: number): void {
    this.sql.exec(`DELETE FROM approvals WHERE kept_until <= ?`, now);
    this.soonest = undefined;
  }

  nextWake(_now: number): number | null {
    if (this.soonest === undefined) this.soonest = this.sql.exec<{ at: number | null }>(`SELECT MIN(kept_until) AS at FROM approvals`).one().at;
    return this.soonest;
  }

  /** Old rows (D1's `approvals`) taken in; a row whose id is here already is left as it is. Malformed rows are counted, not stored. */
  import(rows: readonly unknown[]): { inserted: number; refused: number } {
    let inserted = 0;
    let refused = 0;
    this.host.transactionSync(() => {
      for (const raw of rows) {
        const p = ApprovalImportRow.safeParse(raw);
        if (!p.success) {
          refused += 1;
          continue;
        }
        const { status, ...rest } = p.data;
        const row: ApprovalRow = { ...rest, status: status === 'expired' ? (rest.decided_at === null ? 'pending' : 'approved') : status };
        if (this.write(row, 'INSERT OR IGNORE')) inserted += 1;
      }
    });
    this.soonest = undefined;
    return { inserted, refused };
  }

  /** True when a row was written (an ignored insert writes none). */
  private write(row: ApprovalRow, verb: 'INSERT' | 'INSERT OR IGNORE' | 'INSERT OR REPLACE' = 'INSERT OR REPLACE'): boolean {
    if (this.soonest !== undefined) this.soonest = Math.min(this.soonest ?? Infinity, keptUntil(row));
    return (
      this.sql.exec(
        `${verb} INTO approvals (${COLUMNS.join(', ')}, kept_until) VALUES (${COLUMNS.map(() => '?').join(', ')}, ?)`,
        ...COLUMNS.map((c) => row[c]),
        keptUntil(row),
      ).rowsWritten > 0
    );
  }

  private rows(clause: string, ...params: SqlStorageValue[]): ApprovalRow[] {
    return this.sql
      .exec<ApprovalRow & Record<string, SqlStorageValue>>(`SELECT ${COLUMNS.join(', ')} FROM approvals ${clause}`, ...params)
      .toArray()
      .map((r) => ({ ...r }));
  }
}
