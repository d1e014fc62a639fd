-- Revocations are keyed by (team, jti): a jti is chosen by its issuer, so two teams' tokens can
-- share one, and one team's revocation must never block or pre-empt another team's.
CREATE TABLE revocations_by_team (
  team TEXT NOT NULL,
  jti TEXT NOT NULL,
  revoked_at INTEGER NOT NULL,
  PRIMARY KEY (team, jti)
);
INSERT OR IGNORE INTO revocations_by_team (team, jti, revoked_at) SELECT team, jti, revoked_at FROM revocations;
DROP TABLE revocations;
ALTER TABLE revocations_by_team RENAME TO revocations;
