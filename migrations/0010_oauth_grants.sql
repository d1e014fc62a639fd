-- OAuth grants are credentials like tokens: each consent is recorded here, so an admin can list and
-- revoke it, and every request with one of its access tokens is checked against this row (and the
-- admin token that consented) exactly as API tokens are checked against `tokens`/`revocations`.
-- grant_id is the authorization server's random grant id (unique across teams).
CREATE TABLE oauth_grants (
  grant_id TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  user_id TEXT NOT NULL,
  client_id TEXT NOT NULL,
  client_name TEXT,
  subject TEXT NOT NULL,
  consent_token_id TEXT NOT NULL,
  scopes TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  last_used_at INTEGER,
  revoked_at INTEGER,
  revoked_reason TEXT
);
CREATE INDEX oauth_grants_team ON oauth_grants (team, created_at);
CREATE INDEX oauth_grants_consent ON oauth_grants (team, consent_token_id);
CREATE INDEX oauth_grants_client ON oauth_grants (team, client_id);

-- A client a team has cut off: its grants in that team are ended and it cannot be granted there again
-- until an admin unblocks it. Clients register globally, so one team never deletes another's client.
CREATE TABLE oauth_blocked_clients (
  team TEXT NOT NULL,
  client_id TEXT NOT NULL,
  blocked_at INTEGER NOT NULL,
  PRIMARY KEY (team, client_id)
);
