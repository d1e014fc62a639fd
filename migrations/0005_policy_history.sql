-- Every saved version of a team's policy (the dashboard's history and "load version N").
-- `policies` keeps the current one; this table is append-only.
CREATE TABLE policy_versions (
  team TEXT NOT NULL,
  version INTEGER NOT NULL,
  document TEXT NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (team, version)
);
