/**
 * The team's remote MCP servers, kept in the object's `remote_mcp_servers` table: one row per
 * server an admin registered, its headers sealed by the edge (src/platform/secret-box.ts) before
 * they arrive here, so this table — and an export of it — holds no readable secret.
 */
import type { RemoteServerView, StoredRemoteServer } from '../contracts/mcp-servers.ts';
import { migrate, type Migration, type SqlHost } from './capability-host.ts';

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-remote-mcp-servers',
    sql: [
      `CREATE TABLE remote_mcp_servers (id TEXT PRIMARY KEY, url TEXT NOT NULL, header_names TEXT NOT NULL, sealed_headers TEXT NOT NULL,
    description TEXT, created_at INTEGER NOT NULL, created_by TEXT NOT NULL)`,
    ],
  },
  {
    id: '2-remote-mcp-servers-auth',
    sql: [`ALTER TABLE remote_mcp_servers ADD COLUMN auth TEXT NOT NULL DEFAULT 'headers'`, `ALTER TABLE remote_mcp_servers ADD COLUMN scope TEXT`],
  },
];

interface Row {
  id: string;
  url: string;
  header_names: string;
  sealed_headers: string;
  auth: string;
  scope: string | null;
  description: string | null;
  created_at: number;
  created_by: string;
}

/** One RPC method carries every operation (the object's RPC surface stays small). */
export type RemoteServersOp = { op: 'put'; server: StoredRemoteServer } | { op: 'list' } | { op: 'rows' } | { op: 'remove'; id: string };

export type RemoteServersAnswer =
  /** `moved`: the server was there at another URL or with another auth, so its OAuth connection no longer applies. */
  | { op: 'put'; replaced: boolean; moved: boolean }
  | { op: 'list'; servers: RemoteServerView[] }
  | { op: 'rows'; servers: StoredRemoteServer[] }
  | { op: 'remove'; removed: boolean };

export class RemoteServers {
  private readonly host: SqlHost;

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'remote-servers', MIGRATIONS);
  }

  apply(o: RemoteServersOp): RemoteServersAnswer {
    switch (o.op) {
      case 'put':
        return { op: 'put', ...this.put(o.server) };
      case 'list':
        return { op: 'list', servers: this.all().map(view) };
      case 'rows':
        return { op: 'rows', servers: this.all() };
      case 'remove':
        return { op: 'remove', removed: this.host.sql.exec(`DELETE FROM remote_mcp_servers WHERE id = ?`, o.id).rowsWritten > 0 };
    }
  }

  /** Every registered server with its sealed headers: what a script's catalog is built from. */
  all(): StoredRemoteServer[] {
    return this.rows('ORDER BY id').map(stored);
  }

  private put(s: StoredRemoteServer): { replaced: boolean; moved: boolean } {
    const before = this.rows('WHERE id = ?', s.id)[0];
    this.host.sql.exec(
      `INSERT OR REPLACE INTO remote_mcp_servers (id, url, header_names, sealed_headers, auth, scope, description, created_at, created_by)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      s.id,
      s.url,
      JSON.stringify(s.headerNames),
      s.sealedHeaders,
      s.auth,
      s.scope,
      s.description,
      s.createdAt,
      s.createdBy,
    );
    return { replaced: before !== undefined, moved: before !== undefined && (before.url !== s.url || before.auth !== s.auth) };
  }

  private rows(where: string, ...params: string[]): Row[] {
    return this.host.sql
      .exec<Row & Record<string, SqlStorageValue>>(
        `SELECT id, url, header_names, sealed_headers, auth, scope, description, created_at, created_by FROM remote_mcp_servers ${where}`,
        ...params,
      )
      .toArray();
  }
}

function stored(r: Row): StoredRemoteServer {
  return {
    id: r.id,
    url: r.url,
    headerNames: JSON.parse(r.header_names) as string[],
    sealedHeaders: r.sealed_headers,
    auth: r.auth === 'oauth' ? 'oauth' : 'headers',
    scope: r.scope,
    description: r.description,
    createdAt: r.created_at,
    createdBy: r.created_by,
  };
}

function view(s: StoredRemoteServer): RemoteServerView {
  return {
    id: s.id,
    url: s.url,
    headerNames: s.headerNames,
    auth: s.auth,
    scope: s.scope,
    description: s.description,
    createdAt: new Date(s.createdAt).toISOString(),
    createdBy: s.createdBy,
  };
}
