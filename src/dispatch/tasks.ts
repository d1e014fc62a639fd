/**
 * The team's MCP tasks (`io.modelcontextprotocol/tasks`), kept in the object's `tasks` table: one
 * row per job that became a task (task id = job id). The job itself (state, result, output) is the
 * job store's; this row says who may see the task and how to shape its result. A task is found only
 * by the subject that created it, until its TTL is over; the alarm drops it then.
 */
import { z } from 'zod';
import { TaskRecord } from '../contracts/tasks.ts';
import { migrate, type Migration, type SqlHost, type Wakes } from './capability-host.ts';

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-tasks',
    sql: [
      `CREATE TABLE tasks (task_id TEXT PRIMARY KEY, subject TEXT NOT NULL, tool TEXT NOT NULL, shaping TEXT NOT NULL,
    created_at INTEGER NOT NULL, ttl_ms INTEGER NOT NULL, expires_at INTEGER NOT NULL)`,
      `CREATE INDEX tasks_expiry ON tasks (expires_at)`,
    ],
  },
];

/** A task as the team's object keeps it (the object is the team's: the edge adds the team). */
export const TeamTask = TaskRecord.omit({ team: true });
export type TeamTask = z.infer<typeof TeamTask>;

/** One row of D1's old `tasks` table (migrations/0007_tasks.sql, `SELECT *`), for `import`; its `team` column is ignored. */
const TaskImportRow = z.object({
  task_id: z.string().min(1),
  subject: z.string(),
  tool: z.string(),
  /** JSON text, as D1 kept it. */
  shaping: z.string(),
  created_at: z.number().int(),
  ttl_ms: z.number().int(),
});

interface Row {
  task_id: string;
  subject: string;
  tool: string;
  shaping: string;
  created_at: number;
  ttl_ms: number;
}

export class Tasks implements Wakes {
  private readonly host: SqlHost;
  /** The soonest expiry, read once and then kept up to date by this capability's own writes (`nextWake` is asked after every placement). */
  private soonest: number | null | undefined;

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'tasks', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  save(t: TeamTask): void {
    if (this.soonest !== undefined) this.soonest = Math.min(this.soonest ?? Infinity, t.createdAt + t.ttlMs);
    this.sql.exec(
      `INSERT OR REPLACE INTO tasks (task_id, subject, tool, shaping, created_at, ttl_ms, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      t.taskId,
      t.subject,
      t.tool,
      JSON.stringify(t.shaping),
      t.createdAt,
      t.ttlMs,
      t.createdAt + t.ttlMs,
    );
  }

  /** The task as the subject that created it sees it; null for anyone else, and once its TTL is over. */
  find(subject: string, taskId: string, now: number): TeamTask | null {
    const row = this.sql
      .exec<Row & Record<string, SqlStorageValue>>(
        `SELECT task_id, subject, tool, shaping, created_at, ttl_ms FROM tasks WHERE task_id = ? AND subject = ? AND expires_at >= ?`,
        taskId,
        subject,
        now,
      )
      .toArray()[0];
    if (!row) return null;
    let shaping: unknown;
    try {
      shaping = JSON.parse(row.shaping);
    } catch {
      return null;
    }
    const parsed = TeamTask.safeParse({ taskId: row.task_id, subject: row.subject, tool: row.tool, shaping, createdAt: row.created_at, ttlMs: row.ttl_ms });
    return parsed.success ? parsed.data : null;
  }

  /** Drops the tasks whose TTL is over. */
  onAlarm(now: number): void {
    this.sql.exec(`DELETE FROM tasks WHERE expires_at < ?`, now);
    this.soonest = undefined;
  }

  nextWake(_now: number): number | null {
    if (this.soonest === undefined) this.soonest = this.sql.exec<{ at: number | null }>(`SELECT MIN(expires_at) AS at FROM tasks`).one().at;
    return this.soonest === null ? null : this.soonest + 1;
  }

  /** Old rows (D1's `tasks`) taken in; a task already here is left as it is. Malformed rows are counted, not stored. */
  import(rows: readonly unknown[]): { inserted: number; refused: number } {
    let inserted = 0;
    let refused = 0;
    this.host.transactionSync(() => {
      for (const raw of rows) {
        const p = TaskImportRow.safeParse(raw);
        if (!p.success) {
          refused += 1;
          continue;
        }
        const r = p.data;
        const n = this.sql.exec(
          `INSERT OR IGNORE INTO tasks (task_id, subject, tool, shaping, created_at, ttl_ms, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
          r.task_id,
          r.subject,
          r.tool,
          r.shaping,
          r.created_at,
          r.ttl_ms,
          r.created_at + r.ttl_ms,
        ).rowsWritten;
        if (n > 0) inserted += 1;
      }
    });
    this.soonest = undefined;
    return { inserted, refused };
  }
}
