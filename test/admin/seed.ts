/** Seeds local D1 before `wrangler dev` starts (harness beforeStart): SQL through `wrangler d1 execute --local`. */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';

export function execSql(persistDir: string, sql: string): void {
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
