-- A signed-in session is a sealed cookie the gateway does not keep, so a person's sessions end by a
-- stamp: every session issued before ended_at is refused. Set when a member is removed or their
-- role lowered (src/members/session.ts); one row per identity, across teams.
CREATE TABLE member_sessions_ended (
  issuer TEXT NOT NULL,
  subject TEXT NOT NULL,
  ended_at INTEGER NOT NULL,
  PRIMARY KEY (issuer, subject)
);
