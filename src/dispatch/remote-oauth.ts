/**
 * The OAuth connections of the team's remote MCP servers (src/contracts/remote-oauth.ts): one row per
 * connected server in `remote_mcp_oauth_connections`, and the authorizations admins started and have not
 * finished in `remote_mcp_oauth_pending`. Both hold only values the edge sealed: this table, and an export
 * of it, has no readable token, client secret or PKCE verifier. A pending authorization is taken once
 * (the row is deleted as it is read) and only before its expiry.
 */
import { NOT_CONNECTED, OAUTH_PENDING_MAX, type OAuthConnectionView } from '../contracts/remote-oauth.ts';
import { migrate, type Migration, type SqlHost } from './capability-host.ts';

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-remote-mcp-oauth',
    sql: [
      `CREATE TABLE remote_mcp_oauth_connections (server_id TEXT PRIMARY KEY, sealed TEXT NOT NULL, state TEXT NOT NULL,
    expires_at INTEGER, scope TEXT, connected_at INTEGER NOT NULL, connected_by TEXT NOT NULL, updated_at INTEGER NOT NULL)`,
      `CREATE TABLE remote_mcp_oauth_pending (nonce_sha256 TEXT PRIMARY KEY, server_id TEXT NOT NULL, sealed TEXT NOT NULL,
    created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)`,
    ],
  },
];

interface ConnectionRow {
  server_id: string;
  sealed: string;
  state: string;
  expires_at: number | null;
  scope: string | null;
  connected_at: number;
  connected_by: string;
}

/** A connection as the edge reads it to make a call: still sealed. */
export interface StoredOAuthConnection {
  serverId: string;
  sealed: string;
  state: 'connected' | 'expired';
  expiresAt: number | null;
}

export type RemoteOAuthOp =
  | { op: 'begin'; serverId: string; nonceSha256: string; sealed: string; now: number; expiresAt: number }
  | { op: 'take'; nonceSha256: string; now: number }
  | { op: 'connect'; serverId: string; sealed: string; expiresAt: number | null; scope: string | null; by: string; now: number }
  | { op: 'refreshed'; serverId: string; previous: string; sealed: string; expiresAt: number | null; scope: string | null; now: number }
  | { op: 'expire'; serverId: string; previous: string; now: number }
  | { op: 'get'; serverId: string }
  | { op: 'views' }
  | { op: 'drop'; serverId: string };

export type RemoteOAuthAnswer =
  | { op: 'begin' }
  | { op: 'take'; pending: { serverId: string; sealed: string } | null }
  | { op: 'connect' | 'refreshed' | 'expire' | 'drop'; changed: boolean }
  | { op: 'get'; connection: StoredOAuthConnection | null }
  | { op: 'views'; views: Record<string, OAuthConnectionView> };

