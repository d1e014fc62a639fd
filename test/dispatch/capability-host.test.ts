/**
 * Migrations of the team DO's capabilities: each runs once per object (recorded with its id in
 * `dispatch_migrations`), an object whose tables predate the ledger keeps them and their rows, and
 * a migration that fails leaves nothing half-done and runs again at the next start.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { migrate, type Migration, type SqlHost } from '../../src/dispatch/capability-host.ts';
import { AgentRegistry } from '../../src/dispatch/agent-registry.ts';
import { UploadStore } from '../../src/dispatch/upload-store.ts';
import { jobParts } from './job-parts.ts';
import { sqlHost } from './sql-host.ts';

/** Counts the statements a host runs, other than the ledger's own. */
function counting(h: SqlHost): SqlHost & { statements: string[] } {
  const statements: string[] = [];
  return {
    statements,
    transactionSync: (f) => h.transactionSync(f),
    sql: {
      exec: (q: string, ...p: unknown[]) => (q.includes('dispatch_migrations') || statements.push(q), h.sql.exec(q, ...(p as SqlStorageValue[]))),
    } as unknown as SqlStorage,
  };
}

describe('capability migrations', () => {
  it('runs each migration once per object: a restart over the same storage runs none', () => {
    const h = sqlHost();
    const first = counting(h);
    jobParts(first);
    new AgentRegistry(first);
    new UploadStore(first);
    expect(first.statements.length).toBeGreaterThan(5);
    const again = counting(h);
    jobParts(again);
    new AgentRegistry(again);
    new UploadStore(again);
    expect(again.statements).toEqual([]);
    const ledger = h.db.prepare(`SELECT capability, id FROM dispatch_migrations ORDER BY capability, id`).all();
    expect(ledger).toEqual([
      { capability: 'agents', id: '1-agents' },
      { capability: 'agents', id: '2-protocol' },
      { capability: 'agents', id: '3-agents-capabilities' },
      { capability: 'job-texts', id: '1-job-blobs' },
      { capability: 'jobs', id: '1-jobs' },
      { capability: 'jobs', id: '2-jobs-d1-created' },
      { capability: 'jobs', id: '3-jobs-no-d1-copy' },
      { capability: 'jobs', id: '4-jobs-spec-in-row' },
      { capability: 'jobs', id: '5-jobs-by-day' },
      { capability: 'live-output', id: '1-job-output' },
      { capability: 'stream-artifacts', id: '1-job-artifacts' },
      { capability: 'uploads', id: '1-uploads' },
      { capability: 'uploads', id: '2-upload-secret' },
    ]);
  });

  it('keeps the tables and rows of an object that predates the ledger', () => {
    const h = sqlHost();
    h.db.exec(`CREATE TABLE agents (id TEXT PRIMARY KEY, subject TEXT NOT NULL, token_id TEXT NOT NULL, version TEXT NOT NULL, sandbox TEXT NOT NULL,
      capacity INTEGER NOT NULL, labels TEXT NOT NULL, runtimes TEXT NOT NULL, connected_at INTEGER NOT NULL, last_seen INTEGER NOT NULL, state TEXT NOT NULL)`);
    h.db.exec(`INSERT INTO agents VALUES ('a1', 'agent-a', 't1', '1.0', 'bwrap', 2, '[]', '[]', 1, 2, 'disconnected')`);
    expect(new AgentRegistry(h).get('a1')).toMatchObject({ subject: 'agent-a', capacity: 2 });
  });

  it('rolls a failing migration back whole and runs it again at the next start', () => {
    const h = sqlHost();
    const broken: Migration[] = [{ id: '1-t', sql: ['CREATE TABLE t (x INTEGER)', 'INSERT INTO nowhere VALUES (1)'] }];
    expect(() => migrate(h, 'cap', broken)).toThrow(/nowhere/);
    expect(h.db.prepare(`SELECT name FROM sqlite_master WHERE name = 't'`).all()).toEqual([]);
    migrate(h, 'cap', [{ id: '1-t', sql: ['CREATE TABLE t (x INTEGER)'] }]);
    expect(h.db.prepare(`SELECT id FROM dispatch_migrations WHERE capability = 'cap'`).all()).toEqual([{ id: '1-t' }]);
  });

  it('counts an ADD COLUMN whose column exists as done, and fails on any other error', () => {
    const h = sqlHost();
    h.db.exec('CREATE TABLE t (x INTEGER, y INTEGER)');
    migrate(h, 'cap', [{ id: '1-y', sql: ['ALTER TABLE t ADD COLUMN y INTEGER'] }]);
    expect(() => migrate(h, 'cap', [{ id: '2-z', sql: ['ALTER TABLE missing ADD COLUMN z INTEGER'] }])).toThrow(/missing/);
  });
});

describe('table ownership', () => {
  const OWNER: Record<string, string> = {
    jobs: 'job-rows.ts',
    job_blobs: 'job-texts.ts',
    job_output: 'live-output.ts',
    job_artifacts: 'stream-artifacts.ts',
    artifact_uploads: 'upload-store.ts',
    artifact_parts: 'upload-store.ts',
    upload_grants: 'upload-store.ts',
    upload_secret: 'upload-store.ts',
    agents: 'agent-registry.ts',
    dispatch_migrations: 'capability-host.ts',
  };
  /** A capability's own modules besides its main file (its schema). */
  const PART_OF: Record<string, string> = { 'job-row-schema.ts': 'job-rows.ts' };
  it("no capability's SQL names a table another capability owns", () => {
    const dir = new URL('../../src/dispatch/', import.meta.url);
    const strays: string[] = [];
    // The job tables' first migrations, applied history from when one store owned them all: never edited.
    const history = new Set(['job-tables-v1.ts']);
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts') && !history.has(f))) {
      const text = readFileSync(new URL(file, dir), 'utf8');
      for (const m of text.matchAll(/\b(?:FROM|INTO|UPDATE|JOIN|TABLE(?: IF NOT EXISTS)?)\s+(\w+)/g)) {
        const owner = OWNER[m[1]];
        if (owner && owner !== (PART_OF[file] ?? file)) strays.push(`${file} names ${m[1]} (owned by ${owner})`);
      }
    }
    expect(strays).toEqual([]);
  });
});
