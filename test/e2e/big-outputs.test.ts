/**
 * Big outputs, end to end (real `wrangler dev` with DO SQLite, D1 and R2, real agent processes,
 * the official MCP client):
 *  - the live relay: a job writing NUL bytes at full speed on both streams keeps its agent alive
 *    in the edge's eyes (heartbeats are not starved behind output: the agent is never dropped),
 *    and the edge keeps each stream's first LIVE_OUTPUT_MAX_BYTES byte for byte;
 *  - multipart artifact uploads: an agent with 5 MiB parts (R2's smallest) uploads a ~12 MB stream in
 *    3 parts through a loopback proxy that fails one part once; the artifact reads back whole. A part
 *    refused for good is aborted: no index row, and no R2 upload left in progress (read from the local
 *    R2 emulation's own SQLite), and so is the upload of an agent killed mid-upload. Part sizes R2 would
 *    refuse, and parts of the wrong size or number, are refused with errors that say what to do; another
 *    agent of the team cannot touch a job's upload.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { startGateway, type AgentProcess, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { LIVE_OUTPUT_MAX_BYTES, R2_MULTIPART_MIN_PART_BYTES, REQUEST_BODY_MAX_BYTES } from '../../src/contracts/limits.ts';
import { AgentProxy } from './agent-proxy.ts';
import { Fleet, call } from './fleet.ts';
import { until } from '../support/until.ts';

/** Short heartbeats: an agent silent for 3 of them (1.5 s) is dropped by the edge. */
const HEARTBEAT_MS = 500;
const POLICY = {
  ...DEFAULT_POLICY,
  shell: { enabled: true, allow: ['/.*/'] },
  runtime: { ...DEFAULT_POLICY.runtime, allowedRuntimes: [...DEFAULT_POLICY.runtime.allowedRuntimes, 'shell'] },
  // The artifact cap keeps a full-speed writer's spool small; the live window (16 MiB) fits inside it.
  limits: {
    ...DEFAULT_POLICY.limits,
    maxConcurrentJobs: 4,
    queueWaitMs: 20_000,
    maxTimeoutMs: 120_000,
    maxArtifactBytes: LIVE_OUTPUT_MAX_BYTES + 4 * 1024 * 1024,
  },
};

type S = Record<string, unknown>;

let gw: Gateway;
let proxy: AgentProxy;
let fleet: Fleet;

