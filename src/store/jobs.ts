/**
 * The `jobs` table: one row per dispatched job, written by the TeamDispatcher when the job
 * starts and when it ends. Env values are never stored (names only), so a secret a caller
 * passed does not end up in D1.
 */
import type { JobSpec } from '../contracts/agent-protocol.ts';

export interface JobCreateRecord {
  team: string;
  spec: JobSpec;
  tool: string;
  subject: string;
  at: number;
}

/** Written by the Worker before dispatch, so an artifact upload can never race ahead of its row. */
export async function recordJobCreated(db: D1Database, r: JobCreateRecord): Promise<void> {
  const { code, stdin, env, ...rest } = r.spec;
  const stored = { ...rest, envNames: Object.keys(env), codeBytes: code?.length ?? 0, stdinBytes: stdin?.length ?? 0 };
  await db
    .prepare(
      `INSERT INTO jobs (team, id, tool, spec, state, agent, created_at, started_at, artifact_handle, subject)
       VALUES (?, ?, ?, ?, 'queued', NULL, ?, NULL, ?, ?)
       ON CONFLICT (team, id) DO NOTHING`,
    )
    .bind(r.team, r.spec.jobId, r.tool, JSON.stringify(stored), r.at, r.spec.artifactHandle, r.subject)
    .run();
}

// Updates name (team, id): the primary key, so they never scan the table.
export async function recordJobRunning(db: D1Database, team: string, jobId: string, agentId: string, at: number): Promise<void> {
  await db.prepare(`UPDATE jobs SET state = 'running', agent = ?, started_at = ? WHERE team = ? AND id = ?`).bind(agentId, at, team, jobId).run();
}

export interface JobEndRecord {
  state: string;
  exitCode?: number | null;
  signal?: string | null;
  durationMs?: number;
  error?: string;
}

export async function recordJobEnd(db: D1Database, team: string, jobId: string, r: JobEndRecord): Promise<void> {
  await db
    .prepare(`UPDATE jobs SET state = ?, exit_code = ?, signal = ?, duration_ms = ?, error = ?, ended_at = ? WHERE team = ? AND id = ?`)
    .bind(r.state, r.exitCode ?? null, r.signal ?? null, r.durationMs ?? null, r.error ?? null, Date.now(), team, jobId)
    .run();
}

/** The job an artifact upload claims to belong to, if it is this team's. */
export async function findJobForArtifact(db: D1Database, team: string, jobId: string, handle: string): Promise<{ id: string } | null> {
  return db
    .prepare(`SELECT id FROM jobs WHERE team = ? AND id = ? AND artifact_handle = ?`)
    .bind(team, jobId, handle)
    .first<{ id: string }>();
}
