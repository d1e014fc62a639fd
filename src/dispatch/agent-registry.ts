/**
 * The team's executor agents in the Durable Object's SQLite storage: what each said in its
 * `hello` (capacity, sandbox, labels, runtimes), which token subject it is bound to, and when it
 * was last heard from as of its row's last write (hello, disconnect, a protocol-2 heartbeat): a
 * connected agent's pings are timed by the platform, not written here (agent-link.ts `lastHeard`).
 * The socket attachment keeps identity only; everything else lives here.
 */
import type { AgentHello, SandboxKind } from '../contracts/agent-protocol.ts';
import { JOB_RETENTION_MS, type AgentView } from '../contracts/job-view.ts';
import { migrate, type Migration, type SqlHost, type TimedWork } from './capability-host.ts';

export interface AgentRow {
  id: string;
  subject: string;
  token_id: string;
  version: string;
  sandbox: SandboxKind;
  capacity: number;
  labels: string;
  runtimes: string;
  connected_at: number;
  last_seen: number;
  state: 'connected' | 'disconnected';
  /** The agent protocol version of its last hello (0: registered before the column existed). */
  protocol: number;
  /** JSON array of what the agent announced beyond its protocol (`workspaces`); null in rows from before the column. */
  capabilities: string | null;
}

/** The `agents` table: this registry's only. IF NOT EXISTS: an object whose table predates the migration ledger keeps it. */
const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-agents',
    sql: [
      `CREATE TABLE IF NOT EXISTS agents (
    id TEXT PRIMARY KEY, subject TEXT NOT NULL, token_id TEXT NOT NULL, version TEXT NOT NULL, sandbox TEXT NOT NULL,
    capacity INTEGER NOT NULL, labels TEXT NOT NULL, runtimes TEXT NOT NULL, connected_at INTEGER NOT NULL,
    last_seen INTEGER NOT NULL, state TEXT NOT NULL)`,
    ],
  },
  // Which agents may take an interactive job (src/contracts/interactive.ts INTERACTIVE_MIN_PROTOCOL).
  { id: '2-protocol', sql: [`ALTER TABLE agents ADD COLUMN protocol INTEGER NOT NULL DEFAULT 0`] },
  { id: '3-agents-capabilities', sql: [`ALTER TABLE agents ADD COLUMN capabilities TEXT`] },
];

export class AgentRegistry implements TimedWork {
  private readonly host: SqlHost;
  /**
   * Rows by id as last read or written (null: no such agent): placing one job looks its agent up
   * several times, placement every live agent. Only this registry writes the table,
   * and each write hands back the row it wrote (RETURNING) for this map. Memory only: a restarted
   * object starts empty and reads from storage.
   */
  private readonly rows = new Map<string, Readonly<AgentRow> | null>();

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'agents', MIGRATIONS);
  }

  get(id: string): Readonly<AgentRow> | null {
    const hit = this.rows.get(id);
    if (hit !== undefined) return hit;
    return this.keep(id, this.host.sql.exec<AgentRow & Record<string, SqlStorageValue>>(`SELECT * FROM agents WHERE id = ?`, id).toArray());
  }

  all(): Readonly<AgentRow>[] {
    return this.host.sql
      .exec<AgentRow & Record<string, SqlStorageValue>>(`SELECT * FROM agents ORDER BY id`)
      .toArray()
      .map((r) => this.keep(r.id, [r])!);
  }

  /** Keeps what storage said of agent `id` (its row, or none) and returns it. */
  private keep(id: string, rows: AgentRow[]): Readonly<AgentRow> | null {
    const row = rows[0] ? Object.freeze(rows[0]) : null;
    this.rows.set(id, row);
    return row;
  }

  /** Records a `hello` from an agent whose identity the caller has checked. */
  connect(h: AgentHello, who: { subject: string; tokenId: string }, now: number): void {
    this.write(
      h.agentId,
      `INSERT OR REPLACE INTO agents (id, subject, token_id, version, sandbox, capacity, labels, runtimes, connected_at, last_seen, state, protocol, capabilities)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'connected', ?, ?)`,
      h.agentId,
      who.subject,
      who.tokenId,
      h.version,
      h.sandbox,
      h.capacity,
      JSON.stringify(h.labels ?? []),
      JSON.stringify(h.runtimes),
      now,
      now,
      h.v,
      JSON.stringify(h.capabilities ?? []),
    );
  }

  touch(id: string, now: number): void {
    this.write(id, `UPDATE agents SET last_seen = ? WHERE id = ?`, now, id);
  }

  /** The agent's last socket went away; `lastSeen`: when it was last heard from (pings included). */
  disconnected(id: string, lastSeen: number): void {
    this.write(id, `UPDATE agents SET state = 'disconnected', last_seen = MAX(last_seen, ?) WHERE id = ?`, lastSeen, id);
  }

  /** The alarm's part: agents not connected for as long as ended jobs are kept are forgotten. */
  onAlarm(now: number): void {
    this.prune(now - JOB_RETENTION_MS);
  }

  /** Agents not connected for a long time are forgotten (they re-register with their next hello). */
  prune(before: number): void {
    const gone = this.host.sql.exec<{ id: string }>(`DELETE FROM agents WHERE state = 'disconnected' AND last_seen < ? RETURNING id`, before).toArray();
    for (const { id } of gone) this.rows.set(id, null);
  }

  /** A write to agent `id`'s row, which it hands back for the map. */
  private write(id: string, statement: string, ...params: SqlStorageValue[]): void {
    this.keep(id, this.host.sql.exec<AgentRow & Record<string, SqlStorageValue>>(`${statement} RETURNING *`, ...params).toArray());
  }

  view(r: AgentRow, running: number, connected: boolean): AgentView {
    return {
      agent_id: r.id,
      subject: r.subject,
      state: connected ? 'connected' : 'disconnected',
      connected,
      version: r.version,
      sandbox: r.sandbox,
      capacity: r.capacity,
      running,
      labels: JSON.parse(r.labels) as string[],
      runtimes: JSON.parse(r.runtimes) as AgentView['runtimes'],
      connected_at: r.connected_at,
      last_seen: r.last_seen,
    };
  }
}
