/**
 * The team's approvals (src/dispatch/approvals.ts over node:sqlite, with the rules of
 * src/approval/record.ts): an admin decides only a pending admin approval; a retry uses an approved
 * one once, for its subject and exact request; a prompt's answer counts once; a caller's pending ask
 * is reused; rows go APPROVAL_RETENTION_MS after they ended; old D1 rows are taken in once. The whole
 * flow against wrangler dev is test/e2e/approval.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { APPROVAL_ID_PATTERN } from '../../src/contracts/approvals.ts';
import { APPROVAL_RETENTION_MS, approvalView, type OpenApproval } from '../../src/approval/record.ts';
import { Approvals } from '../../src/dispatch/approvals.ts';
import { sqlHost } from './sql-host.ts';

const T0 = 1_800_000_000_000;
const HOUR = 3_600_000;
const ask = (o: Partial<OpenApproval> = {}): OpenApproval => ({
  subject: 'alice',
  tokenId: 'tok-1',
  tool: 'execute',
  hash: 'h1',
  summary: 'execute: echo ship-it',
  ruleReason: 'shipping needs a person',
  channel: 'admin',
  ttlMs: HOUR,
  now: T0,
  ...o,
});
const approve = (now = T0 + 1) => ({ approve: true, by: 'admin-bob', note: 'ok', ttlMs: HOUR, now });
const use = (id: string, o: Partial<{ subject: string; hash: string; jobId: string; now: number }> = {}) => ({
  subject: 'alice',
  id,
  hash: 'h1',
  jobId: 'job-1',
  now: T0 + 2,
  ...o,
});

describe('approvals', () => {
  it("opens a pending approval; the caller's retry without the id gets the same one, another request a new one", () => {
    const a = new Approvals(sqlHost());
    const { row, reused } = a.open(ask());
    expect(reused).toBe(false);
    expect(row.id).toMatch(APPROVAL_ID_PATTERN);
    expect(approvalView(row, T0)).toMatchObject({ status: 'pending', expires_at: new Date(T0 + HOUR).toISOString() });
    expect(a.open(ask({ now: T0 + 5 }))).toEqual({ row, reused: true });
    expect(a.open(ask({ hash: 'h2' })).reused).toBe(false);
    expect(a.open(ask({ subject: 'carol' })).reused).toBe(false);
    // A prompt is never reused: each asks its user afresh.
    expect(a.open(ask({ channel: 'elicitation' })).reused).toBe(false);
    expect(a.list({ limit: 10, now: T0 }).length).toBe(4);
  });

  it('an admin decides a pending admin approval once; approving starts the time to use it', () => {
    const a = new Approvals(sqlHost());
    const { row } = a.open(ask());
    const d = a.decide(row.id, approve());
    expect(d).toMatchObject({ ok: true, row: { status: 'approved', decided_by: 'admin-bob', decision_note: 'ok', expires_at: T0 + 1 + HOUR } });
    expect(a.decide(row.id, approve())).toMatchObject({
      ok: false,
      refusal: { code: 'approval_pending', message: expect.stringContaining('approved already') },
    });
    expect(a.decide('ap_missingmissingmissing00', approve())).toMatchObject({ ok: false, refusal: { code: 'approval_not_found' } });
    const prompt = a.open(ask({ channel: 'elicitation' })).row;
    expect(a.decide(prompt.id, approve())).toMatchObject({ ok: false, refusal: { code: 'approval_wrong_channel' } });
    const late = a.open(ask({ hash: 'h3' })).row;
    expect(a.decide(late.id, approve(T0 + HOUR))).toMatchObject({ ok: false, refusal: { code: 'approval_expired' } });
  });

  it('tells the deciding capability (a waiting egress ask) only of a decision that took', () => {
    const seen: string[] = [];
    const a = new Approvals(sqlHost(), { onDecided: (r) => seen.push(`${r.id} ${r.status}`) });
    const { row } = a.open(ask());
    a.decide(row.id, { ...approve(), approve: false });
    a.decide(row.id, approve());
    expect(seen).toEqual([`${row.id} denied`]);
  });

  it('a retry uses an approved approval once, only for its subject and exact request', () => {
    const a = new Approvals(sqlHost());
    const { row } = a.open(ask());
    expect(a.consume(use(row.id))).toMatchObject({ ok: false, refusal: { code: 'approval_pending' } });
    a.decide(row.id, approve());
    expect(a.consume(use(row.id, { subject: 'mallory' }))).toMatchObject({ ok: false, refusal: { code: 'approval_not_found' } });
    expect(a.consume(use(row.id, { hash: 'other' }))).toMatchObject({
      ok: false,
      refusal: { code: 'approval_mismatch', message: expect.stringContaining('execute: echo ship-it') },
    });
    expect(a.consume(use(row.id))).toMatchObject({ ok: true, row: { status: 'used', job_id: 'job-1', used_at: T0 + 2 } });
    expect(a.consume(use(row.id, { jobId: 'job-2' }))).toMatchObject({
      ok: false,
      refusal: { code: 'approval_used', message: expect.stringContaining('job-1') },
    });
    expect(a.get(row.id)).toMatchObject({ status: 'used', job_id: 'job-1' });
  });

  it('a denied or expired approval is refused with who denied it or when it ran out', () => {
    const a = new Approvals(sqlHost());
    const denied = a.open(ask()).row;
    a.decide(denied.id, { approve: false, by: 'admin-bob', note: 'not today', ttlMs: HOUR, now: T0 + 1 });
    expect(a.consume(use(denied.id))).toMatchObject({ ok: false, refusal: { code: 'approval_denied', message: expect.stringContaining('not today') } });
    const unused = a.open(ask({ hash: 'h2' })).row;
    a.decide(unused.id, approve());
    expect(a.consume(use(unused.id, { hash: 'h2', now: T0 + 1 + HOUR }))).toMatchObject({ ok: false, refusal: { code: 'approval_expired' } });
    expect(a.list({ status: 'expired', limit: 10, now: T0 + 1 + HOUR }).map((r) => r.id)).toEqual([unused.id]);
  });

  it("a prompt's answer counts once: approve uses it for the run, a replayed answer is refused", () => {
    const a = new Approvals(sqlHost());
    const { row } = a.open(ask({ channel: 'elicitation', ttlMs: 600_000 }));
    const answer = { ...use(row.id), approve: true, by: 'alice (prompt)' };
    expect(a.answerPrompt({ ...answer, hash: 'other' })).toMatchObject({ ok: false, refusal: { code: 'approval_not_found' } });
    expect(a.answerPrompt(answer)).toMatchObject({ ok: true, row: { status: 'used', job_id: 'job-1', decided_by: 'alice (prompt)' } });
    expect(a.answerPrompt({ ...answer, approve: false })).toMatchObject({ ok: false, refusal: { code: 'approval_used' } });
    const late = a.open(ask({ channel: 'elicitation', ttlMs: 1000 })).row;
    expect(a.answerPrompt({ ...answer, id: late.id, now: T0 + 1000 })).toMatchObject({ ok: false, refusal: { code: 'approval_expired' } });
  });

  it('lists newest first, by status as of now', () => {
    const a = new Approvals(sqlHost());
    const first = a.open(ask()).row;
    const second = a.open(ask({ hash: 'h2', now: T0 + 1 })).row;
    a.decide(first.id, approve(T0 + 2));
    expect(a.list({ limit: 10, now: T0 + 3 }).map((r) => r.id)).toEqual([second.id, first.id]);
    expect(a.list({ status: 'pending', limit: 10, now: T0 + 3 }).map((r) => r.id)).toEqual([second.id]);
    expect(a.list({ status: 'approved', limit: 10, now: T0 + 3 }).map((r) => r.id)).toEqual([first.id]);
    expect(a.list({ limit: 1, now: T0 + 3 })).toHaveLength(1);
  });

  it('drops a row APPROVAL_RETENTION_MS after it ended (used, denied, or ran out), by the alarm', () => {
    const host = sqlHost();
    const a = new Approvals(host);
    expect(a.nextWake(T0)).toBeNull();
    const used = a.open(ask()).row;
    a.decide(used.id, approve());
    a.consume(use(used.id));
    const pending = a.open(ask({ hash: 'h2', ttlMs: 10 * HOUR })).row;
    // The used one ended at T0 + 2; the pending one ends when it runs out.
    expect(a.nextWake(T0)).toBe(T0 + 2 + APPROVAL_RETENTION_MS);
    a.onAlarm(T0 + 2 + APPROVAL_RETENTION_MS - 1);
    expect(a.get(used.id)).not.toBeNull();
    a.onAlarm(T0 + 2 + APPROVAL_RETENTION_MS);
    expect(a.get(used.id)).toBeNull();
    expect(a.nextWake(T0)).toBe(T0 + 10 * HOUR + APPROVAL_RETENTION_MS);
    a.onAlarm(T0 + 10 * HOUR + APPROVAL_RETENTION_MS);
    expect(a.get(pending.id)).toBeNull();
    expect(a.nextWake(T0)).toBeNull();
  });

  it('takes in D1 rows once (their team column ignored), keeps what is there, and counts malformed ones', () => {
    const a = new Approvals(sqlHost());
    const d1Row = {
      id: 'ap_AAAAAAAAAAAAAAAAAAAAAA',
      team: 'acme',
      subject: 'alice',
      token_id: 'tok-1',
      tool: 'execute',
      request_hash: 'h1',
      summary: 's',
      rule_reason: 'r',
      channel: 'admin',
      status: 'approved',
      created_at: T0,
      expires_at: T0 + HOUR,
      decided_by: 'admin-bob',
      decided_at: T0 + 1,
      decision_note: null,
      used_at: null,
      job_id: null,
    };
    expect(a.import([d1Row, { ...d1Row, id: 'ap_BBBBBBBBBBBBBBBBBBBBBB', channel: 'carrier-pigeon' }])).toEqual({ inserted: 1, refused: 1 });
    expect(a.consume(use(d1Row.id))).toMatchObject({ ok: true });
    // Run again: the row used since is left as it is.
    expect(a.import([d1Row])).toEqual({ inserted: 0, refused: 0 });
    expect(a.get(d1Row.id)).toMatchObject({ status: 'used', job_id: 'job-1' });
  });
});
