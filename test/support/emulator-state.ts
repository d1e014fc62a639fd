/**
 * What `wrangler dev` keeps under its `--persist-to` directory, read straight from the emulator's
 * own SQLite files (test/e2e/harness.ts puts it at `<stateDir>/state`): the R2 objects, the rows of
 * a D1 table, and the team Durable Objects' databases. Read-only, except `updateObjects`, which a
 * test uses to move stored times (an expiry) instead of waiting for them.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

function sqliteFiles(dir: string): string[] {
  return existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith('.sqlite'))
        .map((f) => join(dir, f))
    : [];
}

function withDb<T>(file: string, f: (db: DatabaseSync) => T, readOnly = true): T {
  const db = new DatabaseSync(file, { readOnly });
  try {
    return f(db);
  } finally {
    db.close();
  }
}

const hasTable = (db: DatabaseSync, name: string) => db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(name) !== undefined;

/** Keys of the objects the local R2 bucket holds. */
export function r2Keys(stateDir: string): string[] {
  return sqliteFiles(join(stateDir, 'state', 'v3', 'r2', 'miniflare-R2BucketObject'))
    .flatMap((f) => withDb(f, (db) => (hasTable(db, '_mf_objects') ? (db.prepare('SELECT key FROM _mf_objects').all() as { key: string }[]) : [])))
    .map((r) => r.key)
    .sort();
}

/** Rows of a query over the local D1 database (the one that has `table`). */
export function d1Rows(stateDir: string, table: string, sql: string): Record<string, unknown>[] {
  return sqliteFiles(join(stateDir, 'state', 'v3', 'd1', 'miniflare-D1DatabaseObject')).flatMap((f) =>
    withDb(f, (db) => (hasTable(db, table) ? (db.prepare(sql).all() as Record<string, unknown>[]) : [])),
  );
}

/** The SQLite files of every Durable Object of a class whose storage has `table`. */
function objectFiles(stateDir: string, table: string): string[] {
  const base = join(stateDir, 'state', 'v3', 'do');
  if (!existsSync(base)) return [];
  return readdirSync(base)
    .flatMap((d) => sqliteFiles(join(base, d)))
    .filter((f) => withDb(f, (db) => hasTable(db, table)));
}

/** Rows of a query over every Durable Object database that has `table`. */
export function objectRows(stateDir: string, table: string, sql: string): Record<string, unknown>[] {
  return objectFiles(stateDir, table).flatMap((f) => withDb(f, (db) => db.prepare(sql).all() as Record<string, unknown>[]));
}

/** Runs a write on every Durable Object database that has `table`; returns the rows changed. */
export function updateObjects(stateDir: string, table: string, sql: string): number {
  return objectFiles(stateDir, table).reduce((n, f) => n + withDb(f, (db) => Number(db.prepare(sql).run().changes), false), 0);
}

/**
 * Job rows matching `where` (an SQL condition) in every team object: the jobs are kept a table per day
 * (`jobs_d<day>`, src/dispatch/segments.ts) besides the table from before days (`jobs`). Each row comes
 * with the file of the object that holds it.
 */
export function objectJobs(stateDir: string, where: string): (Record<string, unknown> & { file: string })[] {
  return objectFiles(stateDir, 'jobs_segments').flatMap((f) =>
    withDb(f, (db) =>
      (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND (name = 'jobs' OR name GLOB 'jobs_d[0-9]*')`).all() as { name: string }[]).flatMap(
        (t) => (db.prepare(`SELECT * FROM ${t.name} WHERE ${where}`).all() as Record<string, unknown>[]).map((r) => ({ ...r, file: f })),
      ),
    ),
  );
}
