-- A team's life cycle (src/operator/, docs/teams.md): operators create, suspend, resume and delete teams.
-- Teams made implicitly before this (by a token or member insert) are active, with no creator and no quotas.
ALTER TABLE teams ADD COLUMN status TEXT NOT NULL DEFAULT 'active'; -- active | suspended
ALTER TABLE teams ADD COLUMN created_by TEXT;                      -- the operator token's subject; null: made implicitly
ALTER TABLE teams ADD COLUMN note TEXT;
ALTER TABLE teams ADD COLUMN suspended_at INTEGER;
ALTER TABLE teams ADD COLUMN suspended_by TEXT;
ALTER TABLE teams ADD COLUMN suspend_reason TEXT;
ALTER TABLE teams ADD COLUMN quotas TEXT;                          -- JSON {jobsPerDay?, storageBytes?}; null: none
-- A team known only by its stored policy (its tokens all minted offline) gets its directory row too.
INSERT OR IGNORE INTO teams (id, created_at) SELECT team, MIN(updated_at) FROM policies GROUP BY team;
