/**
 * The team object's usage counters (src/dispatch/usage.ts) over node:sqlite standing in for the
 * object's SQLite (test/dispatch/sql-host.ts): statements, the rows their cursors wrote once
 * consumed, wake-ups by kind, the database's size, and the D1/R2 work of the object itself.
 */
import { describe, expect, it } from 'vitest';
import { meteredSql, Usage } from '../../src/dispatch/usage.ts';
import { sqlHost } from './sql-host.ts';

/** The stand-in's SQL with `databaseSize` (page count × page size, as SQLite reports it). */
function sqlWithSize() {
  const h = sqlHost();
  Object.defineProperty(h.sql, 'databaseSize', {
    get: () => {
      const pages = h.db.prepare('PRAGMA page_count').get() as { page_count: number };
      const size = h.db.prepare('PRAGMA page_size').get() as { page_size: number };
      return pages.page_count * size.page_size;
    },
  });
  return h;
}

describe('DO usage: SQL', () => {
  it('counts every statement and the rows written, whether the cursor is consumed or not', () => {
    const h = sqlWithSize();
    const usage = new Usage(5);
    const sql = meteredSql(h.sql, usage);
    sql.exec('CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT)');
    sql.exec('INSERT INTO jobs VALUES (?, ?), (?, ?)', 'a', 'queued', 'b', 'queued'); // never consumed
    expect(sql.exec('UPDATE jobs SET state = ? RETURNING id', 'running').toArray()).toHaveLength(2);
    expect(sql.exec<{ n: number }>('SELECT count(*) AS n FROM jobs').one().n).toBe(2);
    const s = usage.snapshot();
    expect(s).toMatchObject({ startedAt: 5, sqlStatements: 4, sqlRowsWritten: 4 });
    expect(s.databaseBytes).toBeGreaterThan(0);
  });

  it('adds what a cursor writes as it runs (a RETURNING statement steps row by row), once, however it is consumed', () => {
    // The object's cursors run lazily: `rowsWritten` grows as rows are taken.
    const lazy = (n: number) => {
      let taken = 0;
      const next = () => (taken < n ? { done: false as const, value: { i: taken++ } } : { done: true as const, value: undefined });
      return {
        next,
        get rowsWritten() {
          return taken;
        },
        rowsRead: 0,
        toArray: () => [...{ [Symbol.iterator]: () => ({ next }) }],
        [Symbol.iterator]: () => ({ next }),
      };
    };
    const usage = new Usage();
    const sql = meteredSql({ exec: (_q: string, n: number) => lazy(n), databaseSize: 0 } as unknown as SqlStorage, usage);
    expect(sql.exec('UPDATE … RETURNING', 3).toArray()).toHaveLength(3);
    for (const _ of sql.exec('UPDATE … RETURNING', 2)) void _;
    const c = sql.exec('UPDATE … RETURNING', 4);
    c.next();
    c.next();
    for (const _ of c) break; // stops after a third row
    expect(usage.snapshot()).toMatchObject({ sqlStatements: 3, sqlRowsWritten: 3 + 2 + 3 });
  });

  it('the size grows with what is stored', () => {
    const h = sqlWithSize();
    const usage = new Usage();
    const sql = meteredSql(h.sql, usage);
    sql.exec('CREATE TABLE t (v TEXT)');
    const before = usage.snapshot().databaseBytes ?? 0;
    for (let i = 0; i < 50; i++) sql.exec('INSERT INTO t VALUES (?)', 'x'.repeat(1000));
    expect(usage.snapshot().databaseBytes).toBeGreaterThan(before + 40_000);
    expect(usage.snapshot().sqlRowsWritten).toBe(50);
  });
});

describe('DO usage: wake-ups', () => {
  it('counts each kind and their sum; a snapshot is a copy', () => {
    const usage = new Usage();
    usage.wake('rpc');
    usage.wake('rpc');
    usage.wake('message');
    usage.wake('alarm');
    usage.alarmSet();
    const s = usage.snapshot();
    expect(s.wakes).toEqual({ rpc: 2, fetch: 0, message: 1, alarm: 1, total: 4 });
    expect(s.alarmsSet).toBe(1);
    usage.wake('fetch');
    expect(s.wakes.total).toBe(4);
    expect(usage.snapshot().wakes.total).toBe(5);
    expect(usage.snapshot().databaseBytes).toBeNull();
  });
});

describe('DO usage: the object’s own D1 and R2 work', () => {
  it('counts the queries and operations made through the metered env', async () => {
    const usage = new Usage();
    const db = {
      prepare: () => ({ bind: () => db.prepare(), run: async () => ({ results: [], meta: { rows_read: 0, rows_written: 2 } }) }),
    };
    const r2 = { put: async () => ({}) };
    const env = usage.meter({ DB: db as unknown as D1Database, ARTIFACTS: r2 as unknown as R2Bucket });
    await env.DB.prepare('INSERT INTO audit VALUES (?)').bind(1).run();
    await env.ARTIFACTS.put('k', 'v');
    expect(usage.snapshot().storage).toMatchObject({ d1Queries: 1, d1RowsWritten: 2, r2ClassA: 1 });
  });
});
