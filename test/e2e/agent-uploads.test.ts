/**
 * Who may upload a job's artifacts, end to end (real `wrangler dev` with DO SQLite, D1 and R2, a
 * real agent process, the official MCP client). A team's agents may share one agent token, so
 * neither the token nor an agent id (which is no secret) says which agent asks: the job's
 * `job.start` carries an upload grant to the one agent it was sent to, and the edge takes the
 * job's artifacts with that grant only.
 *
 * Attacker: another agent of the team with the same token (a compromised agent host), with or
 * without a connection of its own, racing the real agent to the write-once artifact.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'undici';
import type { Gateway } from './harness.ts';
import { startProxiedTeam, type ProxiedTeam } from './proxied-team.ts';
import type { AgentProxy } from './agent-proxy.ts';
import { call, type Fleet } from './fleet.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { PROTOCOL_VERSION, UPLOAD_AGENT_HEADER, UPLOAD_TOKEN_HEADER } from '../../src/contracts/agent-protocol.ts';
import { R2_MULTIPART_MIN_PART_BYTES } from '../../src/contracts/limits.ts';
import { until } from '../support/until.ts';

const TEAM = 'upl';
const POLICY = {
  ...DEFAULT_POLICY,
  shell: { enabled: true, allow: ['/.*/'] },
  // An inline cap below the jobs' output: the exit holds no stream whole, so every stream is uploaded (what this file attacks).
  limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 4, queueWaitMs: 20_000, inlineOutputBytes: 8 },
};

type S = Record<string, unknown>;

let gw: Gateway;
let fleet: Fleet;
let proxy: AgentProxy;
let team: ProxiedTeam;
let sharedToken: string;

