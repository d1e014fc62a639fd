/**
 * Moving an older deployment's D1 rows into the team's object (src/dispatch/legacy-import.ts), over
 * node:sqlite for the object and arrays standing in for D1's tables (the e2e test/e2e/team-data.test.ts
 * runs the real D1 emulation): pages in order, each stored here before it is deleted there, a failed
 * step resumed where it stopped, nothing lost and nothing kept twice.
 */
import { describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/dispatch/audit-log.ts';
import { LegacyImport, type LegacyD1 } from '../../src/dispatch/legacy-import.ts';
import type { AuditRow } from '../../src/store/audit.ts';
import type { LegacyTable } from '../../src/store/legacy.ts';
import type { TeamRecordsImport } from '../../src/dispatch/team-records-client.ts';
import { dispatchHost } from './sql-host.ts';

const row = (id: number): AuditRow => ({
  id,
  at: 1000 + id,
  subject: 'alice',
  tokenId: null,
  tool: 'execute',
  command: ['echo', String(id)],
  cwd: null,
  decision: 'allowed',
  reason: `old ${id}`,
  jobId: `j${id}`,
  exitStatus: 'exit 0',
  durationMs: 1,
  bytes: 0,
  parentJobId: null,
  approvalId: null,
});

function fakeD1(n: number, o: { failDropOnce?: boolean } = {}) {
  const d1 = {
    audit: Array.from({ length: n }, (_, i) => row(i + 1)),
    jobs: 3,
    tables: { approvals: [{ _rowid: 1, id: 'ap_1' }], tasks: [], egress_connections: [{ _rowid: 4, job_id: 'j1', seq: 0 }], egress_jobs: [] } as Record<
      LegacyTable,
      Record<string, unknown>[]
    >,
    queries: 0,
  };
  let failed = false;
  const api: LegacyD1 = {
    auditPage: async (_e, _t, after, limit) => (d1.queries++, d1.audit.filter((r) => r.id > after).slice(0, limit)),
    dropAudit: async (_e, _t, through) => {
      d1.queries++;
      if (o.failDropOnce && !failed) {
        failed = true;
        throw new Error('D1 is busy');
      }
      d1.audit = d1.audit.filter((r) => r.id > through);
    },
    dropJobsIndex: async (_e, _t, limit) => {
      d1.queries++;
      const n = Math.min(limit, d1.jobs);
      d1.jobs -= n;
      return n;
    },
    rowsPage: async (_e, table, _t, after, limit) => (d1.queries++, d1.tables[table].filter((r) => Number(r._rowid) > after).slice(0, limit)),
    dropRows: async (_e, table, _t, through) => {
      d1.queries++;
      d1.tables[table] = d1.tables[table].filter((r) => Number(r._rowid) > through);
    },
  };
  return { d1, api };
}

describe('moving D1 rows into the team object', () => {
  it('moves every audit row in order, drops the jobs index, hands the other tables to their capabilities, then costs nothing', async () => {
    const host = dispatchHost();
    const audit = new AuditLog(host, { auditIdOf: () => null, openStateOf: () => null });
    const got: TeamRecordsImport[] = [];
    const { d1, api } = fakeD1(1200);
    const legacy = new LegacyImport(host, { audit, records: (r) => got.push(r) }, api);
    expect(legacy.finished).toBe(false);
    expect(await legacy.catchUp(50)).toBe(true);
    expect(d1.audit).toEqual([]);
    expect(d1.jobs).toBe(0);
    expect(audit.oldest(0, 2000).map((r) => r.id)).toEqual(Array.from({ length: 1200 }, (_, i) => i + 1));
    expect(got).toEqual([{ approvals: [{ _rowid: 1, id: 'ap_1' }] }, { egressConnections: [{ _rowid: 4, job_id: 'j1', seq: 0 }] }]);
    expect(d1.tables.approvals).toEqual([]);
    const q = d1.queries;
    // Finished, remembered across a restart: no D1 query again.
    const again = new LegacyImport(host, { audit, records: () => {} }, api);
    expect(again.finished).toBe(true);
    expect(await again.catchUp()).toBe(true);
    expect(d1.queries).toBe(q);
  });

  it('goes on where a failed step stopped: a page stored but not deleted in D1 is deleted later, and kept here once', async () => {
    const host = dispatchHost();
    const audit = new AuditLog(host, { auditIdOf: () => null, openStateOf: () => null });
    const { d1, api } = fakeD1(700, { failDropOnce: true });
    const legacy = new LegacyImport(host, { audit, records: () => {} }, api);
    expect(await legacy.catchUp()).toBe(false);
    expect(legacy.nextWake(host.clock.now)).not.toBeNull();
    // The first page is here, and still in D1.
    expect(audit.oldest(0, 2000)).toHaveLength(500);
    expect(d1.audit).toHaveLength(700);
    const restarted = new LegacyImport(host, { audit, records: () => {} }, api);
    expect(await restarted.catchUp()).toBe(true);
    expect(d1.audit).toEqual([]);
    expect(audit.oldest(0, 2000).map((r) => r.id)).toEqual(Array.from({ length: 700 }, (_, i) => i + 1));
  });

  it('stops after its page budget and asks for the alarm to go on', async () => {
    const host = dispatchHost();
    const audit = new AuditLog(host, { auditIdOf: () => null, openStateOf: () => null });
    const { d1, api } = fakeD1(6000);
    const legacy = new LegacyImport(host, { audit, records: () => {} }, api);
    expect(await legacy.catchUp(3)).toBe(false);
    expect(d1.audit).toHaveLength(4500);
    expect(legacy.nextWake(host.clock.now)).toBe(host.clock.now + 100);
    expect(host.wakeCalls).toBeGreaterThan(0);
    expect(await legacy.catchUp(20)).toBe(true);
    expect(audit.oldest(0, 10_000)).toHaveLength(6000);
  });
});
