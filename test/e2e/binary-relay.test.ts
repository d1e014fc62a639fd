/**
 * Binary output, end to end (real `wrangler dev` with DO SQLite, D1 and R2, a real agent whose
 * socket and uploads go through a loopback proxy that counts what the agent sends, the official
 * MCP client):
 *  - the live relay: a job writes random bytes and NUL-heavy bytes on both streams; the edge's live
 *    copy (the team Durable Object's rows, read while the upload is held) and the stored artifacts
 *    equal what the job wrote, byte for byte, and the agent's socket carried at most 1.05 × the
 *    output plus framing (a JSON-escaped NUL byte would be 6 bytes);
 *  - the inline result travels once: a small NUL-heavy job's `execute` answer holds what it wrote, which the
 *    edge rebuilt from the live frames (the exit carried no text), and its socket bytes stay within 1.05 ×;
 *  - uploads at Cloudflare's request body limit (REQUEST_BODY_MAX_BYTES): a stream of exactly that
 *    size goes as one PUT, one byte more goes in parts; both are stored whole and read back.
 * Correctness only: nothing here is timed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startAgent, testSandbox, type AgentProcess, type Gateway, startGateway } from './harness.ts';
import { AgentProxy } from './agent-proxy.ts';
import { call } from './fleet.ts';
import { until } from '../support/until.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { ARTIFACT_UPLOAD_PATH } from '../../src/contracts/agent-protocol.ts';
import { LIVE_OUTPUT_MAX_BYTES, REQUEST_BODY_MAX_BYTES } from '../../src/contracts/limits.ts';

const TEAM = 'binrelay';
const MiB = 1024 * 1024;
const POLICY = {
  ...DEFAULT_POLICY,
  shell: { enabled: true, allow: ['/.*/'] },
  runtime: { ...DEFAULT_POLICY.runtime, allowedRuntimes: [...DEFAULT_POLICY.runtime.allowedRuntimes, 'shell'] },
  limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: 300_000, maxArtifactBytes: 128 * MiB },
};

/** Bytes mostly NUL with every other control character among them: what JSON would escape to 6 bytes each. */
function nulHeavy(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i += 7) b[i] = i % 32;
  return b;
}
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

let gw: Gateway;
let proxy: AgentProxy;
let agent: AgentProcess;
let root: string;
let c: Client;

