/**
 * The operators' data points in Workers Analytics Engine, written through the `METRICS` binding.
 * `wrangler dev` drops Analytics Engine writes locally, so these tests hand the writers a recording
 * stand-in for the binding and check what reached it: each metric's layout within the platform's
 * limits, the team's Durable Object's job and counter points, and a call's point.
 */
import { describe, expect, it } from 'vitest';
import {
  AE_BLOBS_MAX_BYTES,
  AE_INDEX_MAX_BYTES,
  AE_MAX_BLOBS,
  AE_MAX_DOUBLES,
  AE_MAX_INDEXES,
  AE_POINTS_PER_INVOCATION,
  LAYOUT,
  writeMetric,
  type MetricsSink,
} from '../../src/platform/metrics.ts';
import { MAX_BATCH_MESSAGES } from '../../src/mcp/bounds.ts';
import { closeCall, noteCall, openCall } from '../../src/edge/call-log.ts';
import type { Principal } from '../../src/auth/principal.ts';
import { dispatchHost } from '../dispatch/sql-host.ts';
import { connect, exitOf, HB, request, say, setup } from '../dispatch/team-fixture.ts';

type Point = { indexes: string[]; blobs: string[]; doubles: number[] };

/** A stand-in for the Analytics Engine binding that keeps every data point written to it. */
function recorder(): MetricsSink & { points: Point[]; of(metric: string): Point[] } {
  const points: Point[] = [];
  return {
    points,
    writeDataPoint(p) {
      points.push(p as Point);
    },
    of: (metric) => points.filter((p) => p.blobs[0] === metric),
  };
}

/** A point's columns by the names LAYOUT gives them. */
function named(metric: keyof typeof LAYOUT, p: Point): Record<string, string | number> {
  const l = LAYOUT[metric];
  return {
    team: p.indexes[0],
    deployment: p.blobs[1],
    ...Object.fromEntries(l.blobs.map((k, i) => [k, p.blobs[i + 2]])),
    ...Object.fromEntries(l.doubles.map((k, i) => [k, p.doubles[i]])),
  };
}

const utf8 = (s: string) => new TextEncoder().encode(s).length;

