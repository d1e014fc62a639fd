-- Human approvals of `ask` decisions (policy rules). One row per pending request; single use:
-- a run consumes it with one conditional UPDATE (status 'approved' → 'used'), which D1's single
-- primary database applies atomically, so two retries cannot both run.
CREATE TABLE approvals (
  id TEXT PRIMARY KEY,               -- ap_<random>; the caller retries with it
  team TEXT NOT NULL,
  subject TEXT NOT NULL,             -- only this subject of this team may use it
  token_id TEXT,
  tool TEXT NOT NULL,
  request_hash TEXT NOT NULL,        -- sha-256 of the exact request (command, args, code, stdin, cwd, env, timeout)
  summary TEXT NOT NULL,             -- what the approver reads (redacted argv / shell string)
  rule_reason TEXT NOT NULL,         -- why the policy asks
  channel TEXT NOT NULL,             -- 'admin' (CLI / admin API / dashboard) or 'elicitation' (the MCP client's user)
  status TEXT NOT NULL,              -- pending | approved | denied | used | expired
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,       -- pending: until decided; approved: until used
  decided_by TEXT,
  decided_at INTEGER,
  decision_note TEXT,
  used_at INTEGER,
  job_id TEXT                        -- the run that used it
);
CREATE INDEX approvals_team_created ON approvals (team, created_at);
CREATE INDEX approvals_lookup ON approvals (team, subject, request_hash, status);

-- Links an audit row to its approval: the ask, the decision and the run share the approval id.
ALTER TABLE audit ADD COLUMN approval_id TEXT;
