/**
 * The DO SQLite statements and rows written one `execute` call costs the team's Durable Object, counted
 * over its whole path on node:sqlite: submit and follow, one live output frame, the agent's exit, the
 * follower's end, the result, and the background copy to D1 — with the alarm re-armed as the DO
 * does after a placement (every capability's `nextWake`). Also: the count does not grow with the
 * jobs the team has open, and a restarted object (memory lost, storage kept) still places and
 * finishes jobs.
 */
import type { DatabaseSync } from 'node:sqlite';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { JobSpec } from '../../src/contracts/agent-protocol.ts';
import { encodeOutputFrame } from '../../src/contracts/output-frame.ts';
import type { DispatchRequest } from '../../src/dispatch/events.ts';
import { dispatchHost, FakeSocket } from './sql-host.ts';
import { connect, exitOf, HB, helloOf, request, say, setup } from './team-fixture.ts';

/**
 * Cloudflare bills and times every DO SQLite statement, and one call used to make 34 (41 with the
 * alarm's re-arm), most of them reads of rows the object had just read or written (issue #28); then 13,
 * of which 6 were reads of what the object knew: the new job's id looked up twice in every day, the
 * audit log's highest id and its row's day, the egress alarm time (issue #40). Now the job's row and
 * its audit row, written and completed, one lookup of the new id, and the output's artifact record (7),
 * and the job's start when it waited in the queue.
 */
const STATEMENTS_PER_CALL = 8;

/**
 * Cloudflare bills each row written ($1.00 per million), and each index entry a write changes is one
 * more. A call wrote 20 (table rows and index entries as counted here, alarms aside) before a job's spec
 * went into its row, its upload grant was derived, the jobs' state and cancel-key indexes went, and a
 * short job's live output stayed in memory; now 10: the job's row with its two index entries, its start
 * and its end; the call's audit row with its index entries, and its two completions.
 */
const ROWS_WRITTEN_PER_CALL = 11;

type Team = ReturnType<typeof setup>;

/** The DO's re-arm after work (team-dispatcher.ts `rearm`): it asks every capability for its next wake-up. */
function rearmLikeTheDO(t: Team): void {
  t.host.wake = async () => {
    t.host.wakeCalls += 1;
    for (const w of t.c.wakes) w.nextWake(t.host.now());
  };
}

/** Counts the statements run on the object's SQLite from now on, and the rows they wrote (`run.rowsWritten`). */
function countStatements(t: Team): string[] & { rowsWritten: number } {
  const run = Object.assign([] as string[], { rowsWritten: 0 });
  const exec = t.host.sql.exec.bind(t.host.sql);
  t.host.sql.exec = ((q: string, ...params: SqlStorageValue[]) => {
    run.push(q);
    const cursor = exec(q, ...params);
    run.rowsWritten += cursor.rowsWritten * (1 + indexEntries(t.host.db, q));
    return cursor;
  }) as typeof t.host.sql.exec;
  return run;
}

/**
 * The index entries a write changes per row it writes, as Cloudflare counts them (each one a row written):
 * every index of the table for an INSERT or a DELETE, those over a column it sets for an UPDATE.
 */
function indexEntries(db: DatabaseSync, q: string): number {
  const m = /^\s*(INSERT(?:\s+OR\s+\w+)?\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)/i.exec(q);
  if (!m) return 0;
  const indexes = db.prepare(`PRAGMA index_list(${m[2]})`).all() as { name: string }[];
  if (!/^UPDATE/i.test(m[1])) return indexes.length;
  const set = [.../\bSET\s+([\s\S]*?)\s+WHERE\b/i.exec(q)![1].matchAll(/(\w+)\s*=/g)].map((c) => c[1]);
  return indexes.filter((ix) => (db.prepare(`PRAGMA index_info(${ix.name})`).all() as { name: string }[]).some((c) => set.includes(c.name))).length;
}

/** Lets the background work run out: the delayed D1 copy of a start, and the passes it awaits. */
async function settle(): Promise<void> {
  await vi.advanceTimersByTimeAsync(1000);
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}

/** One execute call as the edge makes it, to its end and its D1 copy; returns the follower's events. */
async function executeCall(t: Team, ws: FakeSocket, jobId: string, o: Partial<DispatchRequest> = {}) {
  const answer = await t.c.jobs.submit(request(jobId, o));
  const events = t.c.followers.follow(jobId);
  const frame = encodeOutputFrame({ jobId, stream: 'stdout', offset: 0, data: new TextEncoder().encode('hi\n') });
  await t.c.messages.receive(ws as unknown as WebSocket, frame.slice().buffer);
  // As an agent sends it when the live frames carried the whole inline result: the edge rebuilds the text.
  await say(t, ws, { ...exitOf(jobId, ''), streams: exitOf(jobId, 'hi\n').streams, inlineFromLive: true });
  const lines = (await new Response(events).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type: string; exit?: { stdout: string } });
  const result = t.c.views.result(jobId);
  await settle();
  return { answer, lines, result };
}

