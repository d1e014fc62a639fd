/**
 * The team's script library, kept in the object's `scripts` table: one row per version of a named
 * script (its source, size, SHA-256, who pushed it and when). A push makes the next version unless
 * the source is the newest version's already; caps on scripts, versions and bytes are the
 * contract's (src/contracts/scripts.ts). Answers are values with an error code, never throws.
 */
import type { ErrorCode } from '../contracts/errors.ts';
import {
  SCRIPT_NAME_PATTERN,
  SCRIPT_NAME_RULE,
  SCRIPT_SOURCE_MAX_BYTES,
  SCRIPTS_PER_TEAM_MAX,
  VERSIONS_PER_SCRIPT_MAX,
  type ScriptSource,
  type ScriptSummary,
  type ScriptVersionView,
} from '../contracts/scripts.ts';
import { migrate, type Migration, type SqlHost } from './capability-host.ts';

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-scripts',
    sql: [
      `CREATE TABLE scripts (name TEXT NOT NULL, version INTEGER NOT NULL, source TEXT NOT NULL, bytes INTEGER NOT NULL,
    sha256 TEXT NOT NULL, created_at INTEGER NOT NULL, created_by TEXT NOT NULL, PRIMARY KEY (name, version))`,
    ],
  },
];

/** A refusal's details travel as fields: the names the library holds (unknown name), the versions a script has (unknown version). */
export type LibraryAnswer<T> = { ok: true; value: T } | { ok: false; code: ErrorCode; message: string; names?: string[]; versions?: number[] };

/** What the edge asks of the library in one RPC call (team-dispatcher.ts `scriptLibrary`). */
export type LibraryOp =
  | { op: 'push'; name: string; source: string; sha256: string; by: string; now: number }
  | { op: 'list' }
  | { op: 'versions'; name: string }
  | { op: 'get'; name: string; version?: number }
  | { op: 'remove'; name: string; version?: number };

export type LibraryResult =
  | LibraryAnswer<{ version: ScriptVersionView; created: boolean }>
  | LibraryAnswer<ScriptSummary[]>
  | LibraryAnswer<ScriptVersionView[]>
  | LibraryAnswer<ScriptSource>
  | LibraryAnswer<{ removed: number }>;

interface Row {
  name: string;
  version: number;
  bytes: number;
  sha256: string;
  created_at: number;
  created_by: string;
}

const VIEW_COLS = 'name, version, bytes, sha256, created_at, created_by';
const view = (r: Row): ScriptVersionView => ({
  name: r.name,
  version: r.version,
  bytes: r.bytes,
  sha256: r.sha256,
  createdAt: r.created_at,
  createdBy: r.created_by,
});

const fail = (code: ErrorCode, message: string, detail: { names?: string[]; versions?: number[] } = {}) => ({ ok: false as const, code, message, ...detail });

export class ScriptLibrary {
  private readonly host: SqlHost;

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'scripts', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  apply(o: LibraryOp): LibraryResult {
    if (o.op !== 'list' && !SCRIPT_NAME_PATTERN.test(o.name))
      return fail('invalid_argument', `script name ${JSON.stringify(String(o.name).slice(0, 80))} is not allowed: ${SCRIPT_NAME_RULE}`);
    switch (o.op) {
      case 'push':
        return this.push(o);
      case 'list':
        return { ok: true, value: this.list() };
      case 'versions':
        return this.versions(o.name);
      case 'get':
        return this.get(o.name, o.version);
      case 'remove':
        return this.remove(o.name, o.version);
    }
  }

  /** The names the library holds, sorted (what an unknown-name error lists). */
  names(): string[] {
    return this.sql
      .exec<{ name: string }>(`SELECT DISTINCT name FROM scripts ORDER BY name`)
      .toArray()
      .map((r) => r.name);
  }

  private rows(name: string): Row[] {
    return this.sql.exec<Row & Record<string, SqlStorageValue>>(`SELECT ${VIEW_COLS} FROM scripts WHERE name = ? ORDER BY version DESC`, name).toArray();
  }

