-- Governed network egress (docs/network.md): one row per connection a job's egress proxy made or
-- refused, reported by the job's own agent (egress.log) and copied here by the team's Durable
-- Object. At most EGRESS_CONNECTIONS_MAX (src/contracts/network.ts) rows per job; the rest are
-- counted in egress_jobs.dropped. `seq` numbers a job's rows, so a retried copy inserts nothing twice.
CREATE TABLE egress_connections (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  team TEXT NOT NULL,
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  host TEXT NOT NULL,
  port INTEGER NOT NULL,
  address TEXT,                      -- the address connected to (absent when refused before resolving)
  method TEXT,                       -- CONNECT for tunnelled TLS, the request's method for plain HTTP
  decision TEXT NOT NULL,            -- allowed | refused
  reason TEXT NOT NULL,              -- the entry, preset or approval that decided, or why it was refused
  bytes_up INTEGER NOT NULL,
  bytes_down INTEGER NOT NULL,
  started_at INTEGER NOT NULL,       -- epoch ms
  ms INTEGER NOT NULL
);
CREATE UNIQUE INDEX egress_connections_job ON egress_connections (team, job_id, seq);
CREATE INDEX egress_connections_team_time ON egress_connections (team, started_at);

-- Per job: connections listed above and those past the cap that were only counted.
CREATE TABLE egress_jobs (
  team TEXT NOT NULL,
  job_id TEXT NOT NULL,
  connections INTEGER NOT NULL,
  dropped INTEGER NOT NULL,
  PRIMARY KEY (team, job_id)
);
