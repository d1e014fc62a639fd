/**
 * The D1 record of a job's network connections (migrations/0012_egress.sql): written by the
 * team's Durable Object from its agents' `egress.log` (src/dispatch/egress.ts), read by job_status,
 * the admin API (dashboard, CLI) and the audit page. Every query is keyed by team.
 */
import { EGRESS_CONNECTIONS_MAX, type EgressConnectionView, type JobNetworkView } from '../contracts/network.ts';

/** One connection as the DO hands it over: the agent's record, numbered within its job. */
export interface EgressRow {
  jobId: string;
  seq: number;
  host: string;
  port: number;
  address: string | null;
  method: string | null;
  decision: 'allowed' | 'refused';
  reason: string;
  bytesUp: number;
  bytesDown: number;
  startedAt: number;
  ms: number;
}

interface D1Row {
  job_id: string;
  host: string;
  port: number;
  address: string | null;
  method: string | null;
  decision: 'allowed' | 'refused';
  reason: string;
  bytes_up: number;
  bytes_down: number;
  started_at: number;
  ms: number;
}

/**
 * The statements that store connection rows and each job's counts. Idempotent: a row already
 * stored (same job and seq) is skipped and the counts are set, not added, so a retried copy is harmless.
 */
export function egressStatements(
  db: D1Database,
  team: string,
  rows: readonly EgressRow[],
  counts: ReadonlyMap<string, { listed: number; dropped: number }>,
): D1PreparedStatement[] {
  const out = rows.map((r) =>
    db
      .prepare(
        `INSERT INTO egress_connections (team, job_id, seq, host, port, address, method, decision, reason, bytes_up, bytes_down, started_at, ms)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (team, job_id, seq) DO NOTHING`,
      )
      .bind(team, r.jobId, r.seq, r.host, r.port, r.address, r.method, r.decision, r.reason, r.bytesUp, r.bytesDown, r.startedAt, r.ms),
  );
  for (const [jobId, c] of counts) {
    out.push(
      db
        .prepare(
          `INSERT INTO egress_jobs (team, job_id, connections, dropped) VALUES (?, ?, ?, ?)
           ON CONFLICT (team, job_id) DO UPDATE SET connections = MAX(connections, excluded.connections), dropped = MAX(dropped, excluded.dropped)`,
        )
        .bind(team, jobId, c.listed, c.dropped),
    );
  }
  return out;
}

const view = (r: D1Row): EgressConnectionView => ({
  job_id: r.job_id,
  host: r.host,
  port: r.port,
  address: r.address,
  method: r.method,
  decision: r.decision,
  reason: r.reason,
  bytes_up: r.bytes_up,
  bytes_down: r.bytes_down,
  started_at: new Date(r.started_at).toISOString(),
  ms: r.ms,
});

/** A job's grant (from its index row) and connections; null when the job has neither a grant nor connections on record. */
export async function jobNetwork(db: D1Database, team: string, jobId: string): Promise<JobNetworkView | null> {
  const [grant, counts, rows] = await db.batch([
    db
      .prepare(`SELECT json_extract(spec, '$.network.mode') AS mode, json_extract(spec, '$.network.source') AS source FROM jobs WHERE team = ? AND id = ?`)
      .bind(team, jobId),
    db.prepare(`SELECT connections, dropped FROM egress_jobs WHERE team = ? AND job_id = ?`).bind(team, jobId),
    db
      .prepare(
        `SELECT job_id, host, port, address, method, decision, reason, bytes_up, bytes_down, started_at, ms FROM egress_connections
         WHERE team = ? AND job_id = ? ORDER BY seq LIMIT ?`,
      )
      .bind(team, jobId, EGRESS_CONNECTIONS_MAX),
  ]);
  const g = (grant.results[0] ?? null) as { mode: JobNetworkView['mode']; source: string | null } | null;
  const c = (counts.results[0] ?? null) as { connections: number; dropped: number } | null;
  const list = (rows.results as D1Row[]).map(view);
  if (!g?.mode && !c && list.length === 0) return null;
  return {
    mode: g?.mode ?? null,
    source: g?.source ?? null,
    connections: list,
    allowed: list.filter((r) => r.decision === 'allowed').length,
    refused: list.filter((r) => r.decision === 'refused').length,
    dropped: c?.dropped ?? 0,
    bytes_up: list.reduce((n, r) => n + r.bytes_up, 0),
    bytes_down: list.reduce((n, r) => n + r.bytes_down, 0),
  };
}

/** The team's latest connections, newest first (the audit page), optionally only refused ones. */
export async function teamConnections(
  db: D1Database,
  team: string,
  f: { limit: number; refusedOnly?: boolean; before?: number },
): Promise<EgressConnectionView[]> {
  const where = ['team = ?'];
  const params: unknown[] = [team];
  if (f.refusedOnly) where.push(`decision = 'refused'`);
  if (f.before !== undefined) {
    where.push('started_at < ?');
    params.push(f.before);
  }
  const r = await db
    .prepare(
      `SELECT job_id, host, port, address, method, decision, reason, bytes_up, bytes_down, started_at, ms FROM egress_connections
       WHERE ${where.join(' AND ')} ORDER BY started_at DESC, id DESC LIMIT ?`,
    )
    .bind(...params, f.limit)
    .all<D1Row>();
  return r.results.map(view);
}
