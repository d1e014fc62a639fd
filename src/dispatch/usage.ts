/**
 * What the team's Durable Object costs, counted in memory since the object last started (a
 * hibernated or evicted object starts again at zero: `startedAt` says when): its wake-ups by kind
 * (each a billed request — an RPC call, a WebSocket message the platform delivers, an alarm), the
 * SQL statements it ran with the rows they read and wrote (billed like D1 rows), the alarms it set
 * (one row written each), its storage size, and the D1/R2 operations it made itself.
 *
 * ```ts
 * this.usage = new Usage();
 * const sql = meteredSql(ctx.storage.sql, this.usage);   // what the capabilities get as `host.sql`
 * this.usage.wake('rpc');                                // at the top of each RPC method
 * return this.usage.snapshot();                          // the `usage()` RPC (which counts no wake of its own)
 * ```
 *
 * Durable Objects pricing (requests, duration, rows, stored data):
 * https://developers.cloudflare.com/durable-objects/platform/pricing/ — incoming WebSocket messages
 * are billed 20 to a request there; here each delivery counts one wake-up (it wakes a hibernated object all the same).
 */
import { meteredBindings, storageCounts, type MeteredStores, type StorageCounts } from '../platform/storage-meter.ts';

/** What woke the object: an RPC call (or `fetch`, the agents' socket upgrade), a socket message, an alarm. */
export type WakeKind = 'rpc' | 'fetch' | 'message' | 'alarm';

export interface UsageSnapshot {
  /** When this instance of the object started (epoch ms): counts are since then. */
  startedAt: number;
  /** Wake-ups by kind since then, and their sum. */
  wakes: Record<WakeKind, number> & { total: number };
  /** SQL statements run (`sql.exec` calls). */
  sqlStatements: number;
  /** Rows those statements read and wrote (`SqlStorageCursor.rowsRead` / `rowsWritten`, once each cursor is consumed). */
  sqlRowsRead: number;
  sqlRowsWritten: number;
  /** Rows written by statement kind and table (`insert jobs`, `update audit_log`, …): where the writes go. */
  sqlRowsWrittenBy: Record<string, number>;
  /** `setAlarm` calls: each is billed as one row written. */
  alarmsSet: number;
  /** The object's SQLite database size in bytes (`ctx.storage.sql.databaseSize`); null before `meteredSql` is given one. */
  databaseBytes: number | null;
  /** D1 and R2 operations the object made itself (the Worker's are on its call lines). */
  storage: StorageCounts;
}

export class Usage {
  private readonly startedAt: number;
  private readonly wakes: Record<WakeKind, number> = { rpc: 0, fetch: 0, message: 0, alarm: 0 };
  /** Counted by `meteredSql`. */
  statements = 0;
  rowsRead = 0;
  rowsWritten = 0;
  readonly writtenBy: Record<string, number> = {};
  private alarms = 0;
  private sql: SqlStorage | null = null;
  private readonly storage = storageCounts();
  private readonly sink = () => this.storage;

  constructor(now = Date.now()) {
    this.startedAt = now;
  }

  /** The object was woken by `kind` (call it first thing in the handler). */
  wake(kind: WakeKind): void {
    this.wakes[kind] += 1;
  }

  /** The object set its alarm (`ctx.storage.setAlarm`), which is billed as one row written. */
  alarmSet(): void {
    this.alarms += 1;
  }

  /** `env` with `DB` and `ARTIFACTS` counting into this object's usage. */
  meter<E extends MeteredStores>(env: E): E {
    return meteredBindings(env, this.sink);
  }

  /** The database whose size the snapshot reports (meteredSql sets it). */
  measure(sql: SqlStorage): void {
    this.sql = sql;
  }

  /** The wake-ups that cost an idle team (the health answer's `wakes`): socket messages and alarms, since `since`. */
  idleWakes(): { since: number; messages: number; alarms: number } {
    return { since: this.startedAt, messages: this.wakes.message, alarms: this.wakes.alarm };
  }

