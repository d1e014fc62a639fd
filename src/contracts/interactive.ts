/**
 * Interactive jobs: a background job whose stdin stays open so a client can answer prompts, feed a REPL or drive
 * a long-lived process (`job_input`), optionally on a pseudo-terminal (`tty`). Defined once here: the policy section,
 * the tool's input, the job's interactive part of its spec, and the agent protocol's `job.input` / `job.input.ack`.
 */
import { z } from 'zod';

/**
 * The agent protocol version that first carries `job.input` (and keeps an interactive job's stdin open). An agent
 * that said an older version in its hello never gets an interactive job: the scheduler refuses it with a message
 * naming the version (scheduler.ts `protocol`), since such an agent would close stdin at start and drop every input.
 */
export const INTERACTIVE_MIN_PROTOCOL = 5;

/** Ceiling of `interactive.maxInputBytes`: one input travels in one JSON text frame as base64 (4/3 of it). */
const INPUT_MAX_BYTES_CEILING = 1024 * 1024;
/** Ceiling of a pseudo-terminal's rows and columns (what terminals offer; larger is a typo). */
const TTY_MAX = 1000;

/**
 * The team policy's `interactive` section (docs/policy.md#interactive). Off by default: input to an interpreter
 * is code on stdin, which the argument screens refuse at start; an interactive session feeds it afterwards.
 */
export const InteractivePolicy = z.object({
  enabled: z.boolean().default(false),
  /** Interactive sessions the team may have open at once; counted apart from `limits.maxConcurrentJobs`. */
  maxSessions: z.number().int().min(1).max(64).default(2),
  /** A session nobody wrote to or read from for this long is stopped (its exit says why). */
  idleTtlMs: z
    .number()
    .int()
    .min(1_000)
    .max(24 * 3600_000)
    .default(10 * 60_000),
  /** A session is stopped this long after it started, however busy (it replaces the job's timeout). */
  maxLifetimeMs: z
    .number()
    .int()
    .min(1_000)
    .max(24 * 3600_000)
    .default(3600_000),
  /** Largest single `job_input` (bytes of its UTF-8 text). */
  maxInputBytes: z
    .number()
    .int()
    .min(1)
    .max(INPUT_MAX_BYTES_CEILING)
    .default(64 * 1024),
  /** Whether the audit row of a write keeps the text written (it always keeps its size and sha256). */
  auditInputText: z.boolean().default(false),
});
export type InteractivePolicy = z.infer<typeof InteractivePolicy>;
export const INTERACTIVE_DEFAULT: InteractivePolicy = InteractivePolicy.parse({});

/** A pseudo-terminal's size. */
export const TtySize = z.object({
  rows: z.number().int().min(1).max(TTY_MAX),
  cols: z.number().int().min(1).max(TTY_MAX),
});
export type TtySize = z.infer<typeof TtySize>;

/** The interactive part of a job's spec (JobSpec.interactive): stdin stays open; `tty` runs it on a pseudo-terminal. */
export const InteractiveSpec = z.object({ tty: TtySize.optional() });
export type InteractiveSpec = z.infer<typeof InteractiveSpec>;

/** What execute / runtime_execute take to start an interactive job (always in the background). */
export const InteractiveToolInput = {
  interactive: z
    .boolean()
    .optional()
    .describe('Keep stdin open: write to it with job_input (implies background; needs interactive.enabled in the team policy)'),
  tty: z.boolean().optional().describe('Run on a pseudo-terminal (implies interactive), for programs that need one'),
  rows: z.number().int().min(1).max(TTY_MAX).optional().describe('Terminal rows with tty (default 24)'),
  cols: z.number().int().min(1).max(TTY_MAX).optional().describe('Terminal columns with tty (default 80)'),
};

/** A terminal's size when `tty` gives none: the classic 24 × 80. */
const TTY_DEFAULT: TtySize = { rows: 24, cols: 80 };

/** The interactive part of a job from a tool's arguments (absent: not interactive). */
export function interactiveSpec(i: { interactive?: boolean; tty?: boolean; rows?: number; cols?: number }): InteractiveSpec | undefined {
  if (i.tty) return { tty: { rows: i.rows ?? TTY_DEFAULT.rows, cols: i.cols ?? TTY_DEFAULT.cols } };
  return i.interactive ? {} : undefined;
}

// ---- the job_input tool ----
export const JobInputInput = {
  job_id: z.string().min(1).max(64).describe('The job_id of an interactive job you started'),
  data: z
    .string()
    .max(INPUT_MAX_BYTES_CEILING)
    .describe('Text written to the job\'s stdin as UTF-8 (include "\\n" to end a line); the policy caps its size (interactive.maxInputBytes)'),
  eof: z.boolean().optional().describe("Close the job's stdin after writing data (the program then reads end of file)"),
};
export const JobInputOutput = {
  job_id: z.string(),
  /** Bytes written by this call. */
  bytes: z.number().int(),
  /** The write's sequence number in the job (0, 1, …). */
  seq: z.number().int(),
  /** True once stdin is closed. */
  eof: z.boolean(),
  sha256: z.string(),
};

/** One write of an interactive job, where it fell in the job's stdout (`stdout_at`, bytes): job_output's `inputs`. */
export const SessionInput = z.object({
  seq: z.number().int(),
  at: z.number(),
  bytes: z.number().int(),
  eof: z.boolean(),
  stdout_at: z.number().int(),
  /** The text written, only under `interactive.auditInputText`. */
  text: z.string().optional(),
});
export type SessionInput = z.infer<typeof SessionInput>;

// ---- agent protocol (PROTOCOL_VERSION 5) ----
/** Edge → agent: write `data` (base64) to the job's stdin as write number `seq` (0, 1, …), then close it with `eof`. */
export const JobInput = z.object({
  type: z.literal('job.input'),
  jobId: z.string().min(1).max(128),
  seq: z.number().int().min(0),
  // base64 of at most INPUT_MAX_BYTES_CEILING bytes
  data: z.string().max(Math.ceil(INPUT_MAX_BYTES_CEILING / 3) * 4),
  eof: z.boolean().optional(),
});
export type JobInput = z.infer<typeof JobInput>;

/**
 * Agent → edge: how write `seq` went. `ok`: written (a `seq` already written is acknowledged again without a second
 * write: the edge re-sends after a reconnect). Otherwise `error` says why (the job ended, its stdin is closed, a gap).
 */
export const JobInputAck = z.object({
  type: z.literal('job.input.ack'),
  jobId: z.string().max(128),
  seq: z.number().int().min(0),
  ok: z.boolean(),
  error: z.string().max(1000).optional(),
});
export type JobInputAck = z.infer<typeof JobInputAck>;
