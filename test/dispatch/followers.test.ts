/**
 * Callers waiting on a job (src/dispatch/followers.ts): a follower gets where the job stands, then
 * its end — but only once the uploads its exit announced are settled — and a status long-poll
 * returns when the job ends, not at its time limit.
 */
import { specOf } from './team-fixture.ts';
import { describe, expect, it } from 'vitest';
import type { JobExit } from '../../src/contracts/agent-protocol.ts';
import { Followers } from '../../src/dispatch/followers.ts';
import { jobParts } from './job-parts.ts';
import { sqlHost } from './sql-host.ts';

function jobs() {
  const store = jobParts(sqlHost()).store;
  const add = (id: string) =>
    store.create({
      spec: specOf(id),
      tool: 'execute',
      subject: 'alice',
      tokenId: 't',
      cancelKey: `k-${id}`,
      background: false,
      maxConcurrent: 4,
      deadline: 1e9,
      now: 1,
    });
  return { store, add };
}

const exitOf = (id: string, pending: ('stdout' | 'stderr')[] = []): JobExit => ({
  type: 'job.exit',
  jobId: id,
  state: 'exited',
  exitCode: 0,
  signal: null,
  timedOut: false,
  durationMs: 5,
  stdout: 'out',
  stderr: '',
  stdoutTruncated: false,
  stderrTruncated: false,
  artifactsUploaded: pending.length === 0,
  pendingArtifacts: pending,
  streams: { stdout: { bytes: 3, lines: 1, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
});

const read = async (s: ReadableStream<Uint8Array>) =>
  (await new Response(s).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type: string });

describe('followers', () => {
  it('tells a follower the queue position, then the end; an unknown job is not_found', async () => {
    const { store, add } = jobs();
    const f = new Followers(store);
    add('a');
    add('b');
    const s = f.follow('b');
    store.finish('b', 'cancelled', 2, { error: { code: 'cancelled', message: 'stop' } });
    f.ended('b');
    expect(await read(s)).toEqual([
      { type: 'queued', jobId: 'b', position: 2 },
      { type: 'error', code: 'cancelled', message: 'stop' },
    ]);
    expect(await read(f.follow('nope'))).toEqual([{ type: 'error', code: 'not_found', message: 'job "nope" not found' }]);
  });

  it('holds the end back until the uploads the exit announced are settled', async () => {
    const { store, add } = jobs();
    let settled = 0;
    const f = new Followers(store, () => (settled += 1));
    add('j');
    store.assign('j', { id: 'a1', subject: 's', sandbox: 'bwrap' }, 2);
    const s = f.follow('j');
    store.finish('j', 'exited', 3, { exit: exitOf('j', ['stdout']), fromAgent: 'a1' });
    f.ended('j');
    expect(settled).toBe(0);
    store.endUpload('j', 'stdout', 3);
    f.settle('j');
    expect(settled).toBe(1);
    const got = await read(s);
    expect(got.map((e) => e.type)).toEqual(['started', 'exit']);
  });

  it('wakes a status long-poll when the job ends', async () => {
    const { store, add } = jobs();
    const f = new Followers(store);
    add('j');
    let woke = false;
    const wait = f.waitForEnd('j', 600_000).then(() => (woke = true));
    await Promise.resolve();
    expect(woke).toBe(false);
    store.finish('j', 'cancelled', 2, { error: { code: 'cancelled', message: 'stop' } });
    f.ended('j');
    await wait;
    expect(woke).toBe(true);
  });
});
