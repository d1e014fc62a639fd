/**
 * A gateway restart (a deploy) in the middle of a multipart artifact upload, end to end: real
 * `wrangler dev` (stopped and started again over the same state), a real agent with 5 MiB parts
 * talking through a loopback proxy that holds the parts until the gateway is back and cuts one
 * of them. The upload the team's DO started before the restart goes on after it: the parts go to
 * the restarted gateway, the cut one is sent again alone, and the artifact reads back byte for byte.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { startGateway, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { R2_MULTIPART_MIN_PART_BYTES } from '../../src/contracts/limits.ts';
import { AgentProxy } from './agent-proxy.ts';
import { Fleet, call } from './fleet.ts';
import { until } from '../support/until.ts';

const POLICY = {
  ...DEFAULT_POLICY,
  executables: { allow: [...DEFAULT_POLICY.executables.allow, 'seq'] },
  limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: 120_000, maxArtifactBytes: 64 * 1024 * 1024 },
};
/** `seq 1 1700000`: 12,488,896 bytes, 3 parts of 5 MiB (the last 1.9 MB). */
const SEQ = 1_700_000;
const expected = Buffer.from(Array.from({ length: SEQ }, (_, i) => `${i + 1}\n`).join(''));
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

let gw: Gateway;
let proxy: AgentProxy;
let fleet: Fleet;

describe('a gateway restart in the middle of a multipart upload', () => {
  beforeAll(async () => {
    gw = await startGateway();
    await gw.putPolicy('deploy', POLICY);
    fleet = new Fleet(gw, { tmpPrefix: 'gatehouse-uprestart-', capacity: 2 });
    proxy = new AgentProxy(gw.url);
    await proxy.start();
    await fleet.agentFor('deploy', 'deploy-agent', { extraArgs: ['--artifact-part-bytes', String(R2_MULTIPART_MIN_PART_BYTES)], url: proxy.url });
  }, 300_000);

  afterAll(async () => {
    await fleet?.close();
    await proxy?.stop();
    await gw?.stop();
  });

  it('goes on where it stopped: the parts reach the restarted gateway, a cut part is sent again alone, and the artifact reads back whole', async () => {
    const c = await fleet.mcp('deploy');
    const release = proxy.holdUploads();
    let handle = '';
    let jobId = '';
    try {
      const started = await call(c, 'execute', { command: 'seq', args: ['1', String(SEQ)], background: true });
      expect(started.r.isError).toBeFalsy();
      handle = started.s.artifact_handle as string;
      jobId = started.s.job_id as string;
      // The DO has started the R2 upload; every part waits at the proxy.
      await until(
        async () => proxy.uploadRequests.some((u) => u.request === `POST /agent/v1/artifacts/${handle}/stdout/multipart`),
        60_000,
        'the multipart start',
      );
      await gw.restart();
      // The first part sent after the restart is cut (what a dropped connection looks like to the agent).
      proxy.failNextUpload('/multipart/2', 502);
    } finally {
      release();
    }
    const after = await fleet.mcp('deploy');
    const ended = await until(
      async () => {
        const s = (await call(after, 'job_status', { job_id: jobId })).s;
        return s.artifact_state === 'uploading' ? null : s;
      },
      120_000,
      'the upload to end after the restart',
    );
    expect(ended).toMatchObject({
      state: 'exited',
      exit_code: 0,
      artifact_state: 'complete',
      artifacts: { stdout: { state: 'complete', bytes: expected.length } },
    });
    const bodies = proxy.uploadRequests
      .filter((u) => u.request.includes(`/${handle}/stdout/multipart`))
      .map((u) => `${u.request.replace(/^(\w+) .*\/stdout/, '$1 …')} ${u.status}`);
    // One upload, started once: nothing sent before the restart is sent again but the cut part.
    expect(bodies).toEqual([
      'POST …/multipart 201',
      'PUT …/multipart/1 200',
      'PUT …/multipart/2 502',
      'PUT …/multipart/2 200',
      'PUT …/multipart/3 200',
      'POST …/multipart/complete 201',
    ]);
    const down = await fetch(`${gw.url}/admin/v1/artifacts/${handle}/stdout/download`, {
      headers: { Authorization: `Bearer ${await gw.token({ team: 'deploy', scopes: ['admin'] })}` },
    });
    expect(down.status).toBe(200);
    expect(sha(new Uint8Array(await down.arrayBuffer()))).toBe(sha(expected));
  }, 300_000);
});