export class RemoteOAuth {
  private readonly host: SqlHost;

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'remote-oauth', MIGRATIONS);
  }

  apply(o: RemoteOAuthOp): RemoteOAuthAnswer {
    const sql = this.host.sql;
    switch (o.op) {
      case 'begin':
        this.host.transactionSync(() => {
          sql.exec(`DELETE FROM remote_mcp_oauth_pending WHERE expires_at <= ?`, o.now);
          sql.exec(
            `DELETE FROM remote_mcp_oauth_pending WHERE nonce_sha256 NOT IN (SELECT nonce_sha256 FROM remote_mcp_oauth_pending ORDER BY created_at DESC LIMIT ?)`,
            OAUTH_PENDING_MAX - 1,
          );
          sql.exec(
            `INSERT INTO remote_mcp_oauth_pending (nonce_sha256, server_id, sealed, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
            o.nonceSha256,
            o.serverId,
            o.sealed,
            o.now,
            o.expiresAt,
          );
        });
        return { op: 'begin' };
      case 'take':
        return { op: 'take', pending: this.take(o.nonceSha256, o.now) };
      case 'connect':
        sql.exec(
          `INSERT OR REPLACE INTO remote_mcp_oauth_connections (server_id, sealed, state, expires_at, scope, connected_at, connected_by, updated_at)
           VALUES (?, ?, 'connected', ?, ?, ?, ?, ?)`,
          o.serverId,
          o.sealed,
          o.expiresAt,
          o.scope,
          o.now,
          o.by,
          o.now,
        );
        return { op: 'connect', changed: true };
      // Both only if the row still holds the tokens the refresh started from (`previous`): a refresh that lost a race
      // with another (or with an admin reconnecting) neither overwrites the newer tokens nor expires them.
      case 'refreshed':
        return {
          op: 'refreshed',
          changed:
            sql.exec(
              `UPDATE remote_mcp_oauth_connections SET sealed = ?, state = 'connected', expires_at = ?, scope = COALESCE(?, scope), updated_at = ?
               WHERE server_id = ? AND sealed = ?`,
              o.sealed,
              o.expiresAt,
              o.scope,
              o.now,
              o.serverId,
              o.previous,
            ).rowsWritten > 0,
        };
      case 'expire':
        return {
          op: 'expire',
          changed:
            sql.exec(
              `UPDATE remote_mcp_oauth_connections SET state = 'expired', updated_at = ? WHERE server_id = ? AND sealed = ?`,
              o.now,
              o.serverId,
              o.previous,
            ).rowsWritten > 0,
        };
      case 'get':
        return { op: 'get', connection: this.get(o.serverId) };
      case 'views':
        return { op: 'views', views: Object.fromEntries(this.rows('').map((r) => [r.server_id, view(r)])) };
      case 'drop':
        return { op: 'drop', changed: this.drop(o.serverId) };
    }
  }

  /** A server removed or moved to another URL: its connection and open authorizations go with it. */
  drop(serverId: string): boolean {
    this.host.sql.exec(`DELETE FROM remote_mcp_oauth_pending WHERE server_id = ?`, serverId);
    return this.host.sql.exec(`DELETE FROM remote_mcp_oauth_connections WHERE server_id = ?`, serverId).rowsWritten > 0;
  }

  private take(nonceSha256: string, now: number): { serverId: string; sealed: string } | null {
    return this.host.transactionSync(() => {
      const row = this.host.sql
        .exec<{ server_id: string; sealed: string; expires_at: number }>(
          `SELECT server_id, sealed, expires_at FROM remote_mcp_oauth_pending WHERE nonce_sha256 = ?`,
          nonceSha256,
        )
        .toArray()[0];
      // Read once: deleted whether it is still good or not, so a state can never be replayed.
      this.host.sql.exec(`DELETE FROM remote_mcp_oauth_pending WHERE nonce_sha256 = ? OR expires_at <= ?`, nonceSha256, now);
      return row && row.expires_at > now ? { serverId: row.server_id, sealed: row.sealed } : null;
    });
  }

  private get(serverId: string): StoredOAuthConnection | null {
    const r = this.rows('WHERE server_id = ?', serverId)[0];
    return r ? { serverId: r.server_id, sealed: r.sealed, state: r.state === 'expired' ? 'expired' : 'connected', expiresAt: r.expires_at } : null;
  }

  private rows(where: string, ...params: string[]): ConnectionRow[] {
    return this.host.sql
      .exec<ConnectionRow & Record<string, SqlStorageValue>>(
        `SELECT server_id, sealed, state, expires_at, scope, connected_at, connected_by FROM remote_mcp_oauth_connections ${where}`,
        ...params,
      )
      .toArray();
  }
}

function view(r: ConnectionRow): OAuthConnectionView {
  return {
    ...NOT_CONNECTED,
    state: r.state === 'expired' ? 'expired' : 'connected',
    expiresAt: r.expires_at === null ? null : new Date(r.expires_at).toISOString(),
    scopes: r.scope ? r.scope.split(' ').filter(Boolean) : [],
    connectedAt: new Date(r.connected_at).toISOString(),
    connectedBy: r.connected_by,
  };
}
