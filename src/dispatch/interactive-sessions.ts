/**
 * The team's interactive sessions: jobs whose stdin stays open for `job_input` (src/contracts/interactive.ts).
 * Owns `interactive_sessions`: who started each (only that subject may write), its limits from the policy at its
 * start, the next input's sequence number, whether stdin is closed, when it was last used and why it was stopped.
 * Durable, so a session outlives a restart of the object: the agent keeps the job and its stdin across the
 * reconnect, and the next write carries on with the next sequence number.
 *
 * A write goes to the job's agent as `job.input` and is answered by its `job.input.ack`; the sequence number is
 * advanced only by an ack, so a write whose ack was lost is sent again with the same number, and the agent writes
 * it once. Sessions have their own budget (`maxSessions`), an idle TTL and a lifetime, enforced by the alarm.
 */
import type { JobInputAck, SessionInput } from '../contracts/interactive.ts';
import type { InteractivePolicy } from '../contracts/interactive.ts';
import { isTerminal } from '../contracts/job-view.ts';
import type { ErrorCode } from '../contracts/errors.ts';
import type { AgentLink } from './agent-link.ts';
import { migrate, type DispatchHost, type Migration, type Wakes } from './capability-host.ts';
import type { JobRows } from './job-rows.ts';
import type { DispatchRequest } from './events.ts';

/** Writes a conversation lists at most (the first ones). */
const CONVERSATION_MAX_INPUTS = 1000;
/** How long a write waits for its agent's `job.input.ack` before the caller is told to retry. */
const INPUT_ACK_TIMEOUT_MS = 10_000;

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-sessions',
    sql: [
      `CREATE TABLE interactive_sessions (job_id TEXT PRIMARY KEY, subject TEXT NOT NULL, started_at INTEGER NOT NULL,
        last_active INTEGER NOT NULL, idle_ttl_ms INTEGER NOT NULL, ends_at INTEGER NOT NULL, max_input_bytes INTEGER NOT NULL,
        keep_text INTEGER NOT NULL, next_seq INTEGER NOT NULL DEFAULT 0, eof INTEGER NOT NULL DEFAULT 0, stop_reason TEXT,
        open INTEGER NOT NULL DEFAULT 1)`,
    ],
  },
  {
    // Each write of a session, where it fell in the job's stdout: the conversation the job views show.
    id: '2-inputs',
    sql: [
      `CREATE TABLE interactive_inputs (job_id TEXT NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL, bytes INTEGER NOT NULL,
        eof INTEGER NOT NULL, text TEXT, stdout_at INTEGER NOT NULL, PRIMARY KEY (job_id, seq))`,
    ],
  },
];

interface SessionRow {
  job_id: string;
  subject: string;
  started_at: number;
  last_active: number;
  idle_ttl_ms: number;
  ends_at: number;
  max_input_bytes: number;
  keep_text: number;
  next_seq: number;
  eof: number;
  stop_reason: string | null;
  open: number;
}

export type Refusal = { ok: false; code: ErrorCode; message: string };
/** A write's answer: its sequence number and whether stdin is now closed; `keepText`: the policy keeps the text in the audit. */
export type InputAnswer = { ok: true; seq: number; eof: boolean; keepText: boolean } | Refusal;

export interface SessionsParts {
  rows: Pick<JobRows, 'get'>;
  link: Pick<AgentLink, 'socketOf' | 'send'>;
  /** Stops a job (job.cancel with the reason, which its exit carries). */
  kill(jobId: string, reason: string): Promise<unknown>;
  /** Bytes of the job's stdout kept so far: where a write falls in the conversation. */
  stdoutAt(jobId: string): number;
}

export class InteractiveSessions implements Wakes {
  private readonly host: DispatchHost;
  private readonly p: SessionsParts;
  /** Open sessions' rows, read once per instance (few: bounded by maxSessions). */
  private cache: Map<string, SessionRow> | null = null;
  /** Writes sent and waiting for their ack, by `jobId/seq` (memory: a restart fails them, the caller retries). */
  private readonly pending = new Map<string, (a: JobInputAck | null) => void>();

  constructor(host: DispatchHost, parts: SessionsParts) {
    this.host = host;
    this.p = parts;
    migrate(host, 'interactive', MIGRATIONS);
  }

  private get sessions(): Map<string, SessionRow> {
    if (!this.cache) {
      const rows = this.host.sql.exec<SessionRow & Record<string, SqlStorageValue>>(`SELECT * FROM interactive_sessions WHERE open = 1`).toArray();
      this.cache = new Map(rows.map((r) => [r.job_id, { ...r }]));
    }
    return this.cache;
  }

  /** Whether the job is an interactive session (open or not: its concurrency budget is its own either way). */
  has(jobId: string): boolean {
    return this.sessions.has(jobId);
  }