/** The live output the team's Durable Object keeps for a job's stream, read from its SQLite file (the APIs decode it as text). */
function keptLive(jobId: string, stream: string): Buffer | null {
  const base = join(gw.stateDir, 'state', 'v3', 'do');
  for (const dir of readdirSync(base, { withFileTypes: true }).filter((d) => d.isDirectory())) {
    for (const f of readdirSync(join(base, dir.name)).filter((x) => x.endsWith('.sqlite'))) {
      const db = new DatabaseSync(join(base, dir.name, f), { readOnly: true });
      try {
        if (!db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'job_output'`).get()) continue;
        const rows = db.prepare('SELECT offset, data FROM job_output WHERE job_id = ? AND stream = ? ORDER BY offset').all(jobId, stream) as {
          offset: number;
          data: Uint8Array;
        }[];
        if (rows.length === 0) continue;
        let at = 0;
        for (const r of rows) {
          expect(r.offset, 'the kept rows leave no gap').toBe(at);
          expect(r.data, 'a kept row is bytes (a BLOB), not text').toBeInstanceOf(Uint8Array);
          at += r.data.byteLength;
        }
        return Buffer.concat(rows.map((r) => r.data));
      } finally {
        db.close();
      }
    }
  }
  return null;
}

/** SHA-256 of an artifact's stored stream, streamed from the admin download route. */
async function storedSha(handle: string, stream: string): Promise<{ sha: string; bytes: number }> {
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  const r = await fetch(`${gw.url}/admin/v1/artifacts/${handle}/${stream}/download`, { headers: { Authorization: `Bearer ${token}` } });
  expect(r.status).toBe(200);
  const h = createHash('sha256');
  let bytes = 0;
  for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
    h.update(chunk);
    bytes += chunk.byteLength;
  }
  return { sha: h.digest('hex'), bytes };
}

async function ended(jobId: string, done: (s: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>> {
  return until(
    async () => {
      const s = (await call(c, 'job_status', { job_id: jobId })).s;
      return done(s) ? s : null;
    },
    240_000,
    what,
  );
}

describe('binary output', () => {
  beforeAll(async () => {
    gw = await startGateway();
    await gw.putPolicy(TEAM, POLICY);
    proxy = new AgentProxy(gw.url);
    await proxy.start();
    root = mkdtempSync(join(tmpdir(), 'gatehouse-binrelay-'));
    agent = startAgent(
      { url: proxy.url },
      { token: await gw.token({ team: TEAM, scopes: ['agent'] }), root, sandbox: testSandbox(), capacity: 2, agentId: 'bin-agent' },
    );
    await agent.ready;
    c = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
  }, 300_000);

  afterAll(async () => {
    await c?.close().catch(() => {});
    await agent?.stop();
    await proxy?.stop();
    await gw?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('random and NUL-heavy bytes reach the edge as written (live copy and artifact), and the socket carries at most 1.05 × the output', async () => {
    const out = Buffer.concat([randomBytes(2 * MiB), Buffer.alloc(2 * MiB), nulHeavy(MiB), randomBytes(123_457)]);
    const err = Buffer.concat([nulHeavy(MiB), randomBytes(2 * MiB + 3)]);
    expect(out.byteLength).toBeLessThan(LIVE_OUTPUT_MAX_BYTES); // the whole stream is relayed live
    writeFileSync(join(root, 'out.bin'), out, { mode: 0o644 });
    writeFileSync(join(root, 'err.bin'), err, { mode: 0o644 });
    const socketBefore = proxy.agentSocketBytes;
    const binaryBefore = proxy.agentPayloadBytes.binary;
    const release = proxy.holdUploads();
    let jobId = '';
    try {
      const started = await call(c, 'execute', { command: 'cat out.bin; cat err.bin >&2', background: true, timeout_ms: 120_000 });
      expect(started.r.isError, started.t).toBeFalsy();
      jobId = started.s.job_id as string;
      // Exited, its uploads held: what the edge has is what the relay gave it.
      await ended(jobId, (s) => s.state !== 'running' && s.state !== 'queued', 'the job to end');
      expect(keptLive(jobId, 'stdout')?.equals(out), 'the live copy of stdout is the bytes the job wrote').toBe(true);
      expect(keptLive(jobId, 'stderr')?.equals(err), 'the live copy of stderr is the bytes the job wrote').toBe(true);
    } finally {
      release();
    }
    const s = await ended(jobId, (x) => x.artifact_state !== 'uploading', 'the artifacts to be stored');
    expect(s).toMatchObject({ state: 'exited', exit_code: 0, artifact_state: 'complete', stdout_bytes: out.byteLength, stderr_bytes: err.byteLength });
    const handle = s.artifact_handle as string;
    expect(await storedSha(handle, 'stdout')).toEqual({ sha: sha(out), bytes: out.byteLength });
    expect(await storedSha(handle, 'stderr')).toEqual({ sha: sha(err), bytes: err.byteLength });

    // On the wire: each live frame is its bytes plus a header of 11 bytes and the job id; everything
    // the agent sent during the job (frames, WebSocket headers, heartbeats, the artifact reports, and
    // the exit, which leaves its inline result to the frames) stays within 5 % of the output.
    expect(proxy.messages('job.exit', jobId)).toEqual([expect.objectContaining({ inlineFromLive: true, stdout: '', stderr: '' })]);
    const frames = proxy.messages('job.output', jobId);
    const relayed = frames.reduce((n, f) => n + (f.bytes as number), 0);
    expect(relayed).toBe(out.byteLength + err.byteLength);
    expect(proxy.agentPayloadBytes.binary - binaryBefore).toBe(relayed + frames.length * (11 + Buffer.byteLength(jobId)));
    const onSocket = proxy.agentSocketBytes - socketBefore;
    expect(onSocket).toBeGreaterThanOrEqual(relayed);
    expect(onSocket / (out.byteLength + err.byteLength)).toBeLessThanOrEqual(1.05);
  }, 300_000);

  it("a small NUL-heavy job's inline result is what it wrote, rebuilt from the live frames: the output crosses the socket once", async () => {
    // Below the inline cap (40,000 bytes by default): the whole output is the inline result. As JSON it would be ~5× its size.
    const small = Buffer.concat([nulHeavy(30_000 - 8), Buffer.from([0xc3, 0xa9, 0xff]), Buffer.from('tail\n')]);
    expect(small.byteLength).toBeLessThan(POLICY.limits.inlineOutputBytes);
    writeFileSync(join(root, 'small.bin'), small, { mode: 0o644 });
    const socketBefore = proxy.agentSocketBytes;
    const binaryBefore = proxy.agentPayloadBytes.binary;
    const r = await call(c, 'execute', { command: 'cat small.bin' });
    // The answer comes once the edge stored the exit: everything the job sent on the socket has passed the proxy.
    const onSocket = proxy.agentSocketBytes - socketBefore;
    expect(r.r.isError, r.t).toBeFalsy();
    const jobId = r.s.job_id as string;
    // What the API answers: the job's bytes decoded as the edge decodes them (an invalid byte becomes U+FFFD).
    expect(r.s).toMatchObject({ exit_code: 0, stdout: new TextDecoder().decode(small), stdout_truncated: false, stderr: '', stderr_truncated: false });
    const s = await ended(jobId, (x) => x.artifact_state !== 'uploading', 'the artifact to be stored');
    expect(s).toMatchObject({ state: 'exited', artifact_state: 'complete', stdout_bytes: small.byteLength });

    // The exit carried no text: the edge rebuilt it from the frames that came before it on the same socket.
    const exits = proxy.messages('job.exit', jobId);
    expect(exits).toEqual([expect.objectContaining({ inlineFromLive: true, stdout: '', stderr: '' })]);
    const frames = proxy.messages('job.output', jobId);
    const relayed = frames.reduce((n, f) => n + (f.bytes as number), 0);
    expect(relayed).toBe(small.byteLength);
    expect(proxy.agentPayloadBytes.binary - binaryBefore).toBe(relayed + frames.length * (11 + Buffer.byteLength(jobId)));
    // Framing: the frames' headers, the exit (a few hundred bytes of JSON), heartbeats, WebSocket headers.
    expect(Buffer.byteLength(JSON.stringify(exits[0]))).toBeLessThan(1000);
    expect(onSocket).toBeGreaterThanOrEqual(relayed);
    expect(onSocket / small.byteLength).toBeLessThanOrEqual(1.05);
  }, 120_000);

  it("a stream of exactly Cloudflare's request body limit goes as one PUT, one byte more in parts; both are stored whole", async () => {
    // One file of REQUEST_BODY_MAX_BYTES + 1 random bytes; one job writes all but its last byte, the other all of it.
    const file = join(root, 'big.bin');
    const underSha = createHash('sha256');
    const overSha = createHash('sha256');
    const fd = openSync(file, 'w', 0o644);
    try {
      for (let left = REQUEST_BODY_MAX_BYTES; left > 0; ) {
        const chunk = randomBytes(Math.min(left, 8 * MiB));
        writeSync(fd, chunk);
        underSha.update(chunk);
        overSha.update(chunk);
        left -= chunk.byteLength;
      }
      const last = randomBytes(1);
      writeSync(fd, last);
      overSha.update(last);
    } finally {
      closeSync(fd);
    }
    const expected = {
      under: { sha: underSha.digest('hex'), bytes: REQUEST_BODY_MAX_BYTES },
      over: { sha: overSha.digest('hex'), bytes: REQUEST_BODY_MAX_BYTES + 1 },
    };
    const commands = { under: `head -c ${REQUEST_BODY_MAX_BYTES} big.bin`, over: 'cat big.bin' };
    for (const k of ['under', 'over'] as const) {
      const r = await call(c, 'execute', { command: commands[k], background: true, timeout_ms: 240_000 });
      expect(r.r.isError, r.t).toBeFalsy();
      const s = await ended(
        r.s.job_id as string,
        (x) => x.state !== 'running' && x.state !== 'queued' && x.artifact_state !== 'uploading',
        `the ${k} job's artifact`,
      );
      expect(s).toMatchObject({ state: 'exited', exit_code: 0, artifact_state: 'complete', stdout_bytes: expected[k].bytes });
      const handle = s.artifact_handle as string;
      const requests = proxy.uploadRequests
        .filter((u) => u.request.includes(`${ARTIFACT_UPLOAD_PATH}/${handle}/stdout`))
        .map((u) => u.request.split(handle)[1])
        // The stream's body only (a search index may follow it separately).
        .filter((path) => path === '/stdout' || path.startsWith('/stdout/multipart'));
      if (k === 'under') expect(requests).toEqual(['/stdout']);
      else expect(requests).toEqual(['/stdout/multipart', '/stdout/multipart/1', '/stdout/multipart/2', '/stdout/multipart/complete']);
      expect(await storedSha(handle, 'stdout')).toEqual(expected[k]);
    }
    rmSync(file, { force: true });
  }, 600_000);
});
