/**
 * Retention of the team's history (src/dispatch/retention.ts) over node:sqlite standing in for the
 * DO's SQLite, and a recording function standing in for R2 (the e2e test/e2e/audit-export.test.ts
 * runs the real R2 emulation): rows are exported before they are dropped, never dropped when the
 * export fails, bounded by age and by size, and the alarm is due exactly when the oldest row is.
 */
import { describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/dispatch/audit-log.ts';
import { jobParts } from './job-parts.ts';
import { EXPORT_BATCH_ROWS, Retention } from '../../src/dispatch/retention.ts';
import { JOB_RETENTION_MS } from '../../src/contracts/job-view.ts';
import type { RetentionPolicy } from '../../src/contracts/policy.ts';
import type { AuditRow } from '../../src/store/audit.ts';
import { dispatchHost } from './sql-host.ts';
import { specOf } from './team-fixture.ts';

const DAY = 24 * 3600_000;

function rig(o: { settings?: Partial<RetentionPolicy>; failPut?: () => boolean } = {}) {
  const host = dispatchHost();
  const audit = new AuditLog(host, { auditIdOf: () => null, openStateOf: () => null });
  const jobs = jobParts(host).store;
  const exported: AuditRow[][] = [];
  const pruned: string[] = [];
  const settings: RetentionPolicy = { auditDays: 1, maxBytes: 1024 ** 3, ...o.settings };
  const r = new Retention(host, {
    settings: () => settings,
    audit,
    jobs,
    onJobsPruned: (ids) => pruned.push(...ids),
    putBatch: async (team, rows) => {
      if (o.failPut?.()) throw new Error('R2 said no');
      exported.push([...rows]);
      return { key: `t/${team}/audit/${rows[0].id}`, bytes: JSON.stringify(rows).length };
    },
  });
  const add = (n: number, at: number) => {
    for (let i = 0; i < n; i++) audit.record({ team: 'acme', subject: 'alice', tool: 'policy_check', decision: 'allowed', at, reason: 'x'.repeat(200) });
  };
  return { host, audit, jobs, r, exported, pruned, settings, add };
}

describe('retention', () => {
  it('exports rows older than auditDays to R2, then drops them; newer rows stay; due when the oldest row is', async () => {
    const t = rig();
    const now = t.host.clock.now + 10 * DAY;
    t.add(3, now - 2 * DAY);
    t.add(2, now - 3600_000);
    expect(t.r.nextWake(now)).toBe(now - 2 * DAY + DAY);
    await t.r.onAlarm(now);
    expect(t.exported.map((b) => b.length)).toEqual([3]);
    expect(t.audit.query({}).entries).toHaveLength(2);
    // Next due: the oldest kept row, a day after it was written.
    expect(t.r.nextWake(now)).toBe(now - 3600_000 + DAY);
    expect(t.r.exportsAfter(0, 10)).toMatchObject([{ rows: 3, firstId: t.exported[0][0].id, lastId: t.exported[0][2].id }]);
    expect(t.r.storage(now)).toMatchObject({ exported: { batches: 1, rows: 3 }, auditDays: 1, lastError: null });
  });

  it('drops a day whole (DROP TABLE, no row written) once its newest row is past auditDays, exporting it first; a day in part waits', async () => {
    const t = rig();
    const day0 = Math.floor(t.host.clock.now / DAY) * DAY + 10 * DAY;
    t.add(3, day0 + 3600_000);
    t.add(2, day0 + DAY + 20 * 3600_000);
    t.add(2, day0 + 2 * DAY + 3600_000);
    const tables = () =>
      (t.host.db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'audit_d%' ORDER BY name`).all() as { name: string }[]).map(
        (r) => r.name,
      );
    expect(tables()).toHaveLength(3);
    // A day and a half later: day 0 is past a day whole; day 1 has rows newer than the cutoff and stays whole.
    const now = day0 + 2 * DAY + 12 * 3600_000;
    expect(t.r.nextWake(now)).toBe(day0 + 3600_000 + DAY);
    await t.r.onAlarm(now);
    expect(t.exported.map((b) => b.length)).toEqual([3]);
    expect(tables()).toHaveLength(2);
    expect(t.audit.query({}).entries).toHaveLength(4);
    expect(t.r.nextWake(now)).toBe(day0 + DAY + 20 * 3600_000 + DAY);
    // Nothing is exported twice: the next day's run exports the next day only.
    await t.r.onAlarm(day0 + 3 * DAY);
    expect(t.exported.map((b) => b.length)).toEqual([3, 2]);
    expect(tables()).toHaveLength(1);
    expect(t.r.storage(day0 + 3 * DAY)).toMatchObject({ exported: { batches: 2, rows: 5 } });
  });

  it('keeps every row when R2 refuses the export, says why, and retries later', async () => {
    let fail = true;
    const t = rig({ failPut: () => fail });
    const now = t.host.clock.now + 10 * DAY;
    t.add(4, now - 2 * DAY);
    await t.r.onAlarm(now);
    expect(t.audit.query({}).entries).toHaveLength(4);
    expect(t.r.storage(now).lastError).toContain('R2 said no');
    expect(t.r.nextWake(now)).toBe(now + 60_000);
    fail = false;
    await t.r.onAlarm(now + 60_000);
    expect(t.audit.query({}).entries).toHaveLength(0);
    expect(t.exported.flat()).toHaveLength(4);
  });

  it('over its storage bound, exports and drops the oldest rows whatever their age; refuses jobs only when it cannot free space', async () => {
    let fail = false;
    const t = rig({ settings: { auditDays: 3650 }, failPut: () => fail });
    const now = t.host.clock.now;
    t.add(3000, now - 1000);
    const size = t.host.storageBytes();
    t.settings.maxBytes = Math.floor(size / 2);
    expect(t.r.nextWake(now)).toBe(now + 100);
    expect(t.r.admitJob()).toBeNull();
    await t.r.onAlarm(now);
    expect(t.exported.length).toBeGreaterThan(0);
    expect(t.audit.query({ limit: 500 }).entries.length).toBeLessThan(3000);
    // Oldest first: every kept row is newer than every exported one.
    expect(t.audit.oldest(0, 1)[0].id).toBe(t.exported.flat().at(-1)!.id + 1);
    // SQLite keeps its pages: the next run waits for growth past this size, not for the next row.
    expect(t.r.nextWake(now)).not.toBe(now + 100);
    // R2 down and the object over its bound: new jobs are refused with the setting named, rows kept.
    fail = true;
    t.add(EXPORT_BATCH_ROWS, now);
    t.settings.maxBytes = Math.floor(size / 4);
    const kept = t.audit.query({ limit: 500 }).entries.length;
    await t.r.onAlarm(now + 1);
    expect(t.audit.query({ limit: 500 }).entries.length).toBe(kept);
    expect(t.r.admitJob()).toMatchObject({ code: 'quota_exceeded', message: expect.stringContaining('retention.maxBytes') });
  });

  it('drops ended jobs after the job retention and tells whoever keeps something per job', async () => {
    const t = rig();
    const now = t.host.clock.now;
    t.jobs.create({
      spec: specOf('old', { limits: { inlineBytes: 1, artifactBytes: 1 } }),
      tool: 'execute',
      subject: 'alice',
      tokenId: 't',
      cancelKey: 'k',
      background: false,
      maxConcurrent: 1,
      deadline: now + 1000,
      now,
    });
    t.jobs.finish('old', 'cancelled', now);
    expect(t.r.nextWake(now)).toBe(now + JOB_RETENTION_MS);
    await t.r.onAlarm(now + JOB_RETENTION_MS + 1);
    expect(t.jobs.get('old')).toBeNull();
    expect(t.pruned).toEqual(['old']);
    expect(t.r.nextWake(now + JOB_RETENTION_MS + 1)).toBeNull();
  });

  it('has nothing due with nothing kept', () => {
    const t = rig();
    expect(t.r.nextWake(t.host.clock.now)).toBeNull();
  });
});
