/**
 * The per-socket message budget of an agent connection (src/dispatch/agent-budget.ts), on its own
 * with a made-up clock: what a real agent sends stays inside it, a flood does not.
 */
import { describe, expect, it } from 'vitest';
import {
  AgentBudget,
  EXIT_PARTS_PER_JOB,
  HEARTBEAT_BACKLOG_MS,
  HEARTBEAT_BURST,
  LATE_BURST,
  LATE_UNITS_PER_SECOND,
  MALFORMED_BURST,
  MALFORMED_UNIT_BYTES,
  MALFORMED_UNITS_PER_MINUTE,
  STRANGER_BURST,
  STRANGER_UNIT_BYTES,
  STRANGER_UNITS_PER_SECOND,
  peekJobMessage,
} from '../../src/dispatch/agent-budget.ts';
import { exitMessages } from '../../executor/agent.ts';
import type { JobExit } from '../../src/contracts/agent-protocol.ts';

const HB = 1000;
/** RFC 6455 §5.5: a close frame's reason is at most 123 bytes. */
const CLOSE_REASON_MAX_BYTES = 123;

function exit(jobId: string, stdout: string): JobExit {
  return {
    type: 'job.exit',
    jobId,
    state: 'exited',
    exitCode: 0,
    signal: null,
    timedOut: false,
    durationMs: 1,
    stdout,
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    artifactsUploaded: true,
    streams: { stdout: { bytes: stdout.length, lines: 1, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
  };
}

describe('agent message budget', () => {
  it('an hour of heartbeats at the interval the edge gave, and a minute of them queued behind a big result, stay inside it', () => {
    const b = new AgentBudget(HB, 0);
    expect(b.heartbeat(0)).toBeNull(); // hello
    let t = 0;
    for (let i = 0; i < 3600; i++) {
      t += HB + ((i * 7919) % 200) - 100; // ±100 ms of timer jitter
      expect(b.heartbeat(t)).toBeNull();
    }
    // The object read a big result for a minute: the 60 heartbeats sent meanwhile arrive at once.
    t += 60 * HB;
    for (let i = 0; i < 60; i++) expect(b.heartbeat(t)).toBeNull();
    expect(b.over).toBeNull();
  });

  it('heartbeats faster than twice per interval go over, with a close reason that fits a close frame', () => {
    const b = new AgentBudget(HB, 0);
    for (let i = 0; i < HEARTBEAT_BURST; i++) expect(b.heartbeat(i)).toBeNull();
    const over = b.heartbeat(HEARTBEAT_BURST);
    expect(over).toMatchObject({ kind: 'heartbeats', message: 'message budget exceeded: heartbeats more often than 2 per 1000 ms' });
    expect(Buffer.byteLength(over!.message)).toBeLessThanOrEqual(CLOSE_REASON_MAX_BYTES);
    expect(b.over).toBe(over);
    // An hour of silence earns HEARTBEAT_BACKLOG_MS worth, no more.
    const idle = new AgentBudget(HB, 0);
    const allowance = HEARTBEAT_BURST + (2 * HEARTBEAT_BACKLOG_MS) / HB;
    for (let i = 0; i < allowance; i++) expect(idle.heartbeat(3_600_000)).toBeNull();
    expect(idle.heartbeat(3_600_000)?.kind).toBe('heartbeats');
  });

  it('messages about strangers cost their size; the small burst runs out, then refills at its rate', () => {
    const b = new AgentBudget(HB, 0);
    for (let i = 0; i < STRANGER_BURST; i++) expect(b.stranger(100, 0)).toBeNull();
    const over = b.stranger(100, 0);
    expect(over).toMatchObject({
      kind: 'strangers',
      message: `message budget exceeded: more than ${STRANGER_BURST} messages about jobs unknown or not its own`,
    });
    expect(Buffer.byteLength(over!.message)).toBeLessThanOrEqual(CLOSE_REASON_MAX_BYTES);
    // One message of a MiB about a stranger costs more than the whole burst.
    expect(new AgentBudget(HB, 0).stranger(1024 * 1024, 0)?.kind).toBe('strangers');

    const slow = new AgentBudget(HB, 0);
    for (let i = 0; i < STRANGER_BURST; i++) slow.stranger(0, 0);
    // A second later, STRANGER_UNITS_PER_SECOND units are back.
    for (let i = 0; i < STRANGER_UNITS_PER_SECOND; i++) expect(slow.stranger(STRANGER_UNIT_BYTES - 1, 1000)).toBeNull();
    expect(slow.stranger(0, 1000)).not.toBeNull();
  });

  it('malformed messages have the smallest burst of their own, cost their size, and earn back only a stray one a minute', () => {
    const b = new AgentBudget(HB, 0);
    for (let i = 0; i < MALFORMED_BURST; i++) expect(b.malformed(20, 0)).toBeNull();
    const over = b.malformed(20, 0);
    expect(over).toMatchObject({ kind: 'malformed', message: `message budget exceeded: more than ${MALFORMED_BURST} malformed messages` });
    expect(Buffer.byteLength(over!.message)).toBeLessThanOrEqual(CLOSE_REASON_MAX_BYTES);
    // Counted apart from strangers: a real agent's messages about unknown jobs never use them up.
    expect(b.stranger(0, 0)).toBeNull();
    // One message of MALFORMED_BURST × MALFORMED_UNIT_BYTES goes over at once; a 100 KB wrong-shape message costs 2 units.
    expect(new AgentBudget(HB, 0).malformed(MALFORMED_BURST * MALFORMED_UNIT_BYTES, 0)?.kind).toBe('malformed');
    const oversized = new AgentBudget(HB, 0);
    for (let i = 0; i < MALFORMED_BURST / 2; i++) expect(oversized.malformed(100_000, 0)).toBeNull();
    expect(oversized.malformed(0, 0)?.kind).toBe('malformed');
    // A buggy agent's stray frame now and then stays inside it.
    const stray = new AgentBudget(HB, 0);
    for (let t = 0; t < 3_600_000; t += 60_000 / MALFORMED_UNITS_PER_MINUTE) expect(stray.malformed(100, t)).toBeNull();
    // A flood at 10,000 messages a second is over within its first MALFORMED_BURST + 1 messages, whatever their size.
    const flood = new AgentBudget(HB, 0);
    let n = 0;
    while (!flood.malformed(1, n / 10)) n++;
    expect(n).toBe(MALFORMED_BURST);
  });

  it('going over is final, and only the first rejected message is logged', () => {
    const b = new AgentBudget(HB, 0);
    expect(b.firstRejection()).toBe(true);
    expect(b.firstRejection()).toBe(false);
    for (let i = 0; i < HEARTBEAT_BURST; i++) b.heartbeat(0);
    const over = b.heartbeat(0);
    expect(over?.kind).toBe('heartbeats');
    // Later overruns of other kinds keep the first reason (the one the close and the audit give).
    for (let i = 0; i <= MALFORMED_BURST; i++) b.malformed(0, 0);
    expect(b.over).toBe(over);
  });

  it("late messages about the agent's own ended jobs have their own, larger burst, one unit each", () => {
    const b = new AgentBudget(HB, 0);
    for (let i = 0; i < LATE_BURST; i++) expect(b.late(0)).toBeNull();
    // Strangers are counted apart: a real agent's re-sends never use them up.
    expect(b.stranger(0, 0)).toBeNull();
    expect(b.late(0)).toMatchObject({ kind: 'late', message: `message budget exceeded: more than ${LATE_BURST} late messages about its ended jobs` });
    const steady = new AgentBudget(HB, 0);
    // A big result re-sent every second: 2 × 16 parts, its exit and 2 reports.
    for (let t = 0; t < 600_000; t += 1000) for (let i = 0; i < 35; i++) expect(steady.late(t)).toBeNull();
    expect(LATE_UNITS_PER_SECOND).toBeGreaterThanOrEqual(35);
  });

  it("a job is answered once; a job sent to the socket again is the agent's to report again", () => {
    const b = new AgentBudget(HB, 0);
    expect(b.answer('j1', 'stranger')).toBe(true);
    expect(b.answer('j1', 'stranger')).toBe(false);
    expect(b.answeredAs('j1')).toBe('stranger');
    b.started('j1');
    expect(b.answeredAs('j1')).toBeUndefined();
    expect(b.report('j1', 'stdout')).toBe(true);
    expect(b.report('j1', 'stdout')).toBe(false);
    expect(b.report('j1', 'stderr')).toBe(true);
  });

  it('the parts of the biggest result pass; more parts of one job go over', () => {
    const b = new AgentBudget(HB, 0);
    for (let i = 0; i < EXIT_PARTS_PER_JOB; i++) expect(b.part('j1')).toBeNull();
    expect(b.part('j1')?.kind).toBe('parts');
    expect(Buffer.byteLength(b.over!.message)).toBeLessThanOrEqual(CLOSE_REASON_MAX_BYTES);
  });

  it("reads the type and job id of the executor's exit messages from their start, and nothing else", () => {
    // 4 Mi NUL characters: six bytes each in JSON, so the result goes as parts, then the exit.
    const msgs = exitMessages(exit('0f9c1e2a-job', '\0'.repeat(4 * 1024 * 1024)));
    expect(msgs.map((m) => m.type)).toEqual(['job.exit.part', 'job.exit.part', 'job.exit.part', 'job.exit.part', 'job.exit']);
    for (const m of msgs) expect(peekJobMessage(JSON.stringify(m))).toEqual({ type: m.type, jobId: '0f9c1e2a-job' });
    expect(peekJobMessage(JSON.stringify(exit('small', 'ok\n')))).toEqual({ type: 'job.exit', jobId: 'small' });
    expect(peekJobMessage(JSON.stringify({ type: 'heartbeat', running: [] }))).toBeNull();
    expect(peekJobMessage(JSON.stringify({ jobId: 'x', type: 'job.exit' }))).toBeNull();
    expect(peekJobMessage(JSON.stringify({ type: 'job.exit', jobId: 'a"b' }))).toBeNull();
  });
});
