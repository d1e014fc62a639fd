/**
 * The team's per-task workspaces as its object knows them (docs/workspaces.md): which agent holds
 * each one, its size after its last job, when a job last used it. This capability owns the
 * `workspaces` table; it decides where a workspace job goes (`place`: the holder, or for a new
 * workspace a connected agent that announced the `workspaces` capability) and records what each
 * job's exit says of its workspace. The object is single-threaded, so the first job of a new
 * workspace writes its row before a second one is placed: both go to the same agent, which
 * creates the directory once.
 */
import type { JobWorkspace, WorkspaceView } from '../contracts/workspaces.ts';
import { WORKSPACES_CAPABILITY } from '../contracts/workspaces.ts';
import type { GatehouseErrorShape } from '../contracts/errors.ts';
import { migrate, type Migration, type SqlHost, type TimedWork } from './capability-host.ts';
import type { SchedAgent } from './scheduler.ts';

interface WorkspaceRow {
  id: string;
  agent: string;
  bytes: number;
  quota_bytes: number;
  idle_ms: number;
  created_at: number;
  last_used_at: number;
}

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-workspaces',
    sql: [
      `CREATE TABLE workspaces (id TEXT PRIMARY KEY, agent TEXT NOT NULL, bytes INTEGER NOT NULL, quota_bytes INTEGER NOT NULL,
        idle_ms INTEGER NOT NULL, created_at INTEGER NOT NULL, last_used_at INTEGER NOT NULL)`,
    ],
  },
];

export type Placement = { ok: true; agentId: string } | { ok: false; error: GatehouseErrorShape };

/** What a workspace job asks of placement besides its workspace. */
export interface PlacementAsk {
  workspace: JobWorkspace;
  /** The caller's `agent` selector, if any. */
  agent?: string;
  /** Whether an agent passes the job's other requirements (sandbox floor, runtime, labels). */
  fits(a: SchedAgent): boolean;
}

export class Workspaces implements TimedWork {
  private readonly host: SqlHost;

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'workspaces', MIGRATIONS);
  }

  private row(id: string): WorkspaceRow | null {
    return this.host.sql.exec<WorkspaceRow & Record<string, SqlStorageValue>>(`SELECT * FROM workspaces WHERE id = ?`, id).toArray()[0] ?? null;
  }

  /** The agent a workspace job goes to, or why none can take it. `agents`: the connected ones. */
  place(ask: PlacementAsk, agents: SchedAgent[], now: number): Placement {
    const ws = ask.workspace;
    const held = this.row(ws.id);
    const from = ws.source && 'copyFrom' in ws.source ? ws.source.copyFrom : null;
    // A workspace stays where it is; a copy is made on the agent that holds its original.
    const pinned = held?.agent ?? (from ? this.row(from)?.agent : undefined);
    if (from && !held && !pinned)
      return { ok: false, error: { code: 'not_found', message: `workspace "${from}" to copy from does not exist in this team (workspace_list shows them)` } };
    if (pinned) {
      if (ask.agent && ask.agent !== pinned)
        return {
          ok: false,
          error: {
            code: 'invalid_argument',
            message: `workspace "${held ? ws.id : from}" is held by executor agent "${pinned}", not "${ask.agent}": leave agent out, or use another workspace`,
          },
        };
      if (!held) this.claim(ws, pinned, now);
      return { ok: true, agentId: pinned };
    }
    const able = agents.filter((a) => a.capabilities?.includes(WORKSPACES_CAPABILITY));
    const fit = able.filter((a) => (!ask.agent || a.id === ask.agent) && ask.fits(a));
    if (!fit.length) {
      const unable = agents
        .filter((a) => !able.includes(a))
        .map((a) => `${a.id} (${a.sandbox}${a.sandbox === 'gvisor' ? ', an agent too old for workspaces' : ': its sandbox cannot mount one'})`);
      const why = !agents.length
        ? 'no executor agent is connected'
        : !able.length
          ? `no connected executor agent can hold workspaces: ${unable.join(', ')}; start a current agent with --sandbox gvisor`
          : `no connected executor agent that holds workspaces (${able.map((a) => a.id).join(', ')}) meets this job's other requirements (agent, labels, runtime, sandbox floor)`;
      return { ok: false, error: { code: 'no_agent', message: `workspace "${ws.id}" cannot be created: ${why}` } };
    }
    // The least loaded, then the lowest id (as the scheduler breaks ties).
    const pick = [...fit].sort((a, b) => a.running / a.capacity - b.running / b.capacity || (a.id < b.id ? -1 : 1))[0];
    this.claim(ws, pick.id, now);
    return { ok: true, agentId: pick.id };
  }

  private claim(ws: JobWorkspace, agent: string, now: number): void {
    this.host.sql.exec(
      `INSERT INTO workspaces (id, agent, bytes, quota_bytes, idle_ms, created_at, last_used_at) VALUES (?, ?, 0, ?, ?, ?, ?)`,
      ws.id,
      agent,
      ws.quotaBytes,
      ws.idleMs,
      now,
      now,
    );
  }

  /** A job's exit said its workspace's size (the job just used it). */
  reported(agent: string, report: { id: string; bytes: number }, now: number): void {
    this.host.sql.exec(`UPDATE workspaces SET bytes = ?, last_used_at = ? WHERE id = ? AND agent = ?`, report.bytes, now, report.id, agent);
  }

  /** The agent that holds `id`, and forgets it (the caller tells the agent to delete it). */
  remove(id: string): string | null {
    return this.host.sql.exec<{ agent: string }>(`DELETE FROM workspaces WHERE id = ? RETURNING agent`, id).toArray()[0]?.agent ?? null;
  }

  holder(id: string): string | null {
    return this.row(id)?.agent ?? null;
  }

  list(connected: (agentId: string) => boolean): WorkspaceView[] {
    return this.host.sql
      .exec<WorkspaceRow & Record<string, SqlStorageValue>>(`SELECT * FROM workspaces ORDER BY last_used_at DESC LIMIT 1000`)
      .toArray()
      .map((r) => ({
        id: r.id,
        agent_id: r.agent,
        bytes: r.bytes,
        quota_bytes: r.quota_bytes,
        created_at: r.created_at,
        last_used_at: r.last_used_at,
        expires_at: r.last_used_at + r.idle_ms,
        agent_connected: connected(r.agent),
      }));
  }

  /** The alarm's part: rows of workspaces idle past their time-to-live go (their agents delete the directories by the same rule). */
  onAlarm(now: number): void {
    this.host.sql.exec(`DELETE FROM workspaces WHERE last_used_at + idle_ms < ?`, now);
  }
}
