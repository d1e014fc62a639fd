-- Gatehouse schema. Every row is keyed by team: queries always filter by the team of the
-- verified token, so another team's ids are simply "not found".

CREATE TABLE teams (
  id TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL
);

CREATE TABLE tokens (
  jti TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  subject TEXT NOT NULL,
  scopes TEXT NOT NULL,            -- space-separated
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  revoked_at INTEGER,
  note TEXT
);
CREATE INDEX tokens_team ON tokens (team, created_at);

-- Revocations also cover tokens never recorded in `tokens` (offline-minted, external issuer).
CREATE TABLE revocations (
  jti TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  revoked_at INTEGER NOT NULL
);

CREATE TABLE agents (
  team TEXT NOT NULL,
  id TEXT NOT NULL,
  version TEXT,
  sandbox TEXT,
  capacity INTEGER,
  runtimes TEXT,                   -- JSON
  connected_at INTEGER,
  last_seen_at INTEGER,
  state TEXT NOT NULL,             -- connected | disconnected
  PRIMARY KEY (team, id)
);

CREATE TABLE policies (
  team TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  document TEXT NOT NULL,          -- JSON, validated by src/contracts/policy.ts
  updated_by TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE TABLE jobs (
  team TEXT NOT NULL,
  id TEXT NOT NULL,
  tool TEXT NOT NULL,
  spec TEXT NOT NULL,              -- JSON job spec (env values redacted)
  state TEXT NOT NULL,             -- queued | running | exited | signaled | timed_out | cancelled | lost | failed_to_start
  agent TEXT,
  exit_code INTEGER,
  signal TEXT,
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  ended_at INTEGER,
  duration_ms INTEGER,
  artifact_handle TEXT,
  PRIMARY KEY (team, id)
);
CREATE INDEX jobs_team_created ON jobs (team, created_at);

CREATE TABLE artifacts (
  handle TEXT NOT NULL,
  team TEXT NOT NULL,
  job_id TEXT NOT NULL,
  stream TEXT NOT NULL,            -- stdout | stderr
  r2_key TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  lines INTEGER NOT NULL,
  truncated INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (handle, stream)
);
CREATE INDEX artifacts_team ON artifacts (team, handle);
CREATE INDEX artifacts_expiry ON artifacts (expires_at);

CREATE TABLE audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  team TEXT NOT NULL,
  subject TEXT NOT NULL,
  token_id TEXT,
  tool TEXT NOT NULL,
  command TEXT,                    -- argv or runtime, JSON, secrets redacted
  cwd TEXT,
  decision TEXT NOT NULL,          -- allowed | denied | failed
  reason TEXT,
  job_id TEXT,
  exit_status TEXT,
  duration_ms INTEGER,
  bytes INTEGER
);
CREATE INDEX audit_team_at ON audit (team, id);
