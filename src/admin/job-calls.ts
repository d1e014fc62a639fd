/**
 * What a job ran and why it was allowed, for the admin job list and a job's page: the call's audit
 * row (one per governed job, found by its job id through migrations/0008's unique index) holds the
 * redacted command, the cwd and the policy's reason. The job's row in the team's Durable Object
 * keeps none of that; the audit row reaches D1 a moment after the call, so a very new job may have
 * no `call` yet (null).
 */
import { parseJson } from '../store/audit.ts';

/** The call behind a job: command as stored (argv array, `{ command, args, runtime }` or a shell string), cwd, the policy's verdict. */
export interface JobCall {
  command: unknown;
  cwd: string | null;
  /** `allowed` by a rule, or `approved` by a person after an `ask` (approvalId says which approval). */
  policy: { decision: 'allowed' | 'approved'; reason: string | null; approvalId: string | null };
  auditId: number;
}

interface Row {
  id: number;
  job_id: string;
  command: string | null;
  cwd: string | null;
  reason: string | null;
  approval_id: string | null;
}

/** D1 binds at most 100 parameters per statement: job ids go in chunks below that. */
const CHUNK = 90;

export async function jobCalls(db: D1Database, team: string, jobIds: readonly string[]): Promise<Map<string, JobCall>> {
  const out = new Map<string, JobCall>();
  const ids = [...new Set(jobIds)];
  for (let i = 0; i < ids.length; i += CHUNK) {
    const part = ids.slice(i, i + CHUNK);
    const r = await db
      .prepare(
        `SELECT id, job_id, command, cwd, reason, approval_id FROM audit
         WHERE team = ? AND job_id IN (${part.map(() => '?').join(', ')}) AND job_id IS NOT NULL AND tool IN ('execute', 'runtime_execute', 'run_script')`,
      )
      .bind(team, ...part)
      .all<Row>();
    for (const x of r.results) {
      out.set(x.job_id, {
        command: parseJson(x.command),
        cwd: x.cwd,
        auditId: x.id,
        policy: { decision: x.approval_id ? 'approved' : 'allowed', reason: x.reason, approvalId: x.approval_id },
      });
    }
  }
  return out;
}
