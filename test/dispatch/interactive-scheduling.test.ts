/**
 * Interactive jobs in the pure scheduler: their own budget beside the team's concurrency limit, and never on an
 * agent whose protocol cannot carry their input (it would close stdin at start and drop every write).
 */
import { describe, expect, it } from 'vitest';
import { schedule, whyNoAgentFits, type SchedAgent, type SchedJob } from '../../src/dispatch/scheduler.ts';
import { INTERACTIVE_MIN_PROTOCOL } from '../../src/contracts/interactive.ts';
import { refusalOf } from '../../src/dispatch/job-refusals.ts';
import type { JobRow } from '../../src/dispatch/job-rows.ts';

const agent = (id: string, o: Partial<SchedAgent> = {}): SchedAgent => ({ id, capacity: 4, running: 0, sandbox: 'gvisor', labels: [], runtimes: [], ...o });
const job = (id: string, o: Partial<SchedJob> = {}): SchedJob => ({ id, deadline: 10_000, ...o });
const NOW = 1_000;

describe('interactive jobs in the scheduler', () => {
  it('starts a session while the team runs its one allowed job, and a normal job beside a running session', () => {
    const full = schedule({
      now: NOW,
      queue: [job('plain'), job('repl', { interactive: true })],
      agents: [agent('a', { running: 1 })],
      teamRunning: 1,
      maxConcurrent: 1,
    });
    expect(full.start).toEqual([{ jobId: 'repl', agentId: 'a' }]);
    // The caller counts only jobs that take a slot: a running session is not among them.
    const beside = schedule({ now: NOW, queue: [job('plain')], agents: [agent('a', { running: 1 })], teamRunning: 0, maxConcurrent: 1 });
    expect(beside.start).toEqual([{ jobId: 'plain', agentId: 'a' }]);
  });

  it("still respects the agent's capacity", () => {
    const d = schedule({
      now: NOW,
      queue: [job('repl', { interactive: true })],
      agents: [agent('a', { capacity: 1, running: 1 })],
      teamRunning: 0,
      maxConcurrent: 4,
    });
    expect(d.start).toEqual([]);
  });

  it('never places a session on an agent of an older protocol, and says why', () => {
    const old = agent('old', { protocol: INTERACTIVE_MIN_PROTOCOL - 1 });
    const d = schedule({ now: NOW, queue: [job('repl', { interactive: true }), job('plain')], agents: [old], teamRunning: 0, maxConcurrent: 4 });
    expect(d.start).toEqual([{ jobId: 'plain', agentId: 'old' }]);
    expect(whyNoAgentFits(job('repl', { interactive: true }), [old])).toBe('protocol');
    expect(whyNoAgentFits(job('repl', { interactive: true }), [old, agent('new', { protocol: INTERACTIVE_MIN_PROTOCOL })])).toBeNull();
    const row = { deadline: 5_000, created_at: 0 } as JobRow;
    const f = refusalOf(row, 'protocol', { team: 't', connected: ['old'], active: 0, agents: 1, slots: 4 });
    expect(f.code).toBe('no_agent');
    expect(f.message).toContain(`needs agent protocol v${INTERACTIVE_MIN_PROTOCOL} or later`);
  });
});
