/**
 * What the Worker asks the TeamDispatcher (Workers RPC arguments) and the events the DO streams
 * back for one job (NDJSON lines on a byte ReadableStream). Defined once here; the DO writes
 * them, the Worker reads them.
 */
import type { AuditRow } from '../store/audit.ts';
import type { AuditExportBatch } from './retention.ts';
import type { StorageView } from '../contracts/audit.ts';
import { z } from 'zod';
import { JobExit, JobSpec, SandboxKind, StreamName } from '../contracts/agent-protocol.ts';
import { AgentLabel, type JobView } from '../contracts/job-view.ts';
import { ErrorCodeSchema, type ErrorCode } from '../contracts/errors.ts';
import { InteractivePolicy } from '../contracts/interactive.ts';

export const DispatchRequest = z.object({
  spec: JobSpec,
  /** Identifies the MCP call so `notifications/cancelled` (another HTTP request) can find the job. */
  cancelKey: z.string().min(1),
  /** Runtime the job needs on the agent (code mode / runtime_execute), if any. */
  runtime: z.string().optional(),
  tool: z.string(),
  subject: z.string(),
  tokenId: z.string(),
  maxConcurrentJobs: z.number().int().positive(),
  /** How long the job may wait in the queue (for a free slot or for an agent to connect). */
  queueWaitMs: z.number().int().min(0),
  maxQueueLength: z.number().int().min(0),
  /** The team policy's sandbox floor: agents with weaker isolation never get the job. */
  sandboxMinimum: SandboxKind.optional(),
  agent: z.string().min(1).max(128).optional(),
  labels: z.array(AgentLabel).max(16).optional(),
  background: z.boolean(),
  /** An interactive job (spec.interactive set): the policy's session limits at its start (src/contracts/interactive.ts). */
  session: InteractivePolicy.optional(),
  /** Hours the job's output is kept (the policy's `retention.artifactHours`); absent: the team's setting in its object. */
  artifactHours: z
    .number()
    .min(1)
    .max(24 * 90)
    .optional(),
  /**
   * The call's audit row as accepted (decision `allowed`, the job `queued`): the object writes it with
   * the job and completes it when the job ends.
   */
  audit: z.object({
    at: z.number().int(),
    reason: z.string(),
    command: z.unknown(),
    cwd: z.string().optional(),
    parentJobId: z.string().optional(),
    approvalId: z.string().optional(),
  }),
});
export type DispatchRequest = z.infer<typeof DispatchRequest>;

export const DispatchEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('queued'), jobId: z.string(), position: z.number().int() }),
  z.object({ type: z.literal('started'), jobId: z.string(), agentId: z.string(), sandbox: SandboxKind }),
  z.object({ type: z.literal('output'), stream: StreamName, data: z.string() }),
  z.object({ type: z.literal('exit'), exit: JobExit, agentId: z.string(), sandbox: SandboxKind }),
  z.object({ type: z.literal('error'), code: ErrorCodeSchema, message: z.string() }),
]);
export type DispatchEvent = z.infer<typeof DispatchEvent>;

export type SubmitAnswer = { ok: true; jobId: string; state: 'queued' | 'running'; agentId: string | null } | { ok: false; code: ErrorCode; message: string };

export type UploadAnswer =
  | { ok: true }
  | { ok: false; status: 404 | 409; code: 'not_found' | 'conflict'; message: string }
  | { ok: false; status: 403; code: 'forbidden'; message: string };
export type UploadRefusal = Extract<UploadAnswer, { ok: false }> | { ok: false; status: 400; code: 'invalid_argument'; message: string };

/**
 * Who asks to write which stream of which job's artifact: the agent token's subject, and the agent
 * id and upload token the request carries (the job's `UploadGrant`; '' when absent).
 */
export interface UploadWho {
  jobId: string;
  handle: string;
  stream: StreamName;
  subject: string;
  agentId: string;
  uploadToken: string;
}
/** An R2 multipart upload the edge keeps for a stream. */
export interface MultipartRef {
  uploadId: string;
  key: string;
}
export interface MultipartShape {
  bytes: number;
  partBytes: number;
  lines: number;
  truncated: boolean;
}

/** Starting a multipart upload: resume the one the edge holds (same shape), or make a new one (aborting `replace`). */
export type MultipartBeginAnswer =
  | { ok: true; resume: MultipartRef & { done: number[] } }
  | { ok: true; resume: null; replace: MultipartRef | null }
  | UploadRefusal;
export type MultipartPartAnswer = ({ ok: true } & MultipartRef) | UploadRefusal;
export type MultipartFinishAnswer = ({ ok: true; parts: { partNumber: number; etag: string }[] } & MultipartRef & MultipartShape) | UploadRefusal;
export type MultipartAbandonAnswer = { ok: true; upload: MultipartRef | null } | UploadRefusal;

/** Output the team's DO keeps for a job: live-relayed bytes, or an ended job's inline result when that holds more. */
export interface KeptOutput {
  data: Uint8Array;
  /** Bytes kept so far. */
  total: number;
  source: 'live' | 'result';
}

/** What the dashboard's landing page asks the team's object (src/admin/overview.ts). */
export interface TeamOverviewQuery {
  /** Jobs and calls since then are counted. */
  since: number;
  /** The newest denials shown. */
  recent: number;
  /** Failed jobs since then, at most `failures` of them. */
  failuresSince: number;
  failures: number;
}

export interface TeamOverview {
  jobsByState: Record<string, number>;
  denials: { calls: number; denied: number; recent: AuditRow[] };
  failures: JobView[];
  /** The team's storage and what retention drops next. */
  storage: StorageView;
}

/** One page of the audit export as the team's object answers it (the edge reads the batches from R2). */
export interface AuditExportPage {
  /** The row id the page starts after (resolved from `since`). */
  after: number;
  /** Exported batches holding rows after `after`, oldest first: read them before any row below. */
  batches: AuditExportBatch[];
  /** With no batch left: the rows still in the object after `after`, oldest first. */
  rows: AuditRow[];
}
