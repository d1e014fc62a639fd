/**
 * What a job row is (`JobRow`, `NewJob`) and how it is stored: its columns, the table a day of jobs
 * is kept in (keyed by the job id, WITHOUT ROWID, so an insert writes one row) and the migrations
 * of the `jobs` capability. The rows themselves are read and written by job-rows.ts.
 */
import type { JobSpec, SandboxKind } from '../contracts/agent-protocol.ts';
import type { JobState } from '../contracts/job-view.ts';
import type { Migration } from './capability-host.ts';
import { JOB_TABLES_V1 } from './job-tables-v1.ts';
import { segmentsTable } from './segments.ts';

export interface NewJob {
  spec: JobSpec;
  tool: string;
  subject: string;
  tokenId: string;
  cancelKey: string;
  runtime?: string;
  sandboxMinimum?: SandboxKind;
  selAgent?: string;
  selLabels?: string[];
  background: boolean;
  maxConcurrent: number;
  deadline: number;
  now: number;
  /** The id of the call's audit row (written with the job): its completion is found by primary key. */
  auditId?: number;
  /** Hours its output is kept, as the policy said at submit. */
  artifactHours?: number;
  /** The agent it starts on at once: the row is written running. */
  startOn?: { id: string; subject: string; sandbox: SandboxKind };
}

export interface JobRow {
  id: string;
  seq: number;
  tool: string;
  subject: string;
  token_id: string;
  cancel_key: string;
  runtime: string | null;
  sandbox_min: SandboxKind | null;
  sel_agent: string | null;
  sel_labels: string | null;
  background: number;
  artifact_handle: string;
  state: JobState;
  agent: string | null;
  agent_subject: string | null;
  sandbox: SandboxKind | null;
  created_at: number;
  deadline: number;
  started_at: number | null;
  ended_at: number | null;
  orphaned_at: number | null;
  timeout_ms: number;
  max_concurrent: number;
  exit: string | null;
  error_code: string | null;
  error_message: string | null;
  /** The spec's JSON when it fits the row (SPEC_ROW_MAX_CHARS); null: chunked in `job_blobs` (and in rows older than the column). */
  spec: string | null;
  /** The call's audit row; null in rows written before the job knew it. */
  audit_id: number | null;
  /** Hours its output is kept (artifacts its exit holds are recorded with it); null: the team's setting. */
  artifact_hours: number | null;
}

/** A job row's columns (the table from before segments has two more, unused). */
export const COLUMNS = `id, seq, tool, subject, token_id, cancel_key, runtime, sandbox_min, sel_agent, sel_labels, background,
    artifact_handle, state, agent, agent_subject, sandbox, created_at, deadline, started_at, ended_at, orphaned_at, timeout_ms,
    max_concurrent, exit, error_code, error_message, audit_id, spec, artifact_hours`;

/** A select of no row with the job columns (no table left to read). */
export const NO_ROW = `${COLUMNS.split(',')
  .map((c) => `NULL AS ${c.trim()}`)
  .join(', ')} WHERE 0`;

/** One day's jobs: keyed by the job id itself (WITHOUT ROWID), so an insert writes one row and nothing else. */
export const DAY_TABLE = (t: string) => [
  `CREATE TABLE ${t} (id TEXT NOT NULL PRIMARY KEY, seq INTEGER NOT NULL, tool TEXT NOT NULL, subject TEXT NOT NULL,
    token_id TEXT NOT NULL, cancel_key TEXT NOT NULL, runtime TEXT, sandbox_min TEXT, sel_agent TEXT, sel_labels TEXT,
    background INTEGER NOT NULL, artifact_handle TEXT NOT NULL, state TEXT NOT NULL, agent TEXT, agent_subject TEXT,
    sandbox TEXT, created_at INTEGER NOT NULL, deadline INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER,
    orphaned_at INTEGER, timeout_ms INTEGER NOT NULL, max_concurrent INTEGER NOT NULL, exit TEXT,
    error_code TEXT, error_message TEXT, audit_id INTEGER, spec TEXT, artifact_hours REAL) WITHOUT ROWID`,
];

export const MIGRATIONS: readonly Migration[] = [
  ...JOB_TABLES_V1,
  {
    // The spec goes in the row (no chunk row per job); open jobs and cancel keys are looked up in memory, so
    // the state and cancel-key indexes only cost rows written (one per submit, two more per start and end).
    id: '4-jobs-spec-in-row',
    sql: [`ALTER TABLE jobs ADD COLUMN spec TEXT`, `DROP INDEX IF EXISTS jobs_cancel`, `DROP INDEX IF EXISTS jobs_state`],
  },
  {
    // Rows of new jobs go to a table per day (DAY_TABLE); this one keeps the jobs written before, read until retention drops it.
    id: '5-jobs-by-day',
    sql: [segmentsTable('jobs'), `ALTER TABLE jobs ADD COLUMN artifact_hours REAL`],
  },
];
