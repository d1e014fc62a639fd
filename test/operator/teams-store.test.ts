/** The directory's tables a team's delete exports and removes: every D1 table with a `team` column, none forgotten. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { TEAM_TABLES } from '../../src/store/teams.ts';

const MIGRATIONS = join(import.meta.dirname, '../../migrations');

describe('a team delete reaches every directory table', () => {
  it('TEAM_TABLES lists exactly the tables of migrations/ that have a team column', () => {
    const db = new DatabaseSync(':memory:');
    for (const f of readdirSync(MIGRATIONS).sort()) db.exec(readFileSync(join(MIGRATIONS, f), 'utf8'));
    const tables = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as { name: string }[]).map((r) => r.name);
    const withTeam = tables.filter((t) => (db.prepare(`PRAGMA table_info("${t}")`).all() as { name: string }[]).some((c) => c.name === 'team'));
    expect([...TEAM_TABLES].sort()).toEqual(withTeam.sort());
  });

  it('an implicit team keeps working: the migration gives its row status active', () => {
    const db = new DatabaseSync(':memory:');
    const files = readdirSync(MIGRATIONS).sort();
    for (const f of files.filter((x) => x < '0016')) db.exec(readFileSync(join(MIGRATIONS, f), 'utf8'));
    db.exec(`INSERT INTO teams (id, created_at) VALUES ('old', 1)`);
    db.exec(`INSERT INTO policies (team, version, document, updated_by, updated_at) VALUES ('policy-only', 1, '{}', 'x', 2)`);
    for (const f of files.filter((x) => x >= '0016')) db.exec(readFileSync(join(MIGRATIONS, f), 'utf8'));
    expect(db.prepare(`SELECT id, status, created_by FROM teams ORDER BY id`).all()).toEqual([
      { id: 'old', status: 'active', created_by: null },
      { id: 'policy-only', status: 'active', created_by: null },
    ]);
  });
});
