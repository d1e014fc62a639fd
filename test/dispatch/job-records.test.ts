/**
 * A job's stores (rows, texts, live output, stream states) against a real SQLite (node:sqlite standing in for `ctx.storage.sql`):
 * exactly-once results, chunked storage below Cloudflare's row limit, byte offsets of the live
 * output, write-once artifacts, paging; plus the agent's splitting of oversized results and the
 * size of the socket attachment.
 */
import { specOf } from './team-fixture.ts';
import { describe, expect, it, vi } from 'vitest';
import { serialize } from 'node:v8';
import { EXIT_ROW_INLINE_CHARS } from '../../src/dispatch/job-records.ts';
import { jobParts, type TestJobStore } from './job-parts.ts';
import { YOUNG_MS } from '../../src/dispatch/live-output.ts';
import type { SqlHost } from '../../src/dispatch/capability-host.ts';
import { sqlHost } from './sql-host.ts';
import { OUTPUT_FRAME_JOB_ID_MAX_BYTES, outputFrameBytes } from '../../src/contracts/output-frame.ts';
import { LIVE_FRAME_DATA_BYTES, LIVE_OUTPUT_MAX_BYTES, STORED_OUTPUT_CHUNK_BYTES, STORED_CHUNK_CHARS, splitText } from '../../src/contracts/limits.ts';
import { DO_STORAGE_MAX_BYTES, HIBERNATION_ATTACHMENT_MAX_BYTES, SQLITE_ROW_MAX_BYTES, WEBSOCKET_MESSAGE_MAX_BYTES } from '../../src/platform/limits.ts';
import type { JobExit, JobSpec } from '../../src/contracts/agent-protocol.ts';
import { exitMessages } from '../../executor/agent.ts';
import { PolicyDocument } from '../../src/contracts/policy.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import type { AgentAttachment } from '../../src/dispatch/agent-link.ts';

const spec = specOf;
const newJob = (store: TestJobStore, id: string, extra: Partial<JobSpec> = {}) =>
  store.create({
    spec: spec(id, extra),
    tool: 'execute',
    subject: 'alice',
    tokenId: 't1',
    cancelKey: `k-${id}`,
    background: false,
    maxConcurrent: 4,
    deadline: 10_000,
    now: 1,
  });
