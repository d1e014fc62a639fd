/**
 * The edge's side of interactive jobs: write to a job's stdin, and wait for its output.
 * The small API `job_input`, `job_output` and anything else that drives a long-lived process (a script's stdio MCP
 * server) use; every call goes to the team's Durable Object (interactive-sessions.ts, output-wait.ts). A job's stdout
 * as a stream is a loop of waitJobOutput (new bytes past an offset) and readJobOutput (job-output.ts) from that offset.
 */
import type { Env } from '../env.ts';
import { teamStub } from './client.ts';
import type { InputAnswer } from './interactive-sessions.ts';
import type { OutputWaitEnd, OutputWaitQuery } from './output-wait.ts';
import { OUTPUT_WAIT_MAX_MS } from '../contracts/output-wait.ts';
import type { SessionInput } from '../contracts/interactive.ts';

export type { InputAnswer, OutputWaitEnd, OutputWaitQuery };

/**
 * Writes `data` to the stdin of interactive job `jobId` as `subject` (only the subject that started it may), then
 * closes stdin when `eof`. Answers the write's sequence number, or a refusal with its code (not_found, conflict,
 * payload_too_large, no_agent: nothing was written, retry).
 */
export async function writeJobStdin(env: Env, team: string, jobId: string, subject: string, data: Uint8Array, eof = false): Promise<InputAnswer> {
  return await teamStub(env, team).jobInput(jobId, subject, data, eof);
}

/**
 * Waits (≤ OUTPUT_WAIT_MAX_MS) until the job's output past `offset` is non-empty or holds `until`, or the job ends;
 * answers why, with an interactive job's writes so far (null for another job).
 */
export async function waitJobOutput(
  env: Env,
  team: string,
  q: OutputWaitQuery,
  subject: string,
): Promise<{ waited: OutputWaitEnd; inputs: SessionInput[] | null }> {
  return await teamStub(env, team).awaitOutput({ ...q, waitMs: Math.min(q.waitMs, OUTPUT_WAIT_MAX_MS) }, subject);
}
