/**
 * The pure scheduler with a fake clock: FIFO, per-agent capacity, team concurrency, least-loaded
 * choice, queue deadlines, capacity reused at once, placement (runtime, sandbox floor, labels, agent).
 */
import { describe, expect, it } from 'vitest';
import { schedule, whyNoAgentFits, type SchedAgent, type SchedJob } from '../../src/dispatch/scheduler.ts';

const agent = (id: string, o: Partial<SchedAgent> = {}): SchedAgent => ({
  id,
  capacity: 4,
  running: 0,
  sandbox: 'gvisor',
  labels: [],
  runtimes: ['python', 'node'],
  ...o,
});
const job = (id: string, o: Partial<SchedJob> = {}): SchedJob => ({ id, deadline: 10_000, ...o });
const NOW = 1_000;

describe('scheduler', () => {
  it("starts queued jobs oldest first and never exceeds an agent's capacity", () => {
    const queue = Array.from({ length: 6 }, (_, i) => job(`j${i}`));
    const d = schedule({ now: NOW, queue, agents: [agent('a', { capacity: 4 })], teamRunning: 0, maxConcurrent: 100 });
    expect(d.start.map((s) => s.jobId)).toEqual(['j0', 'j1', 'j2', 'j3']);
    expect(d.expire).toEqual([]);
  });

  it('never exceeds the team concurrency limit, counting jobs already running', () => {
    const queue = [job('j0'), job('j1'), job('j2')];
    const d = schedule({ now: NOW, queue, agents: [agent('a', { capacity: 8, running: 1 })], teamRunning: 1, maxConcurrent: 2 });
    expect(d.start.map((s) => s.jobId)).toEqual(['j0']);
  });

  it('picks the least-loaded agent (by share of capacity), deterministically on ties', () => {
    const agents = [agent('busy', { capacity: 4, running: 3 }), agent('idle-b', { capacity: 2, running: 0 }), agent('idle-a', { capacity: 2, running: 0 })];
    const d = schedule({ now: NOW, queue: [job('j0'), job('j1'), job('j2')], agents, teamRunning: 3, maxConcurrent: 100 });
    expect(d.start).toEqual([
      { jobId: 'j0', agentId: 'idle-a' },
      { jobId: 'j1', agentId: 'idle-b' },
      { jobId: 'j2', agentId: 'idle-a' },
    ]);
  });

  it('reuses capacity at once: a slot freed by an exit, a lost job or a cancel starts the next job in the same pass', () => {
    const queue = [job('next')];
    const full = schedule({ now: NOW, queue, agents: [agent('a', { capacity: 1, running: 1 })], teamRunning: 1, maxConcurrent: 4 });
    expect(full.start).toEqual([]);
    // The DO recounts running jobs from its table after any job ends; the same queue then starts.
    const freed = schedule({ now: NOW + 1, queue, agents: [agent('a', { capacity: 1, running: 0 })], teamRunning: 0, maxConcurrent: 4 });
    expect(freed.start).toEqual([{ jobId: 'next', agentId: 'a' }]);
  });

  it('expires a job still queued at its deadline, with the reason', () => {
    const queue = [job('late', { deadline: 500 }), job('ok', { deadline: 5_000 })];
    const d = schedule({ now: NOW, queue, agents: [agent('a', { capacity: 1, running: 1 })], teamRunning: 1, maxConcurrent: 4 });
    expect(d.expire).toEqual([{ jobId: 'late', reason: 'busy' }]);
    expect(d.start).toEqual([]);
    const none = schedule({ now: NOW, queue: [job('x', { deadline: 0 })], agents: [], teamRunning: 0, maxConcurrent: 4 });
    expect(none.expire).toEqual([{ jobId: 'x', reason: 'no_agent' }]);
  });

  it('keeps a job waiting (not failed) while no agent is connected, until its deadline', () => {
    const d = schedule({ now: NOW, queue: [job('j', { deadline: NOW + 1 })], agents: [], teamRunning: 0, maxConcurrent: 4 });
    expect(d).toEqual({ start: [], expire: [] });
  });

  it('never gives a job of a gVisor-floor team to a bwrap or none agent', () => {
    const agents = [agent('bw', { sandbox: 'bwrap' }), agent('raw', { sandbox: 'none' })];
    const d = schedule({ now: NOW, queue: [job('j', { sandboxMinimum: 'gvisor' })], agents, teamRunning: 0, maxConcurrent: 4 });
    expect(d.start).toEqual([]);
    expect(whyNoAgentFits(job('j', { sandboxMinimum: 'gvisor' }), agents)).toBe('sandbox');
    const floorBwrap = schedule({ now: NOW, queue: [job('j', { sandboxMinimum: 'bwrap' })], agents, teamRunning: 0, maxConcurrent: 4 });
    expect(floorBwrap.start).toEqual([{ jobId: 'j', agentId: 'bw' }]);
  });

  it('honours runtime, labels and a named agent', () => {
    const agents = [
      agent('cpu', { labels: ['linux-x64'], runtimes: ['python'] }),
      agent('gpu', { labels: ['gpu', 'linux-x64'], runtimes: ['python', 'rust'] }),
    ];
    const d = schedule({
      now: NOW,
      agents,
      teamRunning: 0,
      maxConcurrent: 10,
      queue: [job('needs-rust', { runtime: 'rust' }), job('needs-gpu', { labels: ['gpu'] }), job('named', { agent: 'cpu' })],
    });
    expect(d.start).toEqual([
      { jobId: 'needs-rust', agentId: 'gpu' },
      { jobId: 'needs-gpu', agentId: 'gpu' },
      { jobId: 'named', agentId: 'cpu' },
    ]);
    expect(whyNoAgentFits(job('x', { runtime: 'kotlin' }), agents)).toBe('runtime');
    expect(whyNoAgentFits(job('x', { labels: ['arm64'] }), agents)).toBe('labels');
    expect(whyNoAgentFits(job('x', { agent: 'nope' }), agents)).toBe('agent');
    // The agent that got furthest says what to change: the gVisor agent lacks the label, the bwrap one fails the floor.
    expect(whyNoAgentFits(job('x', { sandboxMinimum: 'gvisor', labels: ['arm64'] }), [agent('bw', { sandbox: 'bwrap' }), agent('gv')])).toBe('labels');
  });

  it('is FIFO: a later job never takes a slot an earlier waiting job could use', () => {
    // j0 needs the gpu agent (full); j1 could run anywhere. j1 may use cpu, but not gpu's next free slot.
    const agents = [agent('gpu', { labels: ['gpu'], capacity: 1, running: 1 }), agent('cpu', { capacity: 1, running: 1 })];
    const d = schedule({ now: NOW, queue: [job('j0', { labels: ['gpu'] }), job('j1')], agents, teamRunning: 2, maxConcurrent: 10 });
    expect(d.start).toEqual([]);
    const gpuFree = schedule({
      now: NOW,
      queue: [job('j0', { labels: ['gpu'] }), job('j1')],
      teamRunning: 1,
      maxConcurrent: 10,
      agents: [agent('gpu', { labels: ['gpu'], capacity: 1, running: 0 }), agent('cpu', { capacity: 1, running: 1 })],
    });
    expect(gpuFree.start).toEqual([{ jobId: 'j0', agentId: 'gpu' }]);
    // Same requirements: strictly in order, the head first.
    const plain = schedule({ now: NOW, queue: [job('a'), job('b')], agents: [agent('x', { capacity: 1 })], teamRunning: 0, maxConcurrent: 10 });
    expect(plain.start).toEqual([{ jobId: 'a', agentId: 'x' }]);
  });
});