  private push(o: Extract<LibraryOp, { op: 'push' }>): LibraryResult {
    const bytes = new TextEncoder().encode(o.source).byteLength;
    if (bytes === 0) return fail('invalid_argument', 'script source is empty');
    if (bytes > SCRIPT_SOURCE_MAX_BYTES)
      return fail('payload_too_large', `script "${o.name}" is ${bytes} bytes; a script is at most ${SCRIPT_SOURCE_MAX_BYTES} bytes`);
    return this.host.transactionSync((): LibraryResult => {
      const existing = this.rows(o.name);
      const newest = existing[0];
      // Pushing the same text again is not a new version: the answer says so (`created: false`).
      if (newest && newest.sha256 === o.sha256) return { ok: true, value: { version: view(newest), created: false } };
      if (!newest && this.names().length >= SCRIPTS_PER_TEAM_MAX)
        return fail('limit_reached', `the team has ${SCRIPTS_PER_TEAM_MAX} scripts, the most a team keeps; remove one first (gatehouse scripts rm <name>)`);
      if (existing.length >= VERSIONS_PER_SCRIPT_MAX)
        return fail(
          'limit_reached',
          `script "${o.name}" has ${existing.length} versions, the most a script keeps; remove old ones first (gatehouse scripts rm ${o.name} --version ${existing[existing.length - 1]!.version})`,
        );
      const version = (newest?.version ?? 0) + 1;
      this.sql.exec(
        `INSERT INTO scripts (name, version, source, bytes, sha256, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)`,
        o.name,
        version,
        o.source,
        bytes,
        o.sha256,
        o.now,
        o.by,
      );
      return { ok: true, value: { version: { name: o.name, version, bytes, sha256: o.sha256, createdAt: o.now, createdBy: o.by }, created: true } };
    });
  }

  private list(): ScriptSummary[] {
    const rows = this.sql
      .exec<Row & { versions: number } & Record<string, SqlStorageValue>>(
        `SELECT s.name, s.version, s.bytes, s.sha256, s.created_at, s.created_by, c.versions FROM scripts s
         JOIN (SELECT name, MAX(version) AS top, COUNT(*) AS versions FROM scripts GROUP BY name) c ON c.name = s.name AND c.top = s.version
         ORDER BY s.name LIMIT ?`,
        SCRIPTS_PER_TEAM_MAX,
      )
      .toArray();
    return rows.map((r) => ({ ...view(r), versions: r.versions }));
  }

  private versions(name: string): LibraryResult {
    const rows = this.rows(name);
    if (!rows.length) return this.unknown(name);
    return { ok: true, value: rows.map(view) };
  }

  private get(name: string, version?: number): LibraryResult {
    const row =
      version === undefined
        ? this.sql.exec<ScriptRowWithSource>(`SELECT ${VIEW_COLS}, source FROM scripts WHERE name = ? ORDER BY version DESC LIMIT 1`, name).toArray()[0]
        : this.sql.exec<ScriptRowWithSource>(`SELECT ${VIEW_COLS}, source FROM scripts WHERE name = ? AND version = ?`, name, version).toArray()[0];
    if (row) return { ok: true, value: { ...view(row), source: row.source } };
    if (version === undefined) return this.unknown(name);
    const have = this.rows(name).map((r) => r.version);
    if (!have.length) return this.unknown(name);
    const versions = have.reverse();
    return fail('not_found', `script "${name}" has no version ${version} (versions: ${versions.join(', ')})`, { versions });
  }

  private remove(name: string, version?: number): LibraryResult {
    const n =
      version === undefined
        ? this.sql.exec(`DELETE FROM scripts WHERE name = ?`, name).rowsWritten
        : this.sql.exec(`DELETE FROM scripts WHERE name = ? AND version = ?`, name, version).rowsWritten;
    if (n === 0) return version === undefined ? this.unknown(name) : this.get(name, version);
    return { ok: true, value: { removed: n } };
  }

  private unknown(name: string): LibraryResult {
    const names = this.names();
    return fail('not_found', `no script named "${name}" in the team library (${names.length ? names.join(', ') : 'empty'})`, { names });
  }
}

type ScriptRowWithSource = Row & { source: string } & Record<string, SqlStorageValue>;
