/**
 * A job as the team's Durable Object keeps it and as clients see it (job_status, job_list, the
 * admin API). Defined once; the DO writes it, the tools and admin routes return it.
 */
import { z } from 'zod';
import { AgentLabel, SandboxKind, TerminalState } from './agent-protocol.ts';

export { AgentLabel };

/** `refused`: never ran (queue deadline, queue full, no agent fits). Every job ends in a terminal state. */
export const JobState = z.enum(['queued', 'running', ...TerminalState.options, 'refused']);
export type JobState = z.infer<typeof JobState>;
const OPEN_STATES: readonly JobState[] = ['queued', 'running'];
export const isTerminal = (s: JobState): boolean => !OPEN_STATES.includes(s);
/** Finished jobs are kept this long (in the team's Durable Object) for job_status / job_output / job_list and tasks. */
export const JOB_RETENTION_MS = 7 * 24 * 3600_000;

/** The artifact has its own life: a slow upload never changes how the process ended. */
export const ArtifactState = z.enum(['none', 'uploading', 'complete', 'partial', 'failed']);
export type ArtifactState = z.infer<typeof ArtifactState>;
/** Ended, and no upload its exit announced is still running: its whole result (artifact included) is known. */
export const isSettled = (v: { state: JobState; artifact_state: ArtifactState }): boolean => isTerminal(v.state) && v.artifact_state !== 'uploading';
/**
 * One stream's artifact: `uploading` (the process ended, the upload runs), `complete` (stored
 * whole), `partial` (the upload failed or the agent was lost: `bytes` of its start are kept and
 * readable), `failed` (nothing kept), `none` (no output, or the job has not ended).
 */
export const StreamArtifact = z.object({ state: ArtifactState, bytes: z.number().int().min(0) });
export type StreamArtifact = z.infer<typeof StreamArtifact>;

/** Optional placement of a job: a given agent, and/or agents that carry all these labels. */
export const JobSelector = z.object({
  agent: z.string().min(1).max(128).optional(),
  labels: z.array(AgentLabel).max(16).optional(),
});
export type JobSelector = z.infer<typeof JobSelector>;

export const JobView = z.object({
  job_id: z.string(),
  state: JobState,
  tool: z.string(),
  subject: z.string(),
  background: z.boolean(),
  agent_id: z.string().nullable(),
  sandbox: SandboxKind.nullable(),
  created_at: z.number(),
  started_at: z.number().nullable(),
  ended_at: z.number().nullable(),
  exit_code: z.number().int().nullable(),
  signal: z.string().nullable(),
  timed_out: z.boolean(),
  duration_ms: z.number().nullable(),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  artifact_handle: z.string(),
  artifact_state: ArtifactState,
  /** Per stream: its artifact's state and the bytes of it kept (stored, or readable from the edge). */
  artifacts: z.object({ stdout: StreamArtifact, stderr: StreamArtifact }),
  stdout_bytes: z.number().int(),
  stderr_bytes: z.number().int(),
});
export type JobView = z.infer<typeof JobView>;

export const JobListFilter = z.object({
  state: JobState.optional(),
  subject: z.string().max(200).optional(),
  tool: z.string().max(64).optional(),
  /** Opaque cursor from the previous page (`next_cursor`). */
  cursor: z.string().max(64).optional(),
  limit: z.number().int().min(1).max(200).default(50),
});
export type JobListFilter = z.input<typeof JobListFilter>;

export const AgentView = z.object({
  agent_id: z.string(),
  subject: z.string(),
  state: z.enum(['connected', 'disconnected']),
  connected: z.boolean(),
  version: z.string(),
  sandbox: SandboxKind,
  capacity: z.number().int(),
  running: z.number().int(),
  labels: z.array(z.string()),
  runtimes: z.array(z.object({ name: z.string(), executable: z.string(), path: z.string(), version: z.string() })),
  connected_at: z.number(),
  last_seen: z.number(),
});
export type AgentView = z.infer<typeof AgentView>;
