-- People in teams. A member is an identity from a trusted identity provider (issuer + subject; email
-- and name only for display) with one role in one team; the same identity may be a member of several
-- teams (one row each). member_id is random and names the membership in URLs and audit rows.
CREATE TABLE members (
  member_id TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  issuer TEXT NOT NULL,
  subject TEXT NOT NULL,
  email TEXT,
  name TEXT,
  role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  created_at INTEGER NOT NULL,
  added_by TEXT NOT NULL,
  last_seen_at INTEGER,
  UNIQUE (team, issuer, subject)
);
CREATE INDEX members_identity ON members (issuer, subject);
CREATE INDEX members_team_email ON members (team, email);

-- An invitation is a one-time link: only the SHA-256 of its secret is stored, it expires, and it is
-- used at most once (accepted_at set by the one UPDATE that wins).
CREATE TABLE member_invitations (
  invitation_id TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  email TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  secret_hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  accepted_at INTEGER,
  accepted_member_id TEXT,
  revoked_at INTEGER
);
CREATE INDEX member_invitations_team ON member_invitations (team, created_at);