/** A second agent of the team on the same token, connected under its own id (the calls below name the agent they run on). */
async function connectSecondAgent(agentId: string): Promise<WebSocket> {
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/agent/v1/connect`, { headers: { Authorization: `Bearer ${sharedToken}` } });
  const welcomed = new Promise<void>((resolve, reject) => {
    ws.addEventListener('message', (e) => {
      if (typeof e.data === 'string' && (JSON.parse(e.data) as S).type === 'welcome') resolve();
    });
    ws.addEventListener('error', () => reject(new Error('the second agent could not connect')));
  });
  await new Promise<void>((r) => ws.addEventListener('open', () => r()));
  ws.send(JSON.stringify({ type: 'hello', v: PROTOCOL_VERSION, agentId, version: 'x', capacity: 1, sandbox: 'none', runtimes: [], labels: [], running: [] }));
  await welcomed;
  return ws;
}

/** An upload request with the team's shared agent token; `as` adds the agent id and upload token it claims. */
async function upload(method: string, path: string, jobId: string, body: string | undefined, as: Record<string, string> = {}) {
  const r = await fetch(`${gw.url}/agent/v1/artifacts/${path}`, {
    method,
    body,
    headers: { Authorization: `Bearer ${sharedToken}`, 'X-Gatehouse-Job': jobId, 'Content-Type': 'application/json', ...as },
  });
  return { status: r.status, body: (await r.json()) as { error?: { code: string; message: string } } };
}

describe('artifact uploads are bound to the agent the job was sent to', () => {
  beforeAll(async () => {
    team = await startProxiedTeam({ team: TEAM, policy: POLICY, subject: 'agent-upl', tmpPrefix: 'gatehouse-upl-', heartbeatMs: 5000 });
    ({ gw, fleet, proxy, sharedToken } = team);
  }, 300_000);

  afterAll(async () => {
    await team?.stop();
  });

  it('another agent on the same token cannot write, start, or abort the artifact of a job it was not sent (403); the real upload then succeeds', async () => {
    const c = await fleet.mcp(TEAM);
    const second = await connectSecondAgent('forger');
    const release = proxy.holdUploads();
    let released = false;
    try {
      const started = await call(c, 'execute', { command: 'echo real-output; echo real-err >&2', agent: 'worker', background: true });
      expect(started.r.isError, started.t).toBeFalsy();
      const jobId = started.s.job_id as string;
      const handle = started.s.artifact_handle as string;
      // The exit is in; the real agent's uploads wait in the proxy: the artifact is open for writing.
      const ended = await until(
        async () => {
          const v = (await call(c, 'job_status', { job_id: jobId, wait_ms: 2000 })).s;
          return v.state === 'exited' && v.artifact_state === 'uploading' ? v : null;
        },
        60_000,
        'the job to end with its uploads held',
      );
      expect(ended).toMatchObject({ agent_id: 'worker', artifacts: { stdout: { state: 'uploading' } } });

      // No agent id or upload token (the token alone, no connection): refused, and it says what is missing.
      const bare = await upload('PUT', `${handle}/stdout`, jobId, 'FORGED\n');
      expect(bare).toMatchObject({ status: 403, body: { error: { code: 'forbidden', message: expect.stringContaining(UPLOAD_TOKEN_HEADER) } } });
      // The connected second agent under its own id: the job runs on another agent.
      const own = await upload('PUT', `${handle}/stdout`, jobId, 'FORGED\n', { [UPLOAD_AGENT_HEADER]: 'forger', [UPLOAD_TOKEN_HEADER]: 'x'.repeat(43) });
      expect(own).toMatchObject({
        status: 403,
        body: {
          error: {
            code: 'forbidden',
            message: `job "${jobId}" runs on agent "worker", not "forger": only the agent a job was sent to may upload its artifacts`,
          },
        },
      });
      // Claiming to be the real agent (its id is no secret) without its job's upload token.
      const claimed = { [UPLOAD_AGENT_HEADER]: 'worker', [UPLOAD_TOKEN_HEADER]: 'A'.repeat(43) };
      const posing = await upload('PUT', `${handle}/stdout`, jobId, 'FORGED\n', claimed);
      expect(posing).toMatchObject({
        status: 403,
        body: { error: { code: 'forbidden', message: expect.stringMatching(/upload token is not the one job .* was sent to agent "worker" with/) } },
      });
      // Nor in parts, nor by aborting the real agent's upload.
      const shape = JSON.stringify({ bytes: 3 * R2_MULTIPART_MIN_PART_BYTES, partBytes: R2_MULTIPART_MIN_PART_BYTES, lines: 1, truncated: false });
      expect(await upload('POST', `${handle}/stdout/multipart`, jobId, shape, claimed)).toMatchObject({ status: 403, body: { error: { code: 'forbidden' } } });
      expect(await upload('DELETE', `${handle}/stdout/multipart`, jobId, undefined, claimed)).toMatchObject({
        status: 403,
        body: { error: { code: 'forbidden' } },
      });
      expect((await call(c, 'job_status', { job_id: jobId })).s).toMatchObject({ artifacts: { stdout: { state: 'uploading' } } });

      released = true;
      release();
      const done = await until(
        async () => {
          const v = (await call(c, 'job_status', { job_id: jobId })).s;
          return v.artifact_state === 'complete' ? v : null;
        },
        60_000,
        'the real upload to be stored',
      );
      expect(done).toMatchObject({ artifacts: { stdout: { state: 'complete', bytes: 12 }, stderr: { state: 'complete', bytes: 9 } } });
      // The real agent's uploads went through (the edge took its grant), and the stored output is the job's.
      expect(proxy.uploadRequests.filter((u) => u.request.includes(`/${handle}/`)).map((u) => u.status)).toEqual([201, 201]);
      expect((await call(c, 'job_output', { job_id: jobId })).s).toMatchObject({ data: 'real-output\n', source: 'artifact', eof: true });
      expect((await call(c, 'job_output', { job_id: jobId, stream: 'stderr' })).s).toMatchObject({ data: 'real-err\n', source: 'artifact' });
    } finally {
      if (!released) release();
      second.close();
    }
  }, 180_000);
});
