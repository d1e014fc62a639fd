/**
 * Seeds local D1 before `wrangler dev` starts (harness beforeStart). The local D1 is one SQLite file
 * under the persist directory: the SQL runs on it directly with node:sqlite (a `wrangler d1 execute`
 * costs seconds of CPU per seeded test); when that file is not there yet, through wrangler.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';

/** Where miniflare keeps local D1 databases (one `<id>.sqlite` per database, beside its own `metadata.sqlite`). */
const D1_DIR = ['v3', 'd1', 'miniflare-D1DatabaseObject'];

function localD1File(persistDir: string): string | null {
  const dir = join(persistDir, ...D1_DIR);
  if (!existsSync(dir)) return null;
  const dbs = readdirSync(dir).filter((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite');
  return dbs.length === 1 ? join(dir, dbs[0]) : null;
}

export function execSql(persistDir: string, sql: string): void {
  const db = localD1File(persistDir);
  if (db) {
    // Loaded at run time: node:sqlite is newer than the bundler's list of Node built-ins.
    const { DatabaseSync } = createRequire(import.meta.url)('node:sqlite') as typeof import('node:sqlite');
    const conn = new DatabaseSync(db);
    try {
      conn.exec(`BEGIN; ${sql}; COMMIT;`);
    } finally {
      conn.close();
    }
    return;
  }
  const file = join(persistDir, '..', `seed-${Date.now()}.sql`);
  writeFileSync(file, sql);
  const r = spawnSync(join(ROOT, 'node_modules/.bin/wrangler'), ['d1', 'execute', 'DB', '--local', '--persist-to', persistDir, '--file', file, '--yes'], {
    cwd: ROOT,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true', NO_COLOR: '1' },
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`seeding D1 failed:\n${r.stdout}\n${r.stderr}`);
}

const q = (v: unknown) => (v === null || v === undefined ? 'NULL' : typeof v === 'number' ? String(v) : `'${String(v).replace(/'/g, "''")}'`);

export interface SeedAudit {
  at: number;
  team: string;
  subject: string;
  tool: string;
  decision: string;
  command?: unknown;
  reason?: string;
  exitStatus?: string;
}

export function auditInsertSql(rows: SeedAudit[]): string {
  return rows
    .map(
      (r) =>
        `INSERT INTO audit (at, team, subject, token_id, tool, command, cwd, decision, reason, job_id, exit_status, duration_ms, bytes) VALUES (${[
          r.at,
          r.team,
          r.subject,
          'seed',
          r.tool,
          r.command === undefined ? null : JSON.stringify(r.command),
          null,
          r.decision,
          r.reason ?? null,
          null,
          r.exitStatus ?? null,
          5,
          null,
        ]
          .map(q)
          .join(', ')});`,
    )
    .join('\n');
}