  /** A new job: an interactive one's session is recorded, or refused when the team's are all in use; null for others. */
  open(req: Pick<DispatchRequest, 'spec' | 'subject' | 'session'>, now: number): Refusal | null {
    if (!req.spec.interactive || !req.session) return null;
    const refused = this.admit(req.session.maxSessions);
    if (!refused) this.start(req.spec.jobId, req.subject, req.session, now);
    return refused;
  }

  /** The refusal of a new session when the team's are all in use (jobs still queued or running). */
  private admit(maxSessions: number): Refusal | null {
    const live = [...this.sessions.keys()].filter((id) => {
      const row = this.p.rows.get(id);
      return row !== null && !isTerminal(row.state);
    }).length;
    if (live < maxSessions) return null;
    return {
      ok: false,
      code: 'session_limit',
      message: `the team has ${live} interactive session${live === 1 ? '' : 's'} open (interactive.maxSessions = ${maxSessions}); end one with job_input eof or job_kill, or raise the limit`,
    };
  }

  /** Records a new session for a job about to be submitted. */
  private start(jobId: string, subject: string, policy: InteractivePolicy, now: number): void {
    const row: SessionRow = {
      job_id: jobId,
      subject,
      started_at: now,
      last_active: now,
      idle_ttl_ms: policy.idleTtlMs,
      ends_at: now + policy.maxLifetimeMs,
      max_input_bytes: policy.maxInputBytes,
      keep_text: policy.auditInputText ? 1 : 0,
      next_seq: 0,
      eof: 0,
      stop_reason: null,
      open: 1,
    };
    this.host.sql.exec(
      `INSERT OR IGNORE INTO interactive_sessions (job_id, subject, started_at, last_active, idle_ttl_ms, ends_at, max_input_bytes, keep_text)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      jobId,
      subject,
      now,
      now,
      row.idle_ttl_ms,
      row.ends_at,
      row.max_input_bytes,
      row.keep_text,
    );
    if (!this.sessions.has(jobId)) this.sessions.set(jobId, row);
  }

  /** Why the session was stopped by the gateway (idle, lifetime), or null. */
  stopReason(jobId: string): string | null {
    return this.sessions.get(jobId)?.stop_reason ?? this.readRow(jobId)?.stop_reason ?? null;
  }

  /** The caller read the session's output: it is in use. */
  touch(jobId: string, subject: string, now: number): void {
    const s = this.sessions.get(jobId);
    if (!s || s.subject !== subject) return;
    s.last_active = now;
    this.host.sql.exec(`UPDATE interactive_sessions SET last_active = ? WHERE job_id = ?`, now, jobId);
  }

  /**
   * Writes `data` to the job's stdin (then closes it with `eof`) for `subject`, the subject that started it. A job
   * that is not this subject's is "not found", exactly as an unknown one, so its existence is not revealed.
   */
  async input(jobId: string, subject: string, data: Uint8Array, eof: boolean): Promise<InputAnswer> {
    const row = this.p.rows.get(jobId);
    const s = this.sessions.get(jobId) ?? this.readRow(jobId);
    if (!row || row.subject !== subject) return { ok: false, code: 'not_found', message: `Error: job "${jobId}" not found` };
    if (!s) {
      return {
        ok: false,
        code: 'conflict',
        message: `Error: job "${jobId}" is not interactive: its stdin was closed at start; start it with interactive: true to write to it`,
      };
    }
    if (isTerminal(row.state)) {
      const why = s.stop_reason ? ` (${s.stop_reason})` : '';
      return { ok: false, code: 'conflict', message: `Error: job "${jobId}" has ended (${row.state}${why}): its stdin is gone` };
    }
    if (s.eof) return { ok: false, code: 'conflict', message: `Error: the stdin of job "${jobId}" is closed (an earlier job_input sent eof)` };
    if (data.byteLength > s.max_input_bytes) {
      return {
        ok: false,
        code: 'payload_too_large',
        message: `Error: input of ${data.byteLength} bytes is over the team's limit of ${s.max_input_bytes} bytes (interactive.maxInputBytes); send it in smaller pieces`,
      };
    }
    if (row.state === 'queued') return { ok: false, code: 'conflict', message: `Error: job "${jobId}" has not started yet; write again once it runs` };
    const ws = row.agent ? this.p.link.socketOf(row.agent) : null;
    const seq = s.next_seq;
    const key = `${jobId}/${seq}`;
    const unreachable: Refusal = {
      ok: false,
      code: 'no_agent',
      message: `Error: the executor agent of job "${jobId}" (${row.agent}) is not connected now (it reconnects after a gateway restart); nothing was written, try again`,
    };
    if (!ws) return unreachable;
    const acked = new Promise<JobInputAck | null>((resolve) => {
      const timer = setTimeout(() => done(null), INPUT_ACK_TIMEOUT_MS);
      const done = (a: JobInputAck | null) => {
        clearTimeout(timer);
        this.pending.delete(key);
        resolve(a);
      };
      this.pending.get(key)?.(null);
      this.pending.set(key, done);
    });
    const sent = this.p.link.send(ws, { type: 'job.input', jobId, seq, data: base64(data), ...(eof ? { eof: true } : {}) });
    if (!sent) this.pending.get(key)?.(null);
    const ack = await acked;
    if (!ack) return unreachable;
    if (!ack.ok) return { ok: false, code: 'conflict', message: `Error: job "${jobId}" did not take the input: ${ack.error ?? 'refused by its agent'}` };
    const now = this.host.now();
    const closed = eof || s.eof === 1;
    // Another write may have advanced it meanwhile (a retry of the same seq): never backwards.
    s.next_seq = Math.max(s.next_seq, seq + 1);
    s.eof = closed ? 1 : 0;
    s.last_active = now;
    this.host.sql.exec(`UPDATE interactive_sessions SET next_seq = MAX(next_seq, ?), eof = ?, last_active = ? WHERE job_id = ?`, seq + 1, s.eof, now, jobId);
    this.host.sql.exec(
      `INSERT OR IGNORE INTO interactive_inputs (job_id, seq, at, bytes, eof, text, stdout_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      jobId,
      seq,
      now,
      data.byteLength,
      eof ? 1 : 0,
      s.keep_text ? new TextDecoder().decode(data) : null,
      this.p.stdoutAt(jobId),
    );
    return { ok: true, seq, eof: closed, keepText: s.keep_text === 1 };
  }

  /** An agent's `job.input.ack`; false when no write waits for it (late, or a stranger's). */
  acked(agentId: string, a: JobInputAck): boolean {
    const row = this.p.rows.get(a.jobId);
    const waiting = this.pending.get(`${a.jobId}/${a.seq}`);
    if (!waiting || row?.agent !== agentId) return false;
    waiting(a);
    return true;
  }

  /** Stops sessions idle past their TTL or past their lifetime; forgets those whose job ended. */
  async onAlarm(now: number): Promise<void> {
    for (const s of [...this.sessions.values()]) {
      const row = this.p.rows.get(s.job_id);
      if (!row || isTerminal(row.state)) {
        this.sessions.delete(s.job_id);
        this.host.sql.exec(`UPDATE interactive_sessions SET open = 0 WHERE job_id = ?`, s.job_id);
        continue;
      }
      if (s.stop_reason) continue;
      const reason =
        now >= s.ends_at
          ? `interactive session stopped: it reached its lifetime of ${s.ends_at - s.started_at} ms (interactive.maxLifetimeMs)`
          : now >= s.last_active + s.idle_ttl_ms
            ? `interactive session stopped: idle for ${now - s.last_active} ms, over its idle TTL of ${s.idle_ttl_ms} ms (interactive.idleTtlMs)`
            : null;
      if (!reason) continue;
      s.stop_reason = reason;
      this.host.sql.exec(`UPDATE interactive_sessions SET stop_reason = ? WHERE job_id = ?`, reason, s.job_id);
      await this.p.kill(s.job_id, reason);
    }
  }

  nextWake(now: number): number | null {
    let next: number | null = null;
    for (const s of this.sessions.values()) {
      // A stopped session waits for its job's end, which the jobs' own alarm watches; once a second is enough to forget it.
      const at = s.stop_reason ? now + 1000 : Math.min(s.ends_at, s.last_active + s.idle_ttl_ms);
      if (next === null || at < next) next = at;
    }
    return next;
  }

  /** A session's writes in order (null: not an interactive job): the text only where the policy keeps it. */
  conversation(jobId: string): SessionInput[] | null {
    if (!this.sessions.has(jobId) && !this.readRow(jobId)) return null;
    return this.host.sql
      .exec<{ seq: number; at: number; bytes: number; eof: number; text: string | null; stdout_at: number }>(
        `SELECT seq, at, bytes, eof, text, stdout_at FROM interactive_inputs WHERE job_id = ? ORDER BY seq LIMIT ${CONVERSATION_MAX_INPUTS}`,
        jobId,
      )
      .toArray()
      .map((r) => ({ seq: r.seq, at: r.at, bytes: r.bytes, eof: r.eof === 1, stdout_at: r.stdout_at, ...(r.text !== null ? { text: r.text } : {}) }));
  }

  /** Retention dropped these jobs: their sessions go with them. */
  forget(jobIds: readonly string[]): void {
    for (const id of jobIds) {
      this.sessions.delete(id);
      this.host.sql.exec(`DELETE FROM interactive_sessions WHERE job_id = ?`, id);
      this.host.sql.exec(`DELETE FROM interactive_inputs WHERE job_id = ?`, id);
    }
  }

  private readRow(jobId: string): SessionRow | null {
    const r = this.host.sql.exec<SessionRow & Record<string, SqlStorageValue>>(`SELECT * FROM interactive_sessions WHERE job_id = ?`, jobId).toArray();
    return r[0] ? { ...r[0] } : null;
  }
}

function base64(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}
