/**
 * The D1 `jobs` table: the team-wide index of jobs (one row per job), and the completion of each
 * job's audit row. The team's Durable Object is the source of truth; it copies every state change
 * here (and retries until D1 took it), so every row reaches the job's final state. Env values are
 * never stored (names only), so a secret a caller passed does not end up in D1.
 */
import type { JobSpec } from '../contracts/agent-protocol.ts';
import type { JobView } from '../contracts/jobs.ts';
import { auditInsert, boundedJson, redactString, type AuditEntry } from './audit.ts';

/** The INSERT of a job's index row, from the job's spec (env values, code and stdin never stored). No-op if it exists. */
function jobCreatedInsert(db: D1Database, team: string, spec: JobSpec, v: Pick<JobView, 'tool' | 'subject' | 'created_at'>): D1PreparedStatement {
  const { code, stdin, env, ...rest } = spec;
  const stored = { ...rest, envNames: Object.keys(env), codeBytes: code?.length ?? 0, stdinBytes: stdin?.length ?? 0 };
  return db
    .prepare(
      `INSERT INTO jobs (team, id, tool, spec, state, agent, created_at, started_at, artifact_handle, subject)
       VALUES (?, ?, ?, ?, 'queued', NULL, ?, NULL, ?, ?)
       ON CONFLICT (team, id) DO NOTHING`,
    )
    .bind(team, spec.jobId, v.tool, boundedJson(stored), v.created_at, spec.artifactHandle, v.subject);
}

/**
 * A job's audit row: by its D1 id when the Worker wrote it (jobs recorded before the team's DO
 * wrote both rows), else by the job id (one row per governed job: migrations/0008).
 */
export type AuditRowRef = { id: number } | { jobId: string };

/** The tools whose audit rows are governed jobs': the WHERE of migrations/0008's unique index, so a lookup by job id uses it. */
const AUDIT_JOB_TOOLS = `('execute', 'runtime_execute', 'run_script')`;

/** How a job ended, as the audit log shows it. */
function exitStatusOf(v: Pick<JobView, 'state' | 'exit_code' | 'signal'>): string {
  if (v.state === 'exited') return `exit ${v.exit_code}`;
  if (v.state === 'signaled') return `signal ${v.signal}`;
  return v.state;
}

const FAILED_STATES = new Set(['lost', 'failed_to_start', 'refused']);

/**
 * Copies the DO's view of a job into D1 and, once it has ended, completes its audit row; with
 * `create`, first writes the job's index row and its call's audit row (each a no-op if there),
 * so a job that ends before its first copy costs one D1 batch in all.
 */
export async function syncJobToD1(
  db: D1Database,
  team: string,
  v: JobView,
  audit: AuditRowRef,
  create: { spec: JobSpec; audit: AuditEntry } | null,
): Promise<void> {
  const ended = v.ended_at !== null;
  const stmts = create ? [jobCreatedInsert(db, team, create.spec, v), auditInsert(db, create.audit)] : [];
  stmts.push(
    db
      .prepare(
        `UPDATE jobs SET state = ?, agent = ?, started_at = ?, exit_code = ?, signal = ?, duration_ms = ?, error = ?, ended_at = ?
       WHERE team = ? AND id = ?`,
      )
      .bind(
        v.state,
        v.agent_id,
        v.started_at,
        v.exit_code,
        v.signal,
        v.duration_ms === null ? null : Math.round(v.duration_ms),
        v.error?.message ?? null,
        v.ended_at,
        team,
        v.job_id,
      ),
  );
  const note = [v.agent_id ? `agent ${v.agent_id} (${v.sandbox})` : null, v.error ? `${v.error.code}: ${v.error.message}` : null].filter(Boolean).join('; ');
  stmts.push(
    db
      .prepare(
        `UPDATE audit SET decision = ?, exit_status = ?, duration_ms = ?, bytes = ?,
         reason = CASE WHEN ? = '' THEN reason WHEN reason IS NULL OR reason = '' THEN ? ELSE reason || '; ' || ? END
       WHERE ${'id' in audit ? 'id = ?' : `job_id = ? AND job_id IS NOT NULL AND tool IN ${AUDIT_JOB_TOOLS}`} AND team = ?`,
      )
      .bind(
        FAILED_STATES.has(v.state) ? 'failed' : 'allowed',
        ended ? exitStatusOf(v) : v.state,
        v.duration_ms === null ? null : Math.round(v.duration_ms),
        v.stdout_bytes + v.stderr_bytes,
        ended ? redactString(note) : '',
        redactString(note),
        redactString(note),
        'id' in audit ? audit.id : audit.jobId,
        team,
      ),
  );
  await db.batch(stmts);
}
