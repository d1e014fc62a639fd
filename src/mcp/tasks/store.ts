/**
 * The D1 `tasks` table: one row per job that became a task. The job itself (state, result,
 * output) stays in the team's Durable Object; this row says who may see it and how to shape its
 * result. Rows older than their TTL are deleted when the team creates its next task.
 */
import { TaskRecord } from '../../contracts/tasks.ts';

/** Writes a task's row (and drops the team's expired ones in the same batch); resolves once D1 has it. */
export async function saveTask(db: D1Database, t: TaskRecord): Promise<void> {
  await db.batch([
    db.prepare(`DELETE FROM tasks WHERE team = ? AND created_at + ttl_ms < ?`).bind(t.team, t.createdAt),
    db
      .prepare(`INSERT INTO tasks (team, task_id, subject, tool, shaping, created_at, ttl_ms) VALUES (?, ?, ?, ?, ?, ?, ?)`)
      .bind(t.team, t.taskId, t.subject, t.tool, JSON.stringify(t.shaping), t.createdAt, t.ttlMs),
  ]);
}

/** The task as its own team and subject see it; null for anyone else, and once its TTL is over. */
export async function findTask(db: D1Database, team: string, subject: string, taskId: string, now = Date.now()): Promise<TaskRecord | null> {
  const row = await db
    .prepare(`SELECT team, task_id, subject, tool, shaping, created_at, ttl_ms FROM tasks WHERE team = ? AND task_id = ? AND subject = ?`)
    .bind(team, taskId, subject)
    .first<{ team: string; task_id: string; subject: string; tool: string; shaping: string; created_at: number; ttl_ms: number }>();
  if (!row || row.created_at + row.ttl_ms < now) return null;
  const parsed = TaskRecord.safeParse({
    team: row.team,
    taskId: row.task_id,
    subject: row.subject,
    tool: row.tool,
    shaping: JSON.parse(row.shaping),
    createdAt: row.created_at,
    ttlMs: row.ttl_ms,
  });
  return parsed.success ? parsed.data : null;
}
