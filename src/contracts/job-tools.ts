/**
 * Input and output shapes of the background-job tools (job_status, job_output, job_kill,
 * job_list), defined once and used by the MCP server for validation and advertised schemas.
 */
import { z } from 'zod';
import { JobState, JobView } from './job-view.ts';
import { JobNetworkView } from './network.ts';
import { OutputWaitInput } from './output-wait.ts';
import { SessionInput } from './interactive.ts';

const JOB_STATUS_MAX_WAIT_MS = 60_000;
export const JOB_OUTPUT_DEFAULT_BYTES = 64 * 1024;
const JOB_OUTPUT_MAX_BYTES = 1024 * 1024;

const JobId = z.string().min(1).max(64).describe('The job_id an execute / runtime_execute call answered with');

export const JobStatusInput = {
  job_id: JobId,
  wait_ms: z
    .number()
    .int()
    .min(0)
    .max(JOB_STATUS_MAX_WAIT_MS)
    .optional()
    .describe(`Wait up to this long (≤ ${JOB_STATUS_MAX_WAIT_MS} ms) for the job to end before answering`),
};
export const JobStatusOutput = {
  ...JobView.shape,
  /** The job's network grant and the connections its egress proxy reported (absent for a job without either on record). */
  network: JobNetworkView.optional(),
};

export const JobOutputInput = {
  job_id: JobId,
  stream: z.enum(['stdout', 'stderr']).optional().describe('stdout (default) or stderr'),
  offset: z.number().int().min(0).optional().describe('Byte offset to read from (default 0); pass next_offset to continue'),
  max_bytes: z.number().int().min(1).max(JOB_OUTPUT_MAX_BYTES).optional().describe(`Bytes to return at most (default ${JOB_OUTPUT_DEFAULT_BYTES})`),
  ...OutputWaitInput,
};
export const JobOutputOutput = {
  job_id: z.string(),
  stream: z.enum(['stdout', 'stderr']),
  state: JobState,
  data: z.string(),
  offset: z.number().int(),
  next_offset: z.number().int(),
  /** True once nothing more will ever be readable past next_offset. */
  eof: z.boolean(),
  /**
   * live: what the edge kept of the live output (the first 16 MiB of the stream) — while the job runs, while its
   * artifact uploads, and after the upload failed or the agent was lost; artifact: the stored full stream;
   * result: the job ended without a stored artifact and its inline result holds more than the live output.
   */
  source: z.enum(['live', 'artifact', 'result', 'none']),
  total_bytes: z.number().int().nullable(),
  /** With wait_ms: why the wait ended (output came, until was seen, the job ended, or the time ran out). */
  waited: z.enum(['output', 'until', 'ended', 'timeout']).optional(),
  /** With wait_ms, for an interactive job: its writes so far, each placed in stdout (the conversation). */
  inputs: z.array(SessionInput).optional(),
};

export const JobKillInput = {
  job_id: JobId,
  reason: z.string().max(500).optional(),
};
export const JobKillOutput = {
  job_id: z.string(),
  state: JobState,
  /** True when the kill was delivered (a queued job is cancelled at once; a running one ends `cancelled`). */
  signalled: z.boolean(),
};

export const JobListInput = {
  state: JobState.optional(),
  subject: z.string().max(200).optional(),
  tool: z.string().max(64).optional(),
  cursor: z.string().max(64).optional().describe('next_cursor of the previous page'),
  limit: z.number().int().min(1).max(200).optional(),
};
export const JobListOutput = {
  jobs: z.array(JobView),
  next_cursor: z.string().nullable(),
};
