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
];

interface Row {
  id: string;
  url: string;
  header_names: string;
  sealed_headers: string;
  description: string | null;
  created_at: number;
  created_by: string;
}

/** One RPC method carries every operation (the object's RPC surface stays small). */
export type RemoteServersOp = { op: 'put'; server: StoredRemoteServer } | { op: 'list' } | { op: 'rows' } | { op: 'remove'; id: string };

export type RemoteServersAnswer =
  | { op: 'put'; replaced: boolean }
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
        return { op: 'put', replaced: this.put(o.server) };
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

  private put(s: StoredRemoteServer): boolean {
    const existed = this.rows('WHERE id = ?', s.id).length > 0;
    this.host.sql.exec(
      `INSERT OR REPLACE INTO remote_mcp_servers (id, url, header_names, sealed_headers, description, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      s.id,
      s.url,
      JSON.stringify(s.headerNames),
      s.sealedHeaders,
      s.description,
      s.createdAt,
      s.createdBy,
    );
    return existed;
  }

  private rows(where: string, ...params: string[]): Row[] {
    return this.host.sql
      .exec<Row & Record<string, SqlStorageValue>>(
        `SELECT id, url, header_names, sealed_headers, description, created_at, created_by FROM remote_mcp_servers ${where}`,
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
    description: s.description,
    createdAt: new Date(s.createdAt).toISOString(),
    createdBy: s.createdBy,
  };
}