describe('big outputs', () => {
  beforeAll(async () => {
    gw = await startGateway({ vars: { HEARTBEAT_MS: String(HEARTBEAT_MS) } });
    await gw.putPolicy('flood', POLICY);
    await gw.putPolicy('parts', { ...POLICY, limits: { ...POLICY.limits, maxArtifactBytes: 64 * 1024 * 1024 } });
    fleet = new Fleet(gw, { tmpPrefix: 'gatehouse-bigout-', capacity: 2 });
    proxy = new AgentProxy(gw.url);
    await proxy.start();
  }, 300_000);

  afterAll(async () => {
    await fleet?.close();
    await proxy?.stop();
    await gw?.stop();
  });

  it("a job writing NUL bytes at full speed on both streams: its agent stays alive to the edge, and the edge keeps each stream's live window byte for byte", async () => {
    const agent = await fleet.agentFor('flood', 'flood-agent');
    const c = await fleet.mcp('flood');
    const before = await fleet.agentView('flood', 'flood-agent');
    // Both streams at once for 4 s (many heartbeat intervals): 16 MiB of each is relayed live, the rest
    // spooled up to the cap; then it idles, so the live window can be read while the job still runs.
    const started = await call(c, 'execute', {
      command: '(timeout 4 cat /dev/zero &) ; timeout 4 cat /dev/zero >&2; sleep 4; echo end',
      background: true,
      timeout_ms: 60_000,
    });
    expect(started.r.isError).toBeFalsy();
    const jobId = started.s.job_id as string;
    // While it floods, the edge hears the agent's heartbeats: output frames do not count as a sign of
    // life, so an agent whose heartbeats queued behind its output would be dropped (3 silent heartbeats).
    let heard = 0;
    let lastSeen = before!.last_seen as number;
    const liveWindow: Record<string, S> = {};
    const ended = await until(
      async () => {
        const v = await fleet.agentView('flood', 'flood-agent');
        expect(v).toMatchObject({ state: 'connected', connected_at: before!.connected_at });
        if ((v!.last_seen as number) > lastSeen) (heard += 1), (lastSeen = v!.last_seen as number);
        for (const stream of ['stdout', 'stderr']) {
          if (liveWindow[stream]) continue;
          // The last bytes of the live window, read from what the edge kept while the job runs: exactly 8 bytes, nothing past it.
          const o = (await call(c, 'job_output', { job_id: jobId, stream, offset: LIVE_OUTPUT_MAX_BYTES - 8, max_bytes: 16 })).s;
          if (o.source === 'live' && o.state === 'running' && (o.data as string).length === 8) liveWindow[stream] = o;
        }
        const s = (await call(c, 'job_status', { job_id: jobId })).s;
        return s.state !== 'running' && s.artifact_state !== 'uploading' ? s : null;
      },
      90_000,
      'the flooding job to end',
    );
    expect(ended).toMatchObject({ state: 'exited', exit_code: 0, agent_id: 'flood-agent', artifact_state: 'complete' });
    expect(heard).toBeGreaterThanOrEqual(2);
    expect(agent.logs()).not.toMatch(/disconnected from/);
    for (const stream of ['stdout', 'stderr']) {
      expect(liveWindow[stream], `the ${stream} live window was never complete while the job ran`).toMatchObject({
        data: '\0'.repeat(8),
        next_offset: LIVE_OUTPUT_MAX_BYTES,
      });
      // Stored whole: the artifact holds the capped stream, NUL bytes as written.
      const head = (await call(c, 'job_output', { job_id: jobId, stream, offset: 0, max_bytes: 4096 })).s;
      expect(head).toMatchObject({ source: 'artifact', data: '\0'.repeat(4096) });
    }
  }, 180_000);

  describe('multipart artifact uploads', () => {
    /** `seq 1 1700000`: 12,488,896 bytes, 3 parts of 5 MiB (the last 1.9 MB); known bytes to check the stored artifact against. */
    const SEQ = 1_700_000;
    const expected = Buffer.from(Array.from({ length: SEQ }, (_, i) => `${i + 1}\n`).join(''));
    const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
    let partsAgent: AgentProcess | null = null;
    /** The first test's job, whose stdout artifact is stored: what another agent's token tries to write below. */
    let stored: { jobId: string; handle: string } | null = null;
    const agentInParts = async () =>
      (partsAgent ??= await fleet.agentFor('parts', 'parts-agent', {
        extraArgs: ['--artifact-part-bytes', String(R2_MULTIPART_MIN_PART_BYTES)],
        url: proxy.url,
      }));
    // The stream's body only: a stream this large sends its search index first (test/e2e/search-index.test.ts).
    const uploadsOf = (handle: string) =>
      proxy.uploadRequests
        .filter((u) => u.request.includes(`/${handle}/`) && !u.request.endsWith('/stdout/index'))
        .map((u) => `${u.request.replace(/^(\w+) .*\/stdout/, '$1 …')} ${u.status}`);
    /** R2 multipart uploads the local emulation still holds open (state 0), read from its own SQLite. */
    const openR2Uploads = () => {
      const dir = join(gw.stateDir, 'state', 'v3', 'r2', 'miniflare-R2BucketObject');
      let n = 0;
      for (const f of readdirSync(dir).filter((x) => x.endsWith('.sqlite'))) {
        const db = new DatabaseSync(join(dir, f), { readOnly: true });
        try {
          if (!db.prepare(`SELECT 1 FROM sqlite_master WHERE name = '_mf_multipart_uploads'`).get()) continue;
          n += (db.prepare('SELECT COUNT(*) AS n FROM _mf_multipart_uploads WHERE state = 0').get() as { n: number }).n;
        } finally {
          db.close();
        }
      }
      return n;
    };

    it('uploads a stream above the part size in parts, sends a part that failed once again alone, and the whole artifact reads back', async () => {
      await agentInParts();
      const c = await fleet.mcp('parts');
      proxy.failNextUpload('/multipart/2', 503);
      const r = await call(c, 'execute', { command: `seq 1 ${SEQ}` });
      expect(r.r.isError).toBeFalsy();
      expect(r.s).toMatchObject({ exit_code: 0, state: 'exited' });
      const handle = r.s.artifact_handle as string;
      stored = { jobId: r.s.job_id as string, handle };
      // The call answers once the edge stored the artifact; the proxy sees the answer to `complete` a moment later.
      await until(async () => uploadsOf(handle).some((u) => u.includes('complete')), 10_000, 'the answer to complete');
      expect(uploadsOf(handle)).toEqual([
        'POST …/multipart 201',
        'PUT …/multipart/1 200',
        'PUT …/multipart/2 503',
        'PUT …/multipart/2 200',
        'PUT …/multipart/3 200',
        'POST …/multipart/complete 201',
      ]);
      const v = (await call(c, 'job_status', { job_id: r.s.job_id })).s;
      expect(v).toMatchObject({ artifact_state: 'complete', artifacts: { stdout: { state: 'complete', bytes: expected.length } } });
      // Byte for byte: the stored object is the job's output.
      const down = await fetch(`${gw.url}/admin/v1/artifacts/${handle}/stdout/download`, {
        headers: { Authorization: `Bearer ${await gw.token({ team: 'parts', scopes: ['admin'] })}` },
      });
      expect(down.status).toBe(200);
      expect(sha(new Uint8Array(await down.arrayBuffer()))).toBe(sha(expected));
      const q = (await call(c, 'query_output', { artifactHandle: handle, queryTerms: [String(SEQ - 1)], contextLines: 0 })).s;
      expect(q).toMatchObject({ matchCount: 1, totalBytes: expected.length });
      const tail = (await call(c, 'job_output', { job_id: r.s.job_id, offset: expected.length - 8 })).s;
      expect(tail).toMatchObject({ data: `${SEQ}\n`, source: 'artifact', eof: true });
      expect(openR2Uploads()).toBe(0);
    }, 240_000);

    it('a part that keeps failing past its retries: the agent starts again and the edge resumes with the parts it holds', async () => {
      await agentInParts();
      const c = await fleet.mcp('parts');
      proxy.failNextUpload('/multipart/2', 503, 5); // every attempt of the first pass
      const r = await call(c, 'execute', { command: `seq 1 ${SEQ}` });
      expect(r.s).toMatchObject({ exit_code: 0, state: 'exited' });
      const handle = r.s.artifact_handle as string;
      await until(async () => uploadsOf(handle).some((u) => u.includes('complete')), 10_000, 'the answer to complete');
      // The second start is a resume (200, not 201): part 1 is not sent again.
      expect(uploadsOf(handle)).toEqual([
        'POST …/multipart 201',
        'PUT …/multipart/1 200',
        ...Array(5).fill('PUT …/multipart/2 503'),
        'POST …/multipart 200',
        'PUT …/multipart/2 200',
        'PUT …/multipart/3 200',
        'POST …/multipart/complete 201',
      ]);
      const down = await fetch(`${gw.url}/admin/v1/artifacts/${handle}/stdout/download`, {
        headers: { Authorization: `Bearer ${await gw.token({ team: 'parts', scopes: ['admin'] })}` },
      });
      expect(sha(new Uint8Array(await down.arrayBuffer()))).toBe(sha(expected));
      expect(openR2Uploads()).toBe(0);
    }, 240_000);

    it('a part refused for good: the agent aborts the upload, no index row and no R2 upload remain, the output stays readable from the live copy', async () => {
      await agentInParts();
      const c = await fleet.mcp('parts');
      proxy.refuseUploads(400);
      try {
        const r = await call(c, 'execute', { command: `seq 1 ${SEQ}`, background: true });
        const jobId = r.s.job_id as string;
        const handle = r.s.artifact_handle as string;
        const v = await until(
          async () => {
            const s = (await call(c, 'job_status', { job_id: jobId, wait_ms: 5000 })).s;
            return s.state !== 'running' && s.artifact_state !== 'uploading' ? s : null;
          },
          120_000,
          'the upload to end',
        );
        expect(v).toMatchObject({ state: 'exited', artifact_state: 'partial', artifacts: { stdout: { state: 'partial', bytes: expected.length } } });
        expect(uploadsOf(handle)).toEqual(['POST …/multipart 201', 'PUT …/multipart/1 400', 'DELETE …/multipart 200']);
        expect((await fleet.admin('parts', 'GET', `/artifacts/${handle}`)).status).toBe(404);
        expect(openR2Uploads()).toBe(0);
        const tail = (await call(c, 'job_output', { job_id: jobId, offset: expected.length - 8 })).s;
        expect(tail).toMatchObject({ data: `${SEQ}\n`, source: 'live', eof: true });
      } finally {
        proxy.refuseUploads(null);
      }
    }, 240_000);

    // One request body over Cloudflare's limit is refused from its Content-Length (test/dispatch/artifact-routes.test.ts):
    // `wrangler dev` reads a whole body before the Worker sees the request, so that is tested on the route itself.
    it('refuses part sizes R2 would refuse, saying what to do', async () => {
      const token = await gw.token({ team: 'parts', scopes: ['agent'], subject: 'agent-parts-agent' });
      const path = '/agent/v1/artifacts/art_made_up_handle_0000/stdout';
      const start = (body: unknown) =>
        fetch(`${gw.url}${path}/multipart`, {
          method: 'POST',
          body: JSON.stringify(body),
          headers: { Authorization: `Bearer ${token}`, 'X-Gatehouse-Job': 'j', 'Content-Type': 'application/json' },
        });
      const small = await start({ bytes: 20 * 1024 * 1024, partBytes: 1024 * 1024, lines: 0, truncated: false });
      expect(small.status).toBe(400);
      expect(((await small.json()) as { error: { message: string } }).error.message).toMatch(/partBytes.*5242880/);
      const many = await start({ bytes: 10_001 * R2_MULTIPART_MIN_PART_BYTES, partBytes: R2_MULTIPART_MIN_PART_BYTES, lines: 0, truncated: false });
      expect(((await many.json()) as { error: { message: string } }).error.message).toMatch(/10001 parts; R2 allows at most 10000/);
      const overPart = await start({ bytes: 300 * 1000 * 1000, partBytes: REQUEST_BODY_MAX_BYTES + 1, lines: 0, truncated: false });
      expect(overPart.status).toBe(400);
    });

    it("checks each part against the upload's shape, and aborts the R2 upload of an agent that vanished mid-upload", async () => {
      const doomed = await fleet.agentFor('parts', 'parts-doomed', {
        extraArgs: ['--artifact-part-bytes', String(R2_MULTIPART_MIN_PART_BYTES)],
        url: proxy.url,
      });
      const c = await fleet.mcp('parts');
      const release = proxy.holdUploads(); // holds the parts (PUT); the start (POST) goes through
      try {
        const r = await call(c, 'execute', { command: `seq 1 ${SEQ}`, background: true, agent: 'parts-doomed' });
        const jobId = r.s.job_id as string;
        const handle = r.s.artifact_handle as string;
        await until(async () => uploadsOf(handle).includes('POST …/multipart 201'), 60_000, 'the multipart upload to start');
        expect(openR2Uploads()).toBeGreaterThanOrEqual(1);
        // As the job's own agent (its token and the job's upload grant), straight to the gateway: parts must have the shape the upload started with.
        const token = await gw.token({ team: 'parts', scopes: ['agent'], subject: 'agent-parts-doomed' });
        const grant = proxy.uploadGrants.get(handle)!;
        const part = async (method: string, suffix: string, body?: string) => {
          const res = await fetch(`${gw.url}/agent/v1/artifacts/${handle}/stdout/multipart${suffix}`, {
            method,
            body,
            headers: { Authorization: `Bearer ${token}`, 'X-Gatehouse-Job': jobId, ...grant },
          });
          return { status: res.status, message: ((await res.json()) as { error?: { message: string } }).error?.message ?? '' };
        };
        expect(await part('PUT', '/2', 'x'.repeat(10))).toEqual({
          status: 400,
          message: `part 2 of this upload is ${R2_MULTIPART_MIN_PART_BYTES} bytes (bytes ${R2_MULTIPART_MIN_PART_BYTES}..${2 * R2_MULTIPART_MIN_PART_BYTES} of ${expected.length}), not 10`,
        });
        expect(await part('PUT', '/4', 'x')).toMatchObject({ status: 400, message: 'part 4 is not a part of this upload: parts are numbered 1 to 3' });
        expect(await part('POST', '/complete')).toMatchObject({ status: 409, message: expect.stringMatching(/^parts 1, 2, 3 of 3 are not stored yet/) });
        // The agent dies with its upload open: once it has been gone 3 heartbeats (after the reconnect allowance),
        // the edge gives the upload up, keeps the live copy, and aborts the R2 upload.
        await doomed.stop('SIGKILL');
        release();
        const v = await until(
          async () => {
            const st = (await call(c, 'job_status', { job_id: jobId })).s;
            return st.artifact_state !== 'uploading' ? st : null;
          },
          90_000,
          'the edge to give the upload up',
        );
        expect(v).toMatchObject({ state: 'exited', artifact_state: 'partial', artifacts: { stdout: { state: 'partial', bytes: expected.length } } });
        await until(async () => openR2Uploads() === 0, 30_000, 'the R2 upload to be aborted');
        expect((await fleet.admin('parts', 'GET', `/artifacts/${handle}`)).status).toBe(404);
      } finally {
        release();
      }
    }, 240_000);

    it("another agent of the team can neither start, write, complete nor abort a job's multipart upload; its own agent cannot write a stored one again", async () => {
      expect(stored).not.toBeNull();
      const { jobId, handle } = stored!;
      const base = `${gw.url}/agent/v1/artifacts/${handle}/stdout/multipart`;
      const as = async (subject: string, method: string, suffix: string, body?: string) => {
        const token = await gw.token({ team: 'parts', scopes: ['agent'], subject });
        const r = await fetch(`${base}${suffix}`, {
          method,
          body,
          headers: { Authorization: `Bearer ${token}`, 'X-Gatehouse-Job': jobId, 'Content-Type': 'application/json' },
        });
        return { status: r.status, body: (await r.json()) as { error?: { code: string; message: string }; aborted?: boolean } };
      };
      const startBody = JSON.stringify({ bytes: expected.length, partBytes: R2_MULTIPART_MIN_PART_BYTES, lines: SEQ, truncated: false });
      for (const [method, suffix, body] of [
        ['POST', '', startBody],
        ['PUT', '/1', 'FORGED'],
        ['POST', '/complete', undefined],
        ['DELETE', '', undefined],
      ] as const) {
        const r = await as('rogue-agent', method, suffix, body);
        expect(r, `${method} …/multipart${suffix}`).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
      }
      const again = await as('agent-parts-agent', 'POST', '', startBody);
      expect(again).toMatchObject({ status: 409, body: { error: { message: expect.stringMatching(/already stored; artifacts are written once/) } } });
      // The stored artifact is untouched.
      const down = await fetch(`${gw.url}/admin/v1/artifacts/${handle}/stdout/download`, {
        headers: { Authorization: `Bearer ${await gw.token({ team: 'parts', scopes: ['admin'] })}` },
      });
      expect(sha(new Uint8Array(await down.arrayBuffer()))).toBe(sha(expected));
    });
  });
});