  snapshot(): UsageSnapshot {
    const w = this.wakes;
    return {
      startedAt: this.startedAt,
      wakes: { ...w, total: w.rpc + w.fetch + w.message + w.alarm },
      sqlStatements: this.statements,
      sqlRowsRead: this.rowsRead,
      sqlRowsWritten: this.rowsWritten,
      sqlRowsWrittenBy: { ...this.writtenBy },
      alarmsSet: this.alarms,
      databaseBytes: this.sql ? this.sql.databaseSize : null,
      storage: { ...this.storage },
    };
  }
}

/**
 * `sql` counting into `usage`: every `exec` is a statement; its rows read and written are added as
 * far as its cursor has run — at `exec` (a write without results has run by then) and again when
 * the cursor is consumed (`toArray`, `one`, the end of an iteration, …).
 */
export function meteredSql(sql: SqlStorage, usage: Usage): SqlStorage {
  usage.measure(sql);
  return {
    exec<T extends Record<string, SqlStorageValue>>(query: string, ...bindings: unknown[]): SqlStorageCursor<T> {
      usage.statements += 1;
      return new MeteredCursor<T>(sql.exec<T>(query, ...bindings), usage, writerOf(query)) as unknown as SqlStorageCursor<T>;
    },
    get databaseSize() {
      return sql.databaseSize;
    },
    Cursor: sql.Cursor,
    Statement: sql.Statement,
  };
}

/** `insert jobs`, `update audit_log`, `delete live_output`, `create …`: the statement's verb and first table. */
function writerOf(query: string): string {
  const m =
    /^\s*(insert(?:\s+or\s+\w+)?\s+into|update(?:\s+or\s+\w+)?|delete\s+from|replace\s+into|create\s+\w+(?:\s+if\s+not\s+exists)?|drop\s+\w+(?:\s+if\s+exists)?|alter\s+table)\s+["`]?(\w+)/i.exec(
      query,
    );
  // A day's table (segments.ts) counts as its family: `jobs_d20500` → `jobs`.
  return m ? `${m[1].split(/\s+/)[0].toLowerCase()} ${m[2].replace(/_d\d+$/, '')}` : query.trim().slice(0, 40);
}

class MeteredCursor<T extends Record<string, SqlStorageValue>> {
  private readonly inner: SqlStorageCursor<T>;
  private readonly usage: Usage;
  private read = 0;
  private written = 0;

  private readonly writer: string;

  constructor(inner: SqlStorageCursor<T>, usage: Usage, writer: string) {
    this.inner = inner;
    this.usage = usage;
    this.writer = writer;
    this.settle();
  }

  /** Adds what the cursor read and wrote since the last look. */
  private settle(): void {
    const r = this.inner.rowsRead ?? 0;
    const w = this.inner.rowsWritten ?? 0;
    this.usage.rowsRead += r - this.read;
    this.usage.rowsWritten += w - this.written;
    if (w > this.written) this.usage.writtenBy[this.writer] = (this.usage.writtenBy[this.writer] ?? 0) + w - this.written;
    this.read = r;
    this.written = w;
  }

  get columnNames(): string[] {
    return this.inner.columnNames;
  }

  get rowsRead(): number {
    return this.inner.rowsRead;
  }

  get rowsWritten(): number {
    return this.inner.rowsWritten;
  }

  next(): IteratorResult<T, undefined> {
    const r = this.inner.next();
    if (r.done) this.settle();
    return r;
  }

  toArray(): T[] {
    try {
      return this.inner.toArray();
    } finally {
      this.settle();
    }
  }

  one(): T {
    try {
      return this.inner.one();
    } finally {
      this.settle();
    }
  }

  raw<U extends SqlStorageValue[]>(): IterableIterator<U> {
    return this.settled(this.inner.raw<U>());
  }

  [Symbol.iterator](): IterableIterator<T> {
    return this.settled(this.inner[Symbol.iterator]());
  }

  private *settled<V>(rows: Iterator<V>): Generator<V, undefined, undefined> {
    try {
      for (let r = rows.next(); !r.done; r = rows.next()) yield r.value;
    } finally {
      this.settle();
    }
  }
}
