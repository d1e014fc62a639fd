/**
 * What a capability of the team's Durable Object may use of it: the DO's SQLite (`ctx.storage.sql`
 * and `transactionSync`), and — for those that need them — the clock, the Worker's bindings, the
 * team's name, the agents' sockets and the alarm. The DO implements it; a unit test implements it over
 * node:sqlite (test/dispatch/sql-host.ts).
 *
 * Each capability owns its tables and brings their migrations, each with an id, run once per object
 * and recorded in `dispatch_migrations`. A capability's SQL never names another capability's tables.
 */
import type { Env } from '../env.ts';
import type { AuditEntry } from '../store/audit.ts';

export interface SqlHost {
  sql: SqlStorage;
  transactionSync<T>(f: () => T): T;
}

/** The DO as the capabilities that talk to D1, R2 and the agents' sockets see it. */
export interface DispatchHost extends SqlHost {
  env: Env;
  now(): number;
  /** The team this object serves (the name the Worker addressed it by). */
  team(): Promise<string>;
  /** How often agents send a heartbeat (HEARTBEAT_MS): liveness and the alarm's period follow it. */
  heartbeatMs: number;
  /** Every socket the object holds (agents, before and after their hello). */
  sockets(): WebSocket[];
  /**
   * When the platform last answered this socket's heartbeat (AGENT_PING) for the object, which it
   * does without waking it (`ctx.getWebSocketAutoResponseTimestamp`); null if it never has.
   */
  lastPing(ws: WebSocket): number | null;
  /** The object's storage in bytes (`ctx.storage.sql.databaseSize`): retention bounds it. */
  storageBytes(): number;
  /** Writes a row to the team's audit log (the object's own: audit-log.ts). */
  audit(e: AuditEntry): void;
  /** Moves the object's one alarm to the soonest `nextWake` of its capabilities (after work that changes one). */
  wake(): Promise<void>;
}

/**
 * One step of a capability's schema. `sql` statements run in order; an `ALTER TABLE … ADD COLUMN`
 * whose column exists already (a table an earlier version created with it) counts as done.
 */
export interface Migration {
  id: string;
  sql: readonly string[];
}

/** A capability with work to do when the host's one alarm fires (in the order capabilities.ts declares). */
export interface TimedWork {
  // biome-ignore lint/suspicious/noConfusingVoidType: a synchronous part returns nothing; an asynchronous one's promise is awaited, its value unused.
  onAlarm(now: number): void | Promise<unknown>;
}

/** Timed work that sets the time: the host's one alarm fires at the soonest `nextWake` of all. */
export interface Wakes extends TimedWork {
  /** When this capability next needs the alarm (epoch ms), or null when it has nothing pending. */
  nextWake(now: number): number | null;
}

const LEDGER = `CREATE TABLE IF NOT EXISTS dispatch_migrations (capability TEXT NOT NULL, id TEXT NOT NULL, applied_at INTEGER NOT NULL,
  PRIMARY KEY (capability, id))`;

/** Runs the capability's migrations that this object has not run yet, each in its own transaction. */
export function migrate(host: SqlHost, capability: string, migrations: readonly Migration[], now = Date.now()): void {
  host.sql.exec(LEDGER);
  const done = new Set(
    host.sql
      .exec<{ id: string }>(`SELECT id FROM dispatch_migrations WHERE capability = ?`, capability)
      .toArray()
      .map((r) => r.id),
  );
  for (const m of migrations) {
    if (done.has(m.id)) continue;
    host.transactionSync(() => {
      for (const s of m.sql) run(host.sql, s);
      host.sql.exec(`INSERT INTO dispatch_migrations (capability, id, applied_at) VALUES (?, ?, ?)`, capability, m.id, now);
    });
  }
}

function run(sql: SqlStorage, statement: string): void {
  try {
    sql.exec(statement);
  } catch (e) {
    // SQLite has no ADD COLUMN IF NOT EXISTS: a table created with the column already is migrated.
    if (!(/^\s*ALTER TABLE\s+\S+\s+ADD COLUMN/i.test(statement) && /duplicate column/i.test((e as Error).message))) throw e;
  }
}
