-- One audit row per governed job, found by its job id: the team's Durable Object writes a job's
-- row together with the job's index row in the background (no D1 write on the call's path), and
-- may retry that write after a lost answer; the unique key makes the retry a no-op. The same
-- WHERE lets the completion's UPDATE ... WHERE team = ? AND job_id = ? use this index.
CREATE UNIQUE INDEX IF NOT EXISTS audit_job_row ON audit (team, job_id)
  WHERE job_id IS NOT NULL AND tool IN ('execute', 'runtime_execute', 'run_script');
