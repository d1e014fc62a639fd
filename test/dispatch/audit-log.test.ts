/**
 * The team's audit log in its Durable Object (src/dispatch/audit-log.ts), over node:sqlite standing
 * in for the DO's SQLite: rows written redacted and bounded, a governed job's row once and completed
 * as the job goes, newest-first paging, and rows copied from an older deployment's D1 kept in call order.
 */
import { describe, expect, it } from 'vitest';
import { AuditLog, LEGACY_ID_CEILING } from '../../src/dispatch/audit-log.ts';
import type { JobView } from '../../src/contracts/job-view.ts';
import type { AuditEntry, AuditRow } from '../../src/store/audit.ts';
import { sqlHost } from './sql-host.ts';

const T0 = 1_800_000_000_000;
const entry = (o: Partial<AuditEntry> = {}): AuditEntry => ({
  at: T0,
  team: 'acme',
  subject: 'alice',
  tokenId: 'tok1',
  tool: 'execute',
  decision: 'allowed',
  reason: 'rule r1',
  jobId: 'j1',
  exitStatus: 'queued',
  command: { mode: 'argv', command: 'curl', args: ['--password', 'hunter2', '-H', 'Authorization: Bearer abcdefghijklmnop'] },
  ...o,
});
const view = (o: Partial<JobView> = {}): JobView => ({
  job_id: 'j1',
  state: 'exited',
  tool: 'execute',
  subject: 'alice',
  background: false,
  agent_id: 'a1',
  sandbox: 'gvisor',
  created_at: T0,
  started_at: T0 + 1,
  ended_at: T0 + 9,
  exit_code: 0,
  signal: null,
  timed_out: false,
  duration_ms: 8,
  error: null,
  artifact_handle: 'art_j1',
  artifact_state: 'none',
  artifacts: { stdout: { state: 'none', bytes: 0 }, stderr: { state: 'none', bytes: 0 } },
  stdout_bytes: 3,
  stderr_bytes: 0,
  ...o,
});

/** The log with a stand-in for the job rows, which hold each job's audit row id (job-rows.ts) and its open state. */
function jobLog(host = sqlHost()) {
  const ids = new Map<string, number>();
  const open = new Map<string, string>();
  const log = new AuditLog(host, { auditIdOf: (id) => ids.get(id) ?? null, openStateOf: (id) => open.get(id) ?? null });
  /** As `Jobs.submit` writes a job's row: its id chosen first and kept with the job. */
  const recordJob = (e: AuditEntry) => {
    const id = log.nextId();
    ids.set(e.jobId!, id);
    return log.record(e, T0, id);
  };
  return { log, recordJob, open };
}

