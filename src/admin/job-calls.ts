/**
 * What a job ran and why it was allowed, for the admin job list and a job's page: the call's audit
 * row (one per governed job, in the team's Durable Object with the job itself) holds the redacted
 * command, the cwd and the policy's reason. The job's row keeps none of that.
 */
import type { Env } from '../env.ts';
import { auditRowsOfJobs } from '../dispatch/audit-client.ts';

/** The call behind a job: command as stored (argv array, `{ command, args, runtime }` or a shell string), cwd, the policy's verdict. */
export interface JobCall {
  command: unknown;
  cwd: string | null;
  /** `allowed` by a rule, or `approved` by a person after an `ask` (approvalId says which approval). */
  policy: { decision: 'allowed' | 'approved'; reason: string | null; approvalId: string | null };
  auditId: number;
}

export async function jobCalls(env: Env, team: string, jobIds: readonly string[]): Promise<Map<string, JobCall>> {
  const out = new Map<string, JobCall>();
  for (const x of await auditRowsOfJobs(env, team, jobIds)) {
    if (x.jobId === null) continue;
    out.set(x.jobId, {
      command: x.command,
      cwd: x.cwd,
      auditId: x.id,
      policy: { decision: x.approvalId ? 'approved' : 'allowed', reason: x.reason, approvalId: x.approvalId },
    });
  }
  return out;
}
