/**
 * A log kept as one SQLite table per UTC day (a segment) instead of one table, so retention drops
 * whole days with DROP TABLE. Durable Objects bill every row a DELETE removes as a row written, like
 * the insert that wrote it (https://developers.cloudflare.com/durable-objects/platform/pricing/,
 * "rows written"); a dropped table counts none in the runtime's row counters (workerd's SQLite patch
 * `0001-row-counts-plain.patch` counts deleted rows, not a destroyed table's). For a log every call adds
 * to and retention empties day after day, that halves what its rows cost.
 *
 * ```ts
 * const days = new Segments(host, { family: 'jobs', legacy: 'jobs', create: (t) => [`CREATE TABLE ${t} (…) WITHOUT ROWID`] });
 * sql.exec(`INSERT INTO ${days.writable(now)} …`);           // today's table, created on first use
 * for (const s of days.all()) sql.exec(`SELECT … FROM ${s.name} …`);   // oldest first
 * days.drop(oldest.name);                                     // retention
 * ```
 *
 * The owner creates `<family>_segments` in its migrations (`segmentsTable`); the table the log was
 * before segments (`legacy`) is read as the oldest segment and dropped like one once emptied of use.
 */
import type { SqlHost } from './capability-host.ts';

const DAY_MS = 24 * 3600_000;

export interface Segment {
  /** The table's name. */
  name: string;
  /** The UTC day (ms) its rows were written on; 0 for the table from before segments. */
  day: number;
}

/** The registry's DDL, for the owner's migration. */
export function segmentsTable(family: string): string {
  return `CREATE TABLE IF NOT EXISTS ${family}_segments (name TEXT PRIMARY KEY, day INTEGER NOT NULL) WITHOUT ROWID`;
}

export class Segments {
  private readonly host: Pick<SqlHost, 'sql'>;
  private readonly family: string;
  private readonly legacy: string | null;
  private readonly create: (table: string) => string[];
  /** Oldest first, once read. */
  private list: Segment[] | null = null;

  constructor(host: Pick<SqlHost, 'sql'>, o: { family: string; legacy: string | null; create: (table: string) => string[] }) {
    this.host = host;
    this.family = o.family;
    this.legacy = o.legacy;
    this.create = o.create;
  }

  /** Every segment, oldest first. */
  all(): readonly Segment[] {
    if (!this.list) {
      const days = this.host.sql.exec<{ name: string; day: number }>(`SELECT name, day FROM ${this.family}_segments ORDER BY day`).toArray();
      const legacy =
        this.legacy !== null && this.host.sql.exec(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`, this.legacy).toArray().length > 0
          ? [{ name: this.legacy, day: 0 }]
          : [];
      this.list = [...legacy, ...days.map((d) => ({ name: d.name, day: d.day }))];
    }
    return this.list;
  }

  /** Newest first. */
  newestFirst(): Segment[] {
    return [...this.all()].reverse();
  }

  /** The table rows written at `now` go to: today's, created with its registry row on first use. */
  writable(now: number): string {
    const day = Math.floor(now / DAY_MS) * DAY_MS;
    const newest = this.all().at(-1);
    // A clock that stepped back writes to the newest day, so ids and times stay in write order.
    if (newest && newest.day >= day && newest.name !== this.legacy) return newest.name;
    const name = `${this.family}_d${day / DAY_MS}`;
    // No transaction of its own: the caller's write is in one (or in the object's event, which commits whole).
    for (const s of this.create(name)) this.host.sql.exec(s);
    this.host.sql.exec(`INSERT INTO ${this.family}_segments (name, day) VALUES (?, ?)`, name, day);
    this.list = [...this.all(), { name, day }];
    return name;
  }

  /** Drops a segment's table, with every row in it. */
  drop(name: string): void {
    this.host.sql.exec(`DROP TABLE IF EXISTS ${name}`);
    this.host.sql.exec(`DELETE FROM ${this.family}_segments WHERE name = ?`, name);
    this.list = this.all().filter((s) => s.name !== name);
  }

  /** Forgets what was read (a transaction that wrote was rolled back). */
  reset(): void {
    this.list = null;
  }
}
