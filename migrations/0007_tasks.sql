-- MCP Tasks (`io.modelcontextprotocol/tasks`): a task is a job (task_id = the job id) that a
-- 2026-07-28 client received as a task handle. The row keeps what the job table does not: who
-- may see the task (team + subject) and how to shape the tool's result once the job has ended.
CREATE TABLE IF NOT EXISTS tasks (
  team TEXT NOT NULL,
  task_id TEXT NOT NULL,
  subject TEXT NOT NULL,
  tool TEXT NOT NULL,
  shaping TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  ttl_ms INTEGER NOT NULL,
  PRIMARY KEY (team, task_id)
);
CREATE INDEX IF NOT EXISTS tasks_by_age ON tasks (team, created_at);
