/**
 * The job tables' first migrations, from when one store owned them all (`jobs`, `job_blobs`,
 * `job_output`, `job_artifacts`). Applied history: objects have them recorded under the capability
 * `jobs`, so they are never edited; the job rows (job-rows.ts) still run them for a new object.
 * Each table's owner today also creates its table (IF NOT EXISTS) in its own first migration:
 * `job_blobs` job-texts.ts, `job_output` live-output.ts, `job_artifacts` stream-artifacts.ts.
 */
import type { Migration } from './capability-host.ts';

export const JOB_TABLES_V1: readonly Migration[] = [
  {
    id: '1-jobs',
    // IF NOT EXISTS: an object whose tables predate the migration ledger keeps them and their rows.
    sql: [
      `CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, tool TEXT NOT NULL, subject TEXT NOT NULL, token_id TEXT NOT NULL,
    cancel_key TEXT NOT NULL, runtime TEXT, sandbox_min TEXT, sel_agent TEXT, sel_labels TEXT,
    background INTEGER NOT NULL, artifact_handle TEXT NOT NULL, state TEXT NOT NULL, agent TEXT, agent_subject TEXT,
    sandbox TEXT, created_at INTEGER NOT NULL, deadline INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER,
    orphaned_at INTEGER, timeout_ms INTEGER NOT NULL, max_concurrent INTEGER NOT NULL, exit TEXT,
    error_code TEXT, error_message TEXT, audit_id INTEGER, synced INTEGER NOT NULL DEFAULT 0,
    d1_created INTEGER NOT NULL DEFAULT 1)`,
      `CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, seq)`,
      `CREATE INDEX IF NOT EXISTS jobs_seq ON jobs (seq)`,
      `CREATE INDEX IF NOT EXISTS jobs_cancel ON jobs (cancel_key)`,
      // Large texts (spec, inline stdout/stderr, exit parts) split below the row limit.
      `CREATE TABLE IF NOT EXISTS job_blobs (job_id TEXT NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (job_id, kind, seq))`,
      // Live output relayed while the job runs (a BLOB per row; rows written before output went binary hold text), keyed by byte offset.
      `CREATE TABLE IF NOT EXISTS job_output (job_id TEXT NOT NULL, stream TEXT NOT NULL, offset INTEGER NOT NULL, bytes INTEGER NOT NULL,
    data TEXT NOT NULL, PRIMARY KEY (job_id, stream, offset))`,
      `CREATE TABLE IF NOT EXISTS job_artifacts (job_id TEXT NOT NULL, stream TEXT NOT NULL, state TEXT NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (job_id, stream))`,
    ],
  },
  {
    // Tables created before a job's first D1 copy wrote its rows itself: those rows exist already.
    id: '2-jobs-d1-created',
    sql: [`ALTER TABLE jobs ADD COLUMN d1_created INTEGER NOT NULL DEFAULT 1`],
  },
  {
    // The jobs' D1 copy is gone (the index and the audit log live here): its index would be kept up for nothing.
    id: '3-jobs-no-d1-copy',
    sql: [`DROP INDEX IF EXISTS jobs_unsynced`, `DELETE FROM job_blobs WHERE kind = 'audit'`],
  },
];