const exitOf = (id: string, stdout: string, extra: Partial<JobExit> = {}): JobExit => ({
  type: 'job.exit',
  jobId: id,
  state: 'exited',
  exitCode: 0,
  signal: null,
  timedOut: false,
  durationMs: 5,
  stdout,
  stderr: '',
  stdoutTruncated: false,
  stderrTruncated: false,
  artifactsUploaded: true,
  streams: { stdout: { bytes: stdout.length, lines: 1, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
  ...extra,
});
const agentA = { id: 'a', subject: 'agent-a', sandbox: 'gvisor' as const };
/** Live output in order, each piece at the stream's current end (what the agent's relay sends). */
const append = (store: TestJobStore, id: string, stream: 'stdout' | 'stderr', data: string | Uint8Array) =>
  store.appendOutput(id, stream, store.relayed(id, stream), typeof data === 'string' ? Buffer.from(data) : data);

describe('job store', () => {
  it('accepts a result exactly once, only from the assigned agent, only while the job is open', () => {
    const h = sqlHost();
    const store = jobParts(h).store;
    newJob(store, 'j1');
    expect(store.assign('j1', agentA, 2)).toBe(true);
    expect(store.finish('j1', 'exited', 3, { exit: exitOf('j1', 'FORGED'), fromAgent: 'rogue' })).toBe(false);
    expect(store.finish('j1', 'exited', 3, { exit: exitOf('j1', 'real\n'), fromAgent: 'a' })).toBe(true);
    expect(store.finish('j1', 'exited', 4, { exit: exitOf('j1', 'again'), fromAgent: 'a' })).toBe(false);
    expect(store.finish('j1', 'lost', 5, { error: { code: 'lost', message: 'x' } })).toBe(false);
    expect(store.result('j1')?.stdout).toBe('real\n');
    expect(store.get('j1')?.state).toBe('exited');
  });

  it('stores a 10 MiB inline output (with multi-byte characters on chunk edges) in rows below the 2 MB limit and reads it back', () => {
    const h = sqlHost();
    const store = jobParts(h).store;
    newJob(store, 'big');
    store.assign('big', agentA, 2);
    // An emoji (a surrogate pair) straddling every chunk boundary.
    const unit = 'x'.repeat(STORED_CHUNK_CHARS - 1) + '😀';
    const stdout = unit.repeat(Math.ceil((10 * 1024 * 1024) / unit.length)).slice(0, 10 * 1024 * 1024);
    expect(store.finish('big', 'exited', 3, { exit: exitOf('big', stdout), fromAgent: 'a' })).toBe(true);
    const biggest = h.db.prepare(`SELECT MAX(length(CAST(data AS BLOB))) AS b FROM job_blobs`).get() as { b: number };
    expect(biggest.b).toBeLessThan(SQLITE_ROW_MAX_BYTES);
    // A fresh store over the same database (what a restarted object sees).
    expect(jobParts(h).store.result('big')?.stdout).toBe(stdout);
  });

  it('keeps a result up to EXIT_ROW_INLINE_CHARS in the job row, a larger one in chunks, and still reads rows stored before that', () => {
    const h = sqlHost();
    const store = jobParts(h).store;
    const blobs = (id: string) =>
      (h.db.prepare(`SELECT count(*) AS n FROM job_blobs WHERE job_id = ? AND kind IN ('stdout', 'stderr')`).get(id) as { n: number }).n;
    const small = 'ö'.repeat(EXIT_ROW_INLINE_CHARS - 2); // with stderr's 2 characters: exactly the limit
    const large = 'x'.repeat(EXIT_ROW_INLINE_CHARS - 1); // one over
    for (const [id, stdout, inRow] of [
      ['small', small, true],
      ['large', large, false],
      ['empty', '', true],
    ] as const) {
      newJob(store, id);
      store.assign(id, agentA, 2);
      expect(store.finish(id, 'exited', 3, { exit: exitOf(id, stdout, { stderr: 'e\n' }), fromAgent: 'a' })).toBe(true);
      expect(blobs(id), id).toBe(inRow ? 0 : 2);
      for (const s of [store, jobParts(h).store]) {
        expect(s.result(id)?.stdout, id).toBe(stdout);
        expect(s.result(id)?.stderr, id).toBe('e\n');
        expect(s.result(id), id).not.toHaveProperty('outputInline');
      }
    }
    // A row a previous version stored: output in chunks, no flag in the row.
    h.db
      .prepare(
        `INSERT INTO jobs (id, seq, tool, subject, token_id, cancel_key, background, artifact_handle, state, created_at, deadline,
           timeout_ms, max_concurrent, started_at, ended_at, exit) VALUES ('old', 1, 'execute', 'alice', 't1', 'k', 0, 'art_old', 'exited', 1, 10000, 1000, 4, 2, 3, ?)`,
      )
      .run(JSON.stringify({ ...exitOf('old', ''), stdout: '', stderr: '' }));
    h.db.prepare(`INSERT INTO job_blobs (job_id, kind, seq, data) VALUES ('old', 'stdout', 0, 'from a chunk\n')`).run();
    expect(jobParts(h).store.result('old')?.stdout).toBe('from a chunk\n');
  });

  it("keeps a young job's output in memory, and writes it after YOUNG_MS only if the job runs or its end still needs it", () => {
    vi.useFakeTimers();
    try {
      const h = sqlHost();
      const { store } = jobParts(h, { youngMs: YOUNG_MS });
      const kept = () => h.db.prepare(`SELECT DISTINCT job_id FROM job_output ORDER BY job_id`).all();
      for (const id of ['short', 'long', 'lost']) {
        newJob(store, id);
        store.assign(id, agentA, 2);
        append(store, id, 'stdout', `${id}\n`);
      }
      expect(kept()).toEqual([]);
      // Read like stored output meanwhile (followers, job_output, an exit rebuilt from the live output).
      expect(Buffer.from(store.readOutput('long', 'stdout', 1, 100).data).toString()).toBe('ong\n');
      expect(store.view(store.get('long')!)).toMatchObject({ stdout_bytes: 5 });
      // A short job's exit carries its output: nothing to write. A lost job's live output is all there is of it.
      store.finish('short', 'exited', 3, { exit: exitOf('short', 'short\n'), fromAgent: 'a' });
      store.finish('lost', 'lost', 3, { error: { code: 'lost', message: 'agent gone' } });
      vi.advanceTimersByTime(YOUNG_MS);
      expect(kept()).toEqual([{ job_id: 'long' }, { job_id: 'lost' }]);
      append(store, 'long', 'stdout', 'more\n');
      // A restarted object reads it back.
      expect(Buffer.from(jobParts(h).store.readOutput('long', 'stdout', 0, 100).data).toString()).toBe('long\nmore\n');
      expect(jobParts(h).store.view(store.get('lost')!)).toMatchObject({ artifacts: { stdout: { state: 'partial', bytes: 5 } } });
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps jobs stored by a version that copied them to D1, and drops what only that copy needed', () => {
    const h = sqlHost();
    // The table as an earlier version created it: no d1_created column, an index for its copy, the audit text kept with the job.
    h.db.exec(`CREATE TABLE jobs (
      id TEXT PRIMARY KEY, seq INTEGER NOT NULL, tool TEXT NOT NULL, subject TEXT NOT NULL, token_id TEXT NOT NULL,
      cancel_key TEXT NOT NULL, runtime TEXT, sandbox_min TEXT, sel_agent TEXT, sel_labels TEXT,
      background INTEGER NOT NULL, artifact_handle TEXT NOT NULL, state TEXT NOT NULL, agent TEXT, agent_subject TEXT,
      sandbox TEXT, created_at INTEGER NOT NULL, deadline INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER,
      orphaned_at INTEGER, timeout_ms INTEGER NOT NULL, max_concurrent INTEGER NOT NULL, exit TEXT,
      error_code TEXT, error_message TEXT, audit_id INTEGER, synced INTEGER NOT NULL DEFAULT 0)`);
    h.db.exec(`CREATE INDEX jobs_unsynced ON jobs (seq) WHERE synced = 0`);
    h.db.exec(`CREATE TABLE job_blobs (job_id TEXT NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (job_id, kind, seq))`);
    h.db.exec(`INSERT INTO job_blobs VALUES ('old', 'audit', 0, '{}'), ('old', 'spec', 0, '{"jobId":"old"}')`);
    h.db.exec(`INSERT INTO jobs (id, seq, tool, subject, token_id, cancel_key, background, artifact_handle, state, created_at, deadline,
      timeout_ms, max_concurrent, audit_id) VALUES ('old', 1, 'execute', 'alice', 't1', 'k', 0, 'art_old', 'queued', 1, 10000, 1000, 4, 42)`);
    const store = jobParts(h).store;
    expect(store.get('old')).toMatchObject({ id: 'old', state: 'queued' });
    expect(store.spec('old')).toEqual({ jobId: 'old' });
    expect(h.db.prepare(`SELECT kind FROM job_blobs`).all()).toEqual([{ kind: 'spec' }]);
    expect(h.db.prepare(`SELECT name FROM sqlite_master WHERE name = 'jobs_unsynced'`).all()).toEqual([]);
    // A second start over the same storage is fine.
    expect(() => jobParts(h).store).not.toThrow();
  });

  it('never answers from a row it read before a write to it, nor from one a failed transaction wrote', () => {
    const h = sqlHost();
    let failCommit = false;
    const host: SqlHost = {
      sql: h.sql,
      transactionSync<T>(f: () => T): T {
        return h.transactionSync(() => {
          const v = f();
          if (failCommit) {
            // A read inside the transaction sees (and may keep) the write about to be rolled back.
            expect(store.get('j')?.state).toBe('exited');
            throw new Error('commit failed');
          }
          return v;
        });
      },
    };
    const store: TestJobStore = jobParts(host).store;
    newJob(store, 'j');
    expect(store.get('j')?.state).toBe('queued');
    expect(store.assign('j', agentA, 2)).toBe(true);
    expect(store.get('j')).toMatchObject({ state: 'running', agent: 'a' });
    store.setOrphaned(['j'], 7);
    expect(store.get('j')?.orphaned_at).toBe(7);
    store.clearOrphaned(['j']);
    expect(store.get('j')?.orphaned_at).toBeNull();
    // The finish is rolled back: the row read inside the transaction must not be kept.
    failCommit = true;
    expect(() => store.finish('j', 'exited', 3, { exit: exitOf('j', 'out'), fromAgent: 'a' })).toThrow('commit failed');
    expect(store.get('j')?.state).toBe('running');
    failCommit = false;
    expect(store.finish('j', 'exited', 3, { exit: exitOf('j', 'out'), fromAgent: 'a' })).toBe(true);
    expect(store.get('j')?.state).toBe('exited');
    expect(store.requeue('j')).toBe(false);
    // Rows handed out are read-only: a caller cannot change what the next caller reads.
    expect(() => {
      (store.get('j') as { state: string }).state = 'queued';
    }).toThrow();
    expect(jobParts(host).store.get('j')).toEqual(store.get('j'));
  });

  it('keeps live output by byte offset, multi-byte characters included', () => {
    const store = jobParts(sqlHost()).store;
    newJob(store, 'j');
    store.assign('j', agentA, 2);
    append(store, 'j', 'stdout', 'héllo\n');
    append(store, 'j', 'stdout', 'wörld\n');
    const all = store.readOutput('j', 'stdout', 0, 1000);
    expect(all.total).toBe(Buffer.byteLength('héllo\nwörld\n'));
    expect(Buffer.from(all.data).toString()).toBe('héllo\nwörld\n');
    const mid = store.readOutput('j', 'stdout', 7, 3);
    expect(Buffer.from(mid.data).toString()).toBe(Buffer.from('héllo\nwörld\n').subarray(7, 10).toString());
  });

  it('keeps live output byte for byte (NUL and invalid UTF-8 included) as one gap-free prefix at its true offsets', () => {
    const store = jobParts(sqlHost()).store;
    newJob(store, 'b');
    store.assign('b', agentA, 2);
    const bytes = Buffer.from([0, 0, 0xff, 0xfe, 0x0a, 0xc3]);
    expect(store.appendOutput('b', 'stdout', 0, bytes.subarray(0, 4))).toBe(4);
    // Sent again after a reconnect, overlapping what is kept: only the new bytes count.
    expect(store.appendOutput('b', 'stdout', 2, bytes.subarray(2))).toBe(2);
    // A frame past the end (the one before it was lost): ignored, nothing is kept at a wrong offset.
    expect(store.appendOutput('b', 'stdout', 10, Buffer.from('later'))).toBe(0);
    expect(store.appendOutput('b', 'stdout', 0, bytes)).toBe(0);
    const all = store.readOutput('b', 'stdout', 0, 100);
    expect(all.total).toBe(6);
    expect(Buffer.from(all.data).equals(bytes)).toBe(true);
  });

  it("writes each stream's artifact once", () => {
    const store = jobParts(sqlHost()).store;
    newJob(store, 'j');
    expect(store.beginUpload('j', 'stdout')).toBe(true);
    expect(store.beginUpload('j', 'stdout')).toBe(true); // a retry after a failed attempt
    store.endUpload('j', 'stdout', 10);
    expect(store.beginUpload('j', 'stdout')).toBe(false);
    expect(store.artifactRow('j', 'stdout')).toEqual({ state: 'complete', bytes: 10 });
  });

  it('records the exit at once while its announced uploads run; each stream ends complete, or partial with the live bytes kept', () => {
    const h = sqlHost();
    const store = jobParts(h).store;
    newJob(store, 'j');
    store.assign('j', agentA, 2);
    append(store, 'j', 'stdout', 'line-1\nline-2\n');
    append(store, 'j', 'stderr', 'warn\n');
    const exit = exitOf('j', 'line-1\nline-2\n', {
      artifactsUploaded: false,
      pendingArtifacts: ['stdout', 'stderr'],
      streams: { stdout: { bytes: 5000, lines: 300, artifactTruncated: false }, stderr: { bytes: 5, lines: 1, artifactTruncated: false } },
    });
    expect(store.finish('j', 'exited', 3, { exit, fromAgent: 'a' })).toBe(true);
    let v = store.view(store.get('j')!);
    expect(v).toMatchObject({
      state: 'exited',
      exit_code: 0,
      artifact_state: 'uploading',
      artifacts: { stdout: { state: 'uploading' }, stderr: { state: 'uploading' } },
    });
    expect(store.hasUploading('j')).toBe(true);
    expect(store.uploading().map((r) => r.id)).toEqual(['j']);
    // No row is written for a stream the exit left uploading: a restarted object finds it from the exit.
    expect(h.db.prepare(`SELECT count(*) AS n FROM job_artifacts`).get()).toEqual({ n: 0 });
    expect(
      jobParts(h)
        .store.uploading()
        .map((r) => r.id),
    ).toEqual(['j']);
    expect(store.result('j')?.artifactsUploaded).toBe(false);

    // stdout stored by the edge; stderr's upload failed (the agent's report), the edge kept its live bytes.
    expect(store.beginUpload('j', 'stdout')).toBe(true);
    store.endUpload('j', 'stdout', 5000);
    expect(store.reportArtifact('j', 'stdout')).toBe(false); // already complete: the agent's report changes nothing
    expect(store.reportArtifact('j', 'stderr')).toBe(true);
    expect(store.reportArtifact('j', 'stderr')).toBe(false); // once
    expect(store.beginUpload('j', 'stderr')).toBe(false); // given up: never written later
    v = store.view(store.get('j')!);
    expect(v).toMatchObject({
      state: 'exited',
      artifact_state: 'partial',
      artifacts: { stdout: { state: 'complete', bytes: 5000 }, stderr: { state: 'partial', bytes: 5 } },
    });
    expect(store.hasUploading('j')).toBe(false);
    expect([store.uploading(), jobParts(h).store.uploading()]).toEqual([[], []]);
    // The stored stream's live copy is dropped (R2 serves it); the failed one's stays readable.
    expect(store.relayed('j', 'stdout')).toBe(0);
    expect(Buffer.from(store.readOutput('j', 'stderr', 0, 100).data).toString()).toBe('warn\n');
  });

  it('an upload the agent calls complete but the edge never stored is failed; a lost job keeps what was relayed', () => {
    const store = jobParts(sqlHost()).store;
    newJob(store, 'j');
    store.assign('j', agentA, 2);
    store.finish('j', 'exited', 3, { exit: exitOf('j', 'x', { artifactsUploaded: false, pendingArtifacts: ['stdout'] }), fromAgent: 'a' });
    expect(store.reportArtifact('j', 'stdout')).toBe(true);
    expect(store.view(store.get('j')!)).toMatchObject({ artifact_state: 'failed', artifacts: { stdout: { state: 'failed', bytes: 0 } } });

    newJob(store, 'k');
    store.assign('k', agentA, 2);
    append(store, 'k', 'stdout', 'before the kill\n');
    store.finish('k', 'lost', 9, { error: { code: 'lost', message: 'agent gone' } });
    expect(store.view(store.get('k')!)).toMatchObject({
      state: 'lost',
      artifact_state: 'partial',
      stdout_bytes: 16,
      artifacts: { stdout: { state: 'partial', bytes: 16 } },
    });
  });

  it('keeps at most LIVE_OUTPUT_MAX_BYTES of a stream live, in rows below the row limit', () => {
    const h = sqlHost();
    const store = jobParts(h).store;
    newJob(store, 'j');
    store.assign('j', agentA, 2);
    const piece = Buffer.from('é'.repeat(3 * 1024 * 1024)); // 6 MiB, more than a frame carries: the store splits it anyway
    let kept = 0;
    for (let i = 0; i < 4; i++) kept += append(store, 'j', 'stdout', piece);
    expect(kept).toBe(LIVE_OUTPUT_MAX_BYTES);
    expect(store.relayed('j', 'stdout')).toBe(LIVE_OUTPUT_MAX_BYTES);
    const biggest = h.db.prepare(`SELECT MAX(length(CAST(data AS BLOB))) AS b FROM job_output`).get() as { b: number };
    expect(biggest.b).toBeLessThan(SQLITE_ROW_MAX_BYTES);
    const mid = store.readOutput('j', 'stdout', 10 * 1024 * 1024, 4);
    expect(Buffer.from(mid.data).toString()).toBe('éé');
  });

  it('pages the job list newest first with a cursor, and filters', () => {
    const store = jobParts(sqlHost()).store;
    for (let i = 0; i < 5; i++) newJob(store, `j${i}`);
    store.finish('j1', 'refused', 2, { error: { code: 'queue_full', message: 'full' } });
    const p1 = store.list({ limit: 2 });
    expect(p1.rows.map((r) => r.id)).toEqual(['j4', 'j3']);
    const p2 = store.list({ limit: 2, cursor: p1.next! });
    expect(p2.rows.map((r) => r.id)).toEqual(['j2', 'j1']);
    expect(store.list({ limit: 10, state: 'refused' }).rows.map((r) => r.id)).toEqual(['j1']);
  });
});

describe('platform limits', () => {
  it('splits text without breaking surrogate pairs', () => {
    const parts = splitText('ab😀cd', 3);
    expect(parts.join('')).toBe('ab😀cd');
    for (const p of parts) expect(Buffer.from(p).toString()).toBe(p);
    expect(splitText('', 3)).toEqual(['']);
  });

  it('sends a result too large for one WebSocket message as parts the edge reassembles', () => {
    const exit = exitOf('j', 'y'.repeat(5000), { stderr: 'z'.repeat(300) });
    const msgs = exitMessages(exit, 1000, 1024);
    expect(msgs.length).toBeGreaterThan(2);
    for (const m of msgs) expect(Buffer.byteLength(JSON.stringify(m))).toBeLessThan(2000);
    const last = msgs.at(-1) as JobExit;
    expect(last).toMatchObject({ type: 'job.exit', stdout: '', stderr: '', parts: { stdout: 5, stderr: 1 } });
    const parts = msgs.filter((m) => m.type === 'job.exit.part') as { stream: string; data: string }[];
    expect(
      parts
        .filter((p) => p.stream === 'stdout')
        .map((p) => p.data)
        .join(''),
    ).toBe(exit.stdout);
    expect(exitMessages(exitOf('k', 'small'))).toHaveLength(1);
  });

  it('sizes the live output budgets below the platform limits they depend on', () => {
    // A live output frame (its data plus the largest header) fits one received WebSocket message, and one stored row.
    expect(outputFrameBytes('j'.repeat(OUTPUT_FRAME_JOB_ID_MAX_BYTES), LIVE_FRAME_DATA_BYTES)).toBeLessThan(WEBSOCKET_MESSAGE_MAX_BYTES);
    expect(LIVE_FRAME_DATA_BYTES).toBeLessThanOrEqual(STORED_OUTPUT_CHUNK_BYTES);
    expect(STORED_OUTPUT_CHUNK_BYTES).toBeLessThan(SQLITE_ROW_MAX_BYTES);
    // 64 running jobs keeping both streams' live window stay a fraction of one object's storage.
    expect(64 * 2 * LIVE_OUTPUT_MAX_BYTES).toBeLessThan(DO_STORAGE_MAX_BYTES / 4);
    // The live window always covers the largest inline result a policy allows.
    const policy = (inlineOutputBytes: number) =>
      PolicyDocument.safeParse({ ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, inlineOutputBytes } }).success;
    expect(policy(10 * 1024 * 1024)).toBe(true);
    expect(policy(LIVE_OUTPUT_MAX_BYTES + 1)).toBe(false);
  });

  it('keeps the socket attachment far below the hibernation limit, whatever the agent says and its token grants', () => {
    const grant = {
      sandboxes: ['gvisor', 'bwrap', 'none'] as const,
      labels: Array.from({ length: 32 }, (_, i) => `${i}`.padEnd(64, 'l')),
      agentId: 'g'.repeat(128),
    };
    const att: AgentAttachment = {
      subject: 's'.repeat(200),
      tokenId: 't'.repeat(200),
      grant: { ...grant, sandboxes: [...grant.sandboxes] },
      agentId: 'a'.repeat(128),
      connectedAt: Date.now(),
    };
    expect(serialize(att).byteLength).toBeLessThan(HIBERNATION_ATTACHMENT_MAX_BYTES / 4);
  });
});