describe('DO statements per execute call', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it(`makes at most ${STATEMENTS_PER_CALL} statements for one call, which still runs, answers and reaches D1`, async () => {
    const t = setup();
    rearmLikeTheDO(t);
    const ws = await connect(t, 'a1');
    await executeCall(t, ws, 'j0'); // the object's first call reads what it keeps once
    const batches = t.batches.length;
    const run = countStatements(t);
    const { answer, lines, result } = await executeCall(t, ws, 'j1');
    expect(run.length).toBeLessThanOrEqual(STATEMENTS_PER_CALL);
    expect(run.rowsWritten).toBeLessThanOrEqual(ROWS_WRITTEN_PER_CALL);
    expect(answer).toEqual({ ok: true, jobId: 'j1', state: 'running', agentId: 'a1' });
    expect(lines.map((e) => e.type)).toEqual(['started', 'output', 'exit']);
    expect(lines[2].exit?.stdout).toBe('hi\n');
    expect(result?.view).toMatchObject({ state: 'exited', exit_code: 0, agent_id: 'a1' });
    expect(result?.exit?.stdout).toBe('hi\n');
    // No D1 at all: the call's audit row is the team's own, written and completed here.
    expect(t.batches.slice(batches)).toEqual([]);
    expect(t.c.auditLog.query({ jobId: 'j1' }).entries).toMatchObject([{ decision: 'allowed', exitStatus: 'exit 0', tool: 'execute' }]);
  });

  it('makes no more statements for a call while 20 other jobs of the team are queued or running', async () => {
    const t = setup();
    rearmLikeTheDO(t);
    const a1 = await connect(t, 'a1');
    await connect(t, 'a2');
    const roomy = { maxConcurrentJobs: 50, maxQueueLength: 50 };
    await executeCall(t, a1, 'j0', roomy);
    // One running on a1 (a slot left), two filling a2, and 17 waiting for a2.
    await t.c.jobs.submit(request('o0', { ...roomy, agent: 'a1' }));
    for (let i = 1; i < 20; i++) await t.c.jobs.submit(request(`o${i}`, { ...roomy, agent: 'a2' }));
    await settle();
    expect([t.c.rows.queued().length, t.c.rows.running().length]).toEqual([17, 3]);
    const run = countStatements(t);
    const { lines } = await executeCall(t, a1, 'j1', roomy);
    expect(run.length).toBeLessThanOrEqual(STATEMENTS_PER_CALL);
    expect(run.rowsWritten).toBeLessThanOrEqual(ROWS_WRITTEN_PER_CALL);
    expect(lines.at(-1)?.exit?.stdout).toBe('hi\n');
    expect([t.c.rows.queued().length, t.c.rows.running().length]).toEqual([17, 3]);
  });

  it('places and finishes jobs after a restart over the same storage (what it keeps in memory is read again)', async () => {
    const t = setup();
    const ws = await connect(t, 'a1');
    await executeCall(t, ws, 'j0');
    // a1 (capacity 2) runs j1 and j2; j3 waits for a slot. Then the object restarts: memory and sockets are gone.
    for (const id of ['j1', 'j2', 'j3']) await t.c.jobs.submit(request(id));
    expect(t.c.rows.queued().map((r) => r.id)).toEqual(['j3']);
    const host = dispatchHost({ db: t.host.db, env: t.host.env, heartbeatMs: HB });
    host.clock.now = t.host.clock.now;
    const r = setup({ host });
    rearmLikeTheDO(r);
    // The agent reconnects, still running j1 and j2.
    const again = new FakeSocket();
    host.socketList.push(again);
    const att = r.c.link.attachmentFor(new Request('https://x/', { headers: { 'X-Gatehouse-Subject': 'agent-a1', 'X-Gatehouse-Token-Id': 'tok-agent-a1' } }));
    if (!att.ok) throw new Error(att.message);
    r.c.link.attach(again as unknown as WebSocket, att.att);
    await say(r, again, helloOf('a1', { running: ['j1', 'j2'] }));
    expect(again.of('job.start')).toEqual([]); // still full
    expect([r.c.rows.running().map((j) => j.id), r.c.rows.queued().map((j) => j.id)]).toEqual([['j1', 'j2'], ['j3']]);
    // j1's end frees a slot: j3 starts with the spec stored before the restart.
    await say(r, again, exitOf('j1', 'one\n'));
    const [start] = again.of('job.start') as { spec: JobSpec }[];
    expect(start.spec).toMatchObject({ jobId: 'j3', command: 'echo', args: ['hi'] });
    await say(r, again, exitOf('j2', 'two\n'));
    // A new call after the restart: numbered after every stored job, placed, finished, copied.
    const { answer, lines } = await executeCall(r, again, 'j4');
    expect(answer).toMatchObject({ ok: true, state: 'running', agentId: 'a1' });
    expect(lines.at(-1)?.exit?.stdout).toBe('hi\n');
    await say(r, again, exitOf('j3', 'three\n'));
    await settle();
    expect(r.c.rows.get('j4')!.seq).toBeGreaterThan(r.c.rows.get('j3')!.seq);
    expect(['j1', 'j2', 'j3', 'j4'].map((id) => r.c.views.result(id)?.exit?.stdout)).toEqual(['one\n', 'two\n', 'three\n', 'hi\n']);
    expect([r.c.rows.queued(), r.c.rows.running()]).toEqual([[], []]);
    // What the restarted object kept in memory matches a third reading of the same storage.
    const fresh = setup({ host: dispatchHost({ db: t.host.db, env: t.host.env, heartbeatMs: HB }) });
    for (const id of ['j0', 'j1', 'j2', 'j3', 'j4']) expect(fresh.c.rows.get(id)).toEqual(r.c.rows.get(id));
  });
});