describe('Analytics Engine data points', () => {
  it('every metric fits one writeDataPoint call: its name, the deployment and its blobs, doubles, one index', () => {
    for (const [metric, l] of Object.entries(LAYOUT)) {
      expect(l.blobs.length + 2, metric).toBeLessThanOrEqual(AE_MAX_BLOBS);
      expect(l.doubles.length, metric).toBeLessThanOrEqual(AE_MAX_DOUBLES);
    }
    expect(AE_MAX_INDEXES).toBe(1);
    // A batch of tool calls writes one point per call: it stays within one invocation's points.
    expect(MAX_BATCH_MESSAGES).toBeLessThan(AE_POINTS_PER_INVOCATION);
  });

  it('writes the team as the index and the columns in layout order, cutting what could pass the limits', () => {
    const m = recorder();
    const long = 'ü'.repeat(50_000);
    writeMetric(
      { METRICS: m },
      'call',
      'é'.repeat(200),
      { surface: 'mcp', tool: long, decision: null, stage: null, outcome: long, sandbox: long, agent: long },
      { latency_ms: 12 },
    );
    const [p] = m.points;
    expect(p.indexes).toHaveLength(1);
    expect(utf8(p.indexes[0])).toBeLessThanOrEqual(AE_INDEX_MAX_BYTES);
    expect(p.indexes[0]).toBe('é'.repeat(AE_INDEX_MAX_BYTES / 2));
    expect(p.blobs[0]).toBe('call');
    expect(p.blobs.reduce((n, b) => n + utf8(b), 0)).toBeLessThanOrEqual(AE_BLOBS_MAX_BYTES);
    expect(named('call', p)).toMatchObject({ deployment: 'local', surface: 'mcp', decision: '', stage: '', latency_ms: 12 });
  });

  it('does nothing without the binding, and never throws when the binding does', () => {
    expect(() => writeMetric({}, 'team', 'acme', { at: 'submit' }, { queued: 1, running: 0, agents: 0, slots: 0 })).not.toThrow();
    const failing: MetricsSink = {
      writeDataPoint() {
        throw new Error('too many data points in this invocation');
      },
    };
    expect(() => writeMetric({ METRICS: failing }, 'team', 'acme', { at: 'submit' }, { queued: 1, running: 0, agents: 0, slots: 0 })).not.toThrow();
  });

  it('a call writes one point with its tool, decision, stage, outcome, agent and latency', () => {
    const m = recorder();
    const key = {};
    const principal: Principal = { team: 'acme', subject: 'ci-bot', scopes: ['execute'], tokenId: 'jti-1', issuer: 'https://gw' };
    openCall(key, { surface: 'mcp', tool: 'execute', principal });
    noteCall(key, { decision: 'allowed', stage: 'policy', jobId: 'j1', agent: 'a1', sandbox: 'bwrap', outcome: 'exited', exitCode: 0 });
    const env = { METRICS: m, GATEHOUSE_ISSUER: 'https://gatehouse-staging.example.com' };
    closeCall(env, key, 'ok');
    closeCall(env, key, 'ok'); // once only
    expect(m.points).toHaveLength(1);
    expect(named('call', m.points[0])).toMatchObject({
      team: 'acme',
      deployment: 'gatehouse-staging.example.com',
      surface: 'mcp',
      tool: 'execute',
      decision: 'allowed',
      stage: 'policy',
      outcome: 'exited',
      sandbox: 'bwrap',
      agent: 'a1',
    });
  });

  it("the team's object writes its counters at each job ended and each one queued, and each job's duration and queue wait", async () => {
    const m = recorder();
    const t = setup({ host: dispatchHost({ heartbeatMs: HB, env: { METRICS: m, GATEHOUSE_WORKERS_PLAN: 'paid' } as never }) });
    const ws = await connect(t, 'a1');
    // The agent has two slots: the third job waits in the queue. Jobs placed at once write no point of their own (their end does).
    await t.c.jobs.submit(request('j1'));
    await t.c.jobs.submit(request('j2'));
    await t.c.jobs.submit(request('j3'));
    await Promise.resolve();
    expect(m.of('team').map((p) => named('team', p))).toEqual([
      { team: 'acme', deployment: 'local', at: 'submit', queued: 1, running: 2, agents: 1, slots: 2 },
    ]);
    t.host.clock.now += 250;
    await say(t, ws, exitOf('j1', 'hi\n'));
    await Promise.resolve();
    const [job] = m.of('job').map((p) => named('job', p));
    expect(job).toEqual({
      team: 'acme',
      deployment: 'local',
      state: 'exited',
      sandbox: 'bwrap',
      agent: 'a1',
      tool: 'execute',
      error: '',
      duration_ms: 250,
      queue_wait_ms: 0,
    });
    // Counted the moment j1 ended, before j3 takes its slot.
    expect(named('team', m.of('team').at(-1)!)).toMatchObject({ at: 'end', queued: 1, running: 1 });
    // The dashboard's health section reads the same counters and the last job's timing.
    expect(t.c.jobs.health()).toEqual({ queued: 0, running: 2, lastJob: { endedAt: t.host.clock.now, durationMs: 250, queueWaitMs: 0 } });
    // A gauge: a job that leaves the counters where the last point put them writes no team point.
    await say(t, ws, exitOf('j2', 'hi\n'));
    await say(t, ws, exitOf('j3', 'hi\n'));
    await Promise.resolve();
    const points = m.of('team').length;
    expect(named('team', m.of('team').at(-1)!)).toMatchObject({ at: 'end', queued: 0, running: 0 });
    await t.c.jobs.submit(request('j4'));
    await say(t, ws, exitOf('j4', 'hi\n'));
    await Promise.resolve();
    expect(m.of('team')).toHaveLength(points);
    expect(m.of('job')).toHaveLength(4);
  });
});
