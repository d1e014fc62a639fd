/**
 * The D1 `jobs` table: the team-wide index of jobs (one row per job), and the completion of each
 * job's audit row. The team's Durable Object is the source of truth; it copies every state change
 * here (and retries until D1 took it), so every row reaches the job's final state. Env values are
 * never stored (names only), so a secret a caller passed does not end up in D1.
 */
import type { JobSpec } from '../contracts/agent-protocol.ts';
import type { JobView } from '../contracts/jobs.ts';
import { auditInsert, redactString, type AuditEntry } from './audit.ts';

export interface JobCreateRecord {
  team: string;
  spec: JobSpec;
  tool: string;
  subject: string;
  at: number;
}

/** The INSERT of a new job's row (written by the Worker before it submits the job to the team's DO), to batch with the call's audit row (one round trip). */
export function jobCreatedInsert(db: D1Database, r: JobCreateRecord): D1PreparedStatement {
  const { code, stdin, env, ...rest } = r.spec;
  const stored = { ...rest, envNames: Object.keys(env), codeBytes: code?.length ?? 0, stdinBytes: stdin?.length ?? 0 };
  return db
    .prepare(
      `INSERT INTO jobs (team, id, tool, spec, state, agent, created_at, started_at, artifact_handle, subject)
       VALUES (?, ?, ?, ?, 'queued', NULL, ?, NULL, ?, ?)
       ON CONFLICT (team, id) DO NOTHING`,
    )
    .bind(r.team, r.spec.jobId, r.tool, JSON.stringify(stored), r.at, r.spec.artifactHandle, r.subject);
}

/** Writes a new job's row and its call's audit row in one batch (one transaction); returns the audit row's id. */
export async function recordJobAndAudit(db: D1Database, job: JobCreateRecord, audit: AuditEntry): Promise<number | null> {
  const [, a] = await db.batch([jobCreatedInsert(db, job), auditInsert(db, audit)]);
  const id = a.meta?.last_row_id;
  return typeof id === 'number' ? id : null;
}

/** How a job ended, as the audit log shows it. */
export function exitStatusOf(v: Pick<JobView, 'state' | 'exit_code' | 'signal'>): string {
  if (v.state === 'exited') return `exit ${v.exit_code}`;
  if (v.state === 'signaled') return `signal ${v.signal}`;
  return v.state;
}

const FAILED_STATES = new Set(['lost', 'failed_to_start', 'refused']);

/** Copies the DO's view of a job into D1 and, once it has ended, completes its audit row. */
export async function syncJobToD1(db: D1Database, team: string, v: JobView, auditId: number | null): Promise<void> {
  const ended = v.ended_at !== null;
  const stmts = [
    db.prepare(
      `UPDATE jobs SET state = ?, agent = ?, started_at = ?, exit_code = ?, signal = ?, duration_ms = ?, error = ?, ended_at = ?
       WHERE team = ? AND id = ?`,
    ).bind(v.state, v.agent_id, v.started_at, v.exit_code, v.signal, v.duration_ms === null ? null : Math.round(v.duration_ms),
      v.error?.message ?? null, v.ended_at, team, v.job_id),
  ];
  if (auditId !== null) {
    const note = [v.agent_id ? `agent ${v.agent_id} (${v.sandbox})` : null, v.error ? `${v.error.code}: ${v.error.message}` : null].filter(Boolean).join('; ');
    stmts.push(
      db.prepare(
        `UPDATE audit SET decision = ?, exit_status = ?, duration_ms = ?, bytes = ?,
           reason = CASE WHEN ? = '' THEN reason WHEN reason IS NULL OR reason = '' THEN ? ELSE reason || '; ' || ? END
         WHERE id = ? AND team = ?`,
      ).bind(
        FAILED_STATES.has(v.state) ? 'failed' : 'allowed', ended ? exitStatusOf(v) : v.state,
        v.duration_ms === null ? null : Math.round(v.duration_ms), v.stdout_bytes + v.stderr_bytes,
        ended ? redactString(note) : '', redactString(note), redactString(note), auditId, team,
      ),
    );
  }
  await db.batch(stmts);
}

/** Completes an audit row whose job never reached the team's DO (the dispatch itself failed). */
export async function failAudit(db: D1Database, team: string, auditId: number, reason: string): Promise<void> {
  await db.prepare(
    `UPDATE audit SET decision = 'failed', exit_status = 'failed_to_dispatch',
       reason = CASE WHEN reason IS NULL OR reason = '' THEN ? ELSE reason || '; ' || ? END
     WHERE id = ? AND team = ? AND exit_status = 'queued'`,
  ).bind(redactString(reason), redactString(reason), auditId, team).run();
}