describe("the team's audit log", () => {
  it('stores commands redacted, and a governed job once whatever sends its row again', () => {
    const { log, recordJob } = jobLog();
    const id = recordJob(entry());
    expect(id).toBe(LEGACY_ID_CEILING + 1);
    expect(log.record(entry({ reason: 'sent again' }))).toBeNull();
    const [row] = log.query({}).entries;
    expect(row).toMatchObject({ id, subject: 'alice', decision: 'allowed', reason: 'rule r1', exitStatus: 'queued' });
    expect(JSON.stringify(row.command)).not.toContain('hunter2');
    expect(JSON.stringify(row.command)).not.toContain('abcdefghijklmnop');
  });

  it("completes a job's row with its end, and leaves other rows that name the job apart", () => {
    const { log, recordJob, open } = jobLog();
    recordJob(entry());
    log.record(entry({ tool: 'job_status', exitStatus: undefined, reason: undefined, command: undefined }));
    log.record(entry({ tool: 'admin.job_kill', subject: 'root', exitStatus: undefined }));
    // While the job runs its row is not written again: readers see the job's own state.
    open.set('j1', 'running');
    expect(log.query({ tool: 'execute' }).entries[0]).toMatchObject({ exitStatus: 'running', reason: 'rule r1' });
    expect(log.jobRows(['j1'])[0]).toMatchObject({ exitStatus: 'running' });
    open.delete('j1');
    log.completeJob(view({ exit_code: 3 }));
    const rows = log.query({ jobId: 'j1' }).entries;
    expect(rows.map((r) => [r.tool, r.exitStatus])).toEqual([
      ['admin.job_kill', null],
      ['job_status', null],
      ['execute', 'exit 3'],
    ]);
    expect(rows[2]).toMatchObject({ decision: 'allowed', durationMs: 8, bytes: 3, reason: 'rule r1; agent a1 (gvisor)' });
  });

  it("finds 250 jobs' rows in one call (an admin page of 200 queued jobs): each statement stays within the 100 parameters a DO allows", () => {
    const { log, recordJob } = jobLog();
    const ids = Array.from({ length: 250 }, (_, i) => `j${i}`);
    for (const jobId of ids) recordJob(entry({ jobId }));
    const rows = log.jobRows(ids);
    expect(rows).toHaveLength(250);
    expect(new Set(rows.map((r) => r.jobId))).toEqual(new Set(ids));
  });

  it('marks a job that never ran as failed, with why', () => {
    const { log, recordJob } = jobLog();
    recordJob(entry());
    log.completeJob(view({ state: 'refused', agent_id: null, error: { code: 'no_agent', message: 'no agent connected' } }));
    expect(log.query({}).entries[0]).toMatchObject({ decision: 'failed', exitStatus: 'refused', reason: 'rule r1; no_agent: no agent connected' });
  });

  it('bounds a command past the row limit (it says so and keeps its start), so the row and the ones after it are written', () => {
    const log = jobLog().log;
    const huge = Array.from({ length: 40 }, (_, i) => `${i}`.repeat(60_000));
    log.record(entry({ command: { mode: 'argv', command: 'echo', args: huge } }));
    log.record(entry({ jobId: 'j2' }));
    const rows = log.query({}).entries;
    expect(rows).toHaveLength(2);
    expect(rows[1].command).toMatchObject({ truncated: true });
    expect(JSON.stringify(rows[1].command).length).toBeLessThan(70_000);
  });

  it('pages newest first with a cursor and filters', () => {
    const log = jobLog().log;
    for (let i = 0; i < 7; i++) log.record(entry({ jobId: `j${i}`, at: T0 + i, decision: i % 2 ? 'denied' : 'allowed' }));
    const first = log.query({ limit: 3 });
    expect(first.entries.map((r) => r.jobId)).toEqual(['j6', 'j5', 'j4']);
    const second = log.query({ limit: 3, cursor: first.nextCursor! });
    expect(second.entries.map((r) => r.jobId)).toEqual(['j3', 'j2', 'j1']);
    expect(log.query({ limit: 3, cursor: second.nextCursor! })).toMatchObject({ nextCursor: null, entries: [{ jobId: 'j0' }] });
    expect(log.query({ decision: 'denied', since: T0 + 2, until: T0 + 6 }).entries.map((r) => r.jobId)).toEqual(['j5', 'j3']);
    expect(log.denials(T0 + 3, 1)).toMatchObject({ calls: 4, denied: 2, recent: [{ jobId: 'j5' }] });
  });

  it("keeps rows copied from an older deployment's D1 before its own, in call order, once", () => {
    const log = jobLog().log;
    log.record(entry({ jobId: 'new', at: T0 + 100 }));
    const legacy = (id: number, jobId: string): AuditRow => ({
      id,
      at: T0 + id,
      subject: 'bob',
      tokenId: null,
      tool: 'execute',
      command: ['ls'],
      cwd: null,
      decision: 'allowed',
      reason: null,
      jobId,
      exitStatus: 'exit 0',
      durationMs: 1,
      bytes: 0,
      parentJobId: null,
      approvalId: null,
    });
    expect(log.importRows([legacy(7, 'old7'), legacy(9, 'old9')])).toBe(2);
    expect(log.importRows([legacy(7, 'old7')])).toBe(0);
    expect(log.query({}).entries.map((r) => r.jobId)).toEqual(['new', 'old9', 'old7']);
    expect(log.record(entry({ jobId: 'newer' }))).toBe(LEGACY_ID_CEILING + 2);
  });
});

describe('finding a time among the ids', () => {
  it('finds the first row at or after a time over sparse ids (copied D1 rows, then its own), with no index on the time', () => {
    const log = jobLog().log;
    const legacy = [3, 4, 9, 200].map((id) => ({
      id,
      at: T0 + id,
      subject: 'bob',
      tokenId: null,
      tool: 'execute',
      command: null,
      cwd: null,
      decision: 'allowed',
      reason: null,
      jobId: `old${id}`,
      exitStatus: null,
      durationMs: null,
      bytes: null,
      parentJobId: null,
      approvalId: null,
    }));
    log.importRows(legacy);
    for (let i = 0; i < 50; i++) log.record(entry({ jobId: `n${i}`, at: T0 + 1000 + i * 10 }));
    const ids = log.oldest(0, 100).map((r) => [r.id, r.at] as const);
    for (const probe of [T0 - 5, T0 + 3, T0 + 5, T0 + 9, T0 + 10, T0 + 201, T0 + 1000, T0 + 1005, T0 + 1490, T0 + 1491, T0 + 99_999]) {
      const expected = ids.find(([, at]) => at >= probe)?.[0] ?? null;
      expect(log.firstIdAt(probe), `at ${probe - T0}`).toBe(expected);
    }
    expect(log.query({ since: T0 + 5, until: T0 + 1020, limit: 500 }).entries.map((r) => r.jobId)).toEqual(['n1', 'n0', 'old200', 'old9']);
    expect(log.oldest(0, 100, { before: T0 + 1010 }).map((r) => r.jobId)).toEqual(['old3', 'old4', 'old9', 'old200', 'n0']);
    expect(log.oldestAt()).toBe(T0 + 3);
  });
});
