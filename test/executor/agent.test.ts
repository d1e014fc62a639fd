/**
 * The agent against a stand-in gateway: hello/welcome/heartbeat, jobs with live output,
 * job.exit as soon as the process ends and each artifact upload reported after it (its inline
 * output left to the live frames on its first send, carried whole on a re-send), exits and
 * artifact reports kept until job.ack and re-sent after reconnect,
 * jobs that outlive a dropped socket, malformed messages, refused tokens, and the CLI.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Agent } from '../../executor/agent.ts';
import { JobRunner } from '../../executor/jobs/runner.ts';
import { startDriver } from '../../executor/sandbox/index.ts';
import type { SandboxDriver } from '../../executor/sandbox/types.ts';
import { silentLogger, type Logger } from '../../executor/log.ts';
import { until } from '../support/until.ts';
import { AGENT_PROTOCOL_CLOSE, ARTIFACT_UPLOAD_PATH, PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';
import { FakeEdge } from './fake-edge.ts';
import { jobSpec, requireTool, runtimes } from './helpers.ts';

const ROOT = resolve(import.meta.dirname, '../..');
let edge: FakeEdge;
let root: string;
let stateDir: string;
let driver: SandboxDriver;
let agent: Agent | null = null;
let logs: string[] = [];
const log: Logger = { info: (m) => logs.push(m), warn: (m) => logs.push(m), error: (m) => logs.push(m) };
const isType = (t: string, jobId?: string) => (m: Record<string, unknown>) => m.type === t && (!jobId || m.jobId === jobId);
const waitFor = async (cond: () => boolean, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 20));
  }
};

/** What the live frames of a job's stream carried, in offset order. */
const liveText = (jobId: string, stream: string) =>
  Buffer.concat(
    edge.received
      .filter((m) => m.type === 'job.output' && m.jobId === jobId && m.stream === stream)
      .sort((a, b) => (a.offset as number) - (b.offset as number))
      .map((m) => m.bytes as Buffer),
  ).toString('utf8');

beforeAll(async () => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'gh-agent-ws-')));
  stateDir = mkdtempSync(join(tmpdir(), 'gh-agent-state-'));
  const d = await startDriver('none', { root, stateDir }, silentLogger);
  if (!d.ok) throw new Error(d.error.message);
  driver = d.value;
});
afterAll(async () => {
  await driver.close();
  rmSync(root, { recursive: true, force: true });
  rmSync(stateDir, { recursive: true, force: true });
});
afterEach(async () => {
  await agent?.stop();
  agent = null;
  await edge?.stop();
  logs = [];
});

async function startAgent(o: { capacity?: number; token?: string } = {}) {
  edge = new FakeEdge();
  await edge.start();
  const rt = await runtimes();
  const runner = new JobRunner({
    driver,
    runtimes: rt,
    root,
    spoolDir: join(stateDir, 'spool'),
    capacity: o.capacity ?? 2,
    ceilings: { maxTimeoutMs: 60_000, maxArtifactBytes: 1 << 30 },
    upload: { url: edge.url, token: o.token ?? edge.token },
    log,
  });
  agent = new Agent({
    url: edge.url,
    token: o.token ?? edge.token,
    agentId: 'a1',
    version: '0.1.0',
    capacity: o.capacity ?? 2,
    sandbox: 'none',
    runtimes: rt.list,
    runner,
    log,
  });
  agent.start();
  return runner;
}

async function welcome() {
  const hello = await edge.next(isType('hello'));
  edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'acme', heartbeatMs: 100 });
  return hello;
}

describe('agent ↔ gateway protocol', () => {
  it('says hello with its id, capacity, sandbox and runtimes, then heartbeats after welcome', async () => {
    await startAgent();
    const hello = await welcome();
    expect(hello).toMatchObject({ type: 'hello', v: PROTOCOL_VERSION, agentId: 'a1', version: '0.1.0', capacity: 2, sandbox: 'none', running: [] });
    expect((hello.runtimes as { name: string }[]).map((r) => r.name)).toContain('shell');
    expect(await edge.next(isType('ping'))).toEqual({ type: 'ping' });
    expect(logs.join('\n')).toMatch(/connected to http:\/\/127\.0\.0\.1:\d+ as agent a1 \(team acme\)/);
  });

  it('runs a job: live output, job.exit, then the artifact PUTs with headers and a job.artifact report per stream', async () => {
    await startAgent();
    await welcome();
    // An inline cap below the output: the exit holds neither stream whole, so both are uploaded.
    edge.send({
      type: 'job.start',
      spec: jobSpec({ jobId: 'j1', mode: 'shell', command: 'echo hi; echo oops >&2; exit 2', limits: { inlineBytes: 2, artifactBytes: 1024 * 1024 } }),
    });
    const exit = await edge.next(isType('job.exit', 'j1'));
    // The inline output went out as live frames on this socket: the exit leaves it to the edge to rebuild (FakeEdge does, as the edge).
    expect(exit).toMatchObject({
      state: 'exited',
      exitCode: 2,
      stdout: 'hi',
      stderr: '',
      stdoutTruncated: true,
      inlineFromLive: true,
      streams: { stdout: { bytes: 3 }, stderr: { bytes: 5 } },
      artifactsUploaded: false,
      pendingArtifacts: ['stdout', 'stderr'],
    });
    expect(liveText('j1', 'stdout')).toBe('hi\n');
    expect(liveText('j1', 'stderr')).toBe('oops\n');
    const reports = [await edge.next(isType('job.artifact', 'j1')), await edge.next(isType('job.artifact', 'j1'))];
    expect(reports).toEqual([
      { type: 'job.artifact', jobId: 'j1', stream: 'stdout', state: 'complete', bytes: 3 },
      { type: 'job.artifact', jobId: 'j1', stream: 'stderr', state: 'complete', bytes: 5 },
    ]);
    const up = edge.uploads.find((u) => u.path === `${ARTIFACT_UPLOAD_PATH}/art_j1_0123456789/stdout`)!;
    expect(up.body.toString()).toBe('hi\n');
    expect(up.headers).toMatchObject({
      'content-length': '3',
      authorization: `Bearer ${edge.token}`,
      'x-gatehouse-job': 'j1',
      'x-gatehouse-lines': '1',
      'x-gatehouse-truncated': '0',
    });
    expect(edge.uploads.some((u) => u.path.endsWith('/stderr'))).toBe(true);
  });

  it('uploads no stream its exit holds whole (protocol v4), and holds the job for nothing once acknowledged', async () => {
    await startAgent();
    await welcome();
    // Every byte inline: 'héllo' decodes cleanly; the invalid byte on stderr becomes U+FFFD, so stderr is uploaded.
    edge.send({ type: 'job.start', spec: jobSpec({ jobId: 'whole', mode: 'shell', command: "printf 'h\\303\\251llo\\n'; printf 'x\\377\\n' >&2" }) });
    const exit = await edge.next(isType('job.exit', 'whole'));
    expect(exit).toMatchObject({
      stdout: 'héllo\n',
      stdoutTruncated: false,
      streams: { stdout: { bytes: 7 }, stderr: { bytes: 3 } },
      pendingArtifacts: ['stderr'],
    });
    expect(await edge.next(isType('job.artifact', 'whole'))).toMatchObject({ stream: 'stderr', state: 'complete', bytes: 3 });
    expect(edge.uploads.map((u) => u.path)).toEqual([`${ARTIFACT_UPLOAD_PATH}/art_whole_0123456789/stderr`]);
    edge.send({ type: 'job.ack', jobId: 'whole' });
    edge.send({ type: 'job.ack', jobId: 'whole', stream: 'stderr' });
    edge.send({ type: 'job.start', spec: jobSpec({ jobId: 'all', mode: 'shell', command: 'echo all of it' }) });
    const all = await edge.next(isType('job.exit', 'all'));
    expect(all).toMatchObject({ stdout: 'all of it\n', artifactsUploaded: true });
    expect(all).not.toHaveProperty('pendingArtifacts');
    edge.send({ type: 'job.ack', jobId: 'all' });
    await new Promise((r) => setTimeout(r, 300));
    expect(edge.uploads).toHaveLength(1);
    expect(edge.received.some(isType('job.artifact', 'all'))).toBe(false);
  });

  it('keeps a job running across a dropped socket and re-sends its exit until acknowledged', async () => {
    await startAgent();
    await welcome();
    edge.send({
      type: 'job.start',
      spec: jobSpec({ jobId: 'j2', mode: 'shell', command: 'sleep 1; echo done', limits: { inlineBytes: 2, artifactBytes: 1024 * 1024 } }),
    });
    await new Promise((r) => setTimeout(r, 200));
    edge.drop();
    const hello2 = await edge.next(isType('hello'));
    expect(hello2.running).toEqual(['j2']);
    edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'acme', heartbeatMs: 100 });
    // Its output came after the reconnect: frames and exit on one socket, so the first send leaves the text to them.
    expect(await edge.next(isType('job.exit', 'j2'))).toMatchObject({ state: 'exited', exitCode: 0, stdout: 'do', inlineFromLive: true });
    // Not acknowledged: after the next reconnect it comes again, whole (that socket's edge may lack the frames), and hello still lists it.
    edge.drop();
    const hello3 = await edge.next(isType('hello'));
    expect(hello3.running).toEqual(['j2']);
    edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'acme', heartbeatMs: 100 });
    const again = await edge.next(isType('job.exit', 'j2'));
    expect(again).toMatchObject({ state: 'exited', exitCode: 0, stdout: 'do' });
    expect(again).not.toHaveProperty('inlineFromLive');
    expect(await edge.next(isType('job.artifact', 'j2'))).toMatchObject({ stream: 'stdout', state: 'complete' });
    edge.send({ type: 'job.ack', jobId: 'j2' });
    edge.send({ type: 'job.ack', jobId: 'j2', stream: 'stdout' });
    await new Promise((r) => setTimeout(r, 100));
    edge.drop();
    const hello4 = await edge.next(isType('hello'));
    expect(hello4.running).toEqual([]);
  }, 30_000);

  it('reports the exit while the upload is held, then how it ended; a refused upload is reported failed and re-sent until acknowledged', async () => {
    await startAgent();
    await welcome();
    let release!: () => void;
    edge.uploadGate = new Promise<void>((r) => (release = r));
    edge.send({
      type: 'job.start',
      spec: jobSpec({ jobId: 'held', mode: 'shell', command: 'echo kept', limits: { inlineBytes: 2, artifactBytes: 1024 * 1024 } }),
    });
    // The exit comes while the upload hangs: the edge learns how the job ended without waiting for it.
    expect(await edge.next(isType('job.exit', 'held'))).toMatchObject({
      state: 'exited',
      exitCode: 0,
      stdout: 'ke',
      inlineFromLive: true,
      pendingArtifacts: ['stdout'],
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(edge.received.some(isType('job.artifact', 'held'))).toBe(false);
    expect(edge.uploads).toHaveLength(0);
    // Until the upload is reported, the agent says it holds the job.
    // (its jobs go as `running` at a heartbeat when they changed: before or after the exit, whichever came first)
    const said = () => edge.received.filter(isType('running')).map((m) => m.jobs);
    await waitFor(() => said().length > 0);
    expect(said().at(-1)).toEqual(['held']);
    release();
    expect(await edge.next(isType('job.artifact', 'held'))).toMatchObject({ stream: 'stdout', state: 'complete', bytes: 5 });
    edge.send({ type: 'job.ack', jobId: 'held' });
    edge.send({ type: 'job.ack', jobId: 'held', stream: 'stdout' });

    edge.uploadGate = null;
    edge.uploadStatus = 400;
    edge.send({
      type: 'job.start',
      spec: jobSpec({ jobId: 'refused', mode: 'shell', command: 'echo lost-upload', limits: { inlineBytes: 2, artifactBytes: 1024 * 1024 } }),
    });
    await edge.next(isType('job.exit', 'refused'));
    const failed = await edge.next(isType('job.artifact', 'refused'));
    expect(failed).toMatchObject({ stream: 'stdout', state: 'failed', bytes: 12 });
    expect(failed.error).toMatch(/refused: HTTP 400/);
    // The log: one line per job when it ends (a stored stream adds nothing); a failed upload adds an error line.
    expect(logs.filter((l) => l.includes('job held'))).toEqual([expect.stringMatching(/^job held exited 0 in \d+ ms \(shell\)$/)]);
    expect(logs.filter((l) => l.includes('job refused'))).toEqual([
      expect.stringMatching(/^job refused exited 0 in \d+ ms \(shell\)$/),
      expect.stringMatching(/^job refused: artifact upload of stdout refused: HTTP 400: .*\(spool kept at /),
    ]);
    edge.drop();
    const hello = await edge.next(isType('hello'));
    expect(hello.running).toEqual(['refused']);
    edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'acme', heartbeatMs: 100 });
    await edge.next(isType('job.exit', 'refused'));
    expect(await edge.next(isType('job.artifact', 'refused'))).toMatchObject({ state: 'failed' });
    edge.send({ type: 'job.ack', jobId: 'refused' });
    edge.send({ type: 'job.ack', jobId: 'refused', stream: 'stdout' });
    await new Promise((r) => setTimeout(r, 100));
    edge.drop();
    expect((await edge.next(isType('hello'))).running).toEqual([]);
  }, 30_000);

  it("has its jobs' egress proxies send the asks still waiting again after a reconnect (an answer sent meanwhile was lost), not on the first welcome", async () => {
    const runner = await startAgent();
    const again = vi.spyOn(runner, 'egressAskAgain');
    await welcome();
    await new Promise((r) => setTimeout(r, 100));
    expect(again).not.toHaveBeenCalled();
    edge.drop();
    await welcome();
    await until(async () => again.mock.calls.length === 1, 10_000, 'the asks sent again');
  }, 30_000);

  it('sends the inline output whole when a reconnect came between its first live frame and the exit', async () => {
    await startAgent();
    await welcome();
    edge.send({ type: 'job.start', spec: jobSpec({ jobId: 'mid', mode: 'shell', command: 'echo first; sleep 1.5; echo second' }) });
    await edge.next(isType('job.output', 'mid'));
    // The frames sent on the dropped socket may never have reached the edge; the exit goes on the next one.
    edge.drop();
    await edge.next(isType('hello'));
    edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'acme', heartbeatMs: 100 });
    const exit = await edge.next(isType('job.exit', 'mid'));
    expect(exit).toMatchObject({ state: 'exited', exitCode: 0, stdout: 'first\nsecond\n', stdoutTruncated: false });
    expect(exit).not.toHaveProperty('inlineFromLive');
  }, 30_000);

  it('sends the inline output whole when the relay did not send every byte of it (artifact cap below the inline cap)', async () => {
    await startAgent();
    await welcome();
    // The relay reads the spool, which holds the first artifactBytes only.
    edge.send({ type: 'job.start', spec: jobSpec({ jobId: 'short', command: 'echo', args: ['hello'], limits: { inlineBytes: 1000, artifactBytes: 2 } }) });
    const exit = await edge.next(isType('job.exit', 'short'));
    expect(exit).toMatchObject({ stdout: 'hello\n', streams: { stdout: { bytes: 6, artifactTruncated: true } } });
    expect(exit).not.toHaveProperty('inlineFromLive');
    expect(liveText('short', 'stdout')).toBe('he');
  });

  it('logs malformed and unknown messages and keeps working', async () => {
    await startAgent();
    await welcome();
    edge.sendRaw('not json');
    edge.send({ type: 'job.explode' });
    edge.send({ type: 'job.start', spec: { jobId: 'x' } });
    edge.send({ type: 'job.start', spec: jobSpec({ jobId: 'j3', command: 'echo', args: ['still here'] }) });
    expect(await edge.next(isType('job.exit', 'j3'))).toMatchObject({ stdout: 'still here\n', inlineFromLive: true });
    expect(logs.filter((l) => l.includes('ignored a message')).length).toBe(3);
    expect(edge.connections).toBe(1);
  });

  it('refuses work beyond capacity with job.error and cancels on job.cancel', async () => {
    await startAgent({ capacity: 1 });
    await welcome();
    edge.send({ type: 'job.start', spec: jobSpec({ jobId: 'long', command: 'sleep', args: ['20'] }) });
    edge.send({ type: 'job.start', spec: jobSpec({ jobId: 'extra', command: 'true' }) });
    expect(await edge.next(isType('job.error', 'extra'))).toMatchObject({ code: 'capacity' });
    edge.send({ type: 'job.cancel', jobId: 'long', reason: 'client went away' });
    expect(await edge.next(isType('job.exit', 'long'))).toMatchObject({ state: 'cancelled', exitCode: null });
  });

  it('says clearly when the gateway refuses the agent token, and keeps retrying', async () => {
    await startAgent({ token: 'wrong-token' });
    await waitFor(() => logs.some((l) => l.includes('refused the agent token (HTTP 401)')));
    expect(edge.connections).toBe(0);
  });
});

describe('a refusal the agent cannot fix by reconnecting', () => {
  it('stops for good when the gateway closes its hello for another protocol version (4426), saying what to do', async () => {
    await startAgent();
    await edge.next(isType('hello'));
    edge.close(AGENT_PROTOCOL_CLOSE, 'agent protocol v1 only; this agent speaks v2');
    await waitFor(() => logs.some((l) => l.includes('not reconnecting')));
    const line = logs.find((l) => l.includes('not reconnecting'))!;
    expect(line).toContain(`(close code ${AGENT_PROTOCOL_CLOSE}): agent protocol v1 only; this agent speaks v2`);
    expect(line).toContain('install the agent of the same Gatehouse version as the gateway');
    // Longer than the first reconnect delay: it does not come back.
    await new Promise((r) => setTimeout(r, 2500));
    expect(edge.connections).toBe(1);
  });
});

describe('agent CLI', () => {
  const NODE = process.execPath;
  const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    spawn(NODE, [join(ROOT, 'executor/main.ts'), ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });

  it('exits 2 with the allowed flags on a bad flag', async () => {
    const p = run(['--url', 'http://127.0.0.1:1', '--root', root, '--sandbox', 'docker'], { GATEHOUSE_AGENT_TOKEN: 't' });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    const code = await new Promise((r) => p.on('exit', r));
    expect(code).toBe(2);
    expect(out).toContain('--sandbox must be one of gvisor, bwrap, none');
    expect(out).toContain('--max-artifact-bytes');
  });

  const refusal = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
    const p = run(args, env);
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    const code = await new Promise((r) => p.on('exit', r));
    return { code, out };
  };

  it('refuses the agent token on the command line, where every local user sees it in ps', async () => {
    const { code, out } = await refusal(['--url', 'http://127.0.0.1:1', '--token', 'secret-on-argv', '--root', root, '--sandbox', 'bwrap']);
    expect(code).toBe(2);
    expect(out).toContain('the agent token is not taken on the command line');
    expect(out).toContain('--token-file FILE');
    expect(out).not.toContain('secret-on-argv');
  });

  it('refuses --sandbox none unless no isolation is explicitly allowed, and says why', async () => {
    const { code, out } = await refusal(['--url', 'http://127.0.0.1:1', '--root', root, '--sandbox', 'none'], { GATEHOUSE_AGENT_TOKEN: 't' });
    expect(code).toBe(2);
    expect(out).toContain('--sandbox none is refused: jobs would run without isolation');
    expect(out).toContain('--allow-no-isolation');
  });

  it('starts, prints what it found, connects, and stops cleanly on SIGTERM', async () => {
    edge = new FakeEdge();
    await edge.start();
    const ws = mkdtempSync(join(tmpdir(), 'gh-cli-ws-'));
    const p = run(['--url', edge.url, '--root', join(ws, 'created'), '--sandbox', 'none', '--allow-no-isolation', '--capacity', '3', '--id', 'cli-agent'], {
      GATEHOUSE_AGENT_TOKEN: edge.token,
    });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    const hello = await edge.next(isType('hello'), 30_000);
    expect(hello).toMatchObject({ agentId: 'cli-agent', capacity: 3, sandbox: 'none' });
    edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'acme', heartbeatMs: 1000 });
    await waitFor(() => /connected to /.test(out));
    expect(out).toMatch(/sandbox: none/);
    expect(out).toMatch(/NO ISOLATION/);
    expect(out).toMatch(/runtimes: .*python/);
    expect(out).toMatch(/capacity: 3/);
    p.kill('SIGTERM');
    expect(await new Promise((r) => p.on('exit', r))).toBe(0);
    rmSync(ws, { recursive: true, force: true });
  }, 40_000);

  it.runIf(requireTool('gvisor'))(
    'with gVisor, a SIGTERM to its process group mid-job cancels the job and leaves no sandbox behind',
    async () => {
      edge = new FakeEdge();
      await edge.start();
      const ws = mkdtempSync(join(tmpdir(), 'gh-cli-ws-'));
      const state = mkdtempSync(join(tmpdir(), 'gh-cli-state-'));
      const p = spawn(
        NODE,
        [join(ROOT, 'executor/main.ts'), '--url', edge.url, '--root', ws, '--sandbox', 'gvisor', '--capacity', '2', '--id', 'term', '--state-dir', state],
        { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GATEHOUSE_AGENT_TOKEN: edge.token } },
      );
      p.stdout!.resume();
      p.stderr!.resume();
      await edge.next(isType('hello'), 30_000);
      edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'acme', heartbeatMs: 1000 });
      edge.send({ type: 'job.start', spec: jobSpec({ jobId: 'term-job', mode: 'shell', command: 'sleep 30' }) });
      await new Promise((r) => setTimeout(r, 1500));
      const started = Date.now();
      process.kill(-p.pid!, 'SIGTERM'); // what the e2e harness does
      expect(await new Promise((r) => p.on('exit', r))).toBe(0);
      expect(Date.now() - started).toBeLessThan(5000); // the harness KILLs after 5 s
      expect(await edge.next(isType('job.exit', 'term-job'))).toMatchObject({ state: 'cancelled' });
      expect(execFileSync('runsc', ['--root', join(state, 'runsc'), 'list', '-quiet'], { encoding: 'utf8' }).trim()).toBe('');
      rmSync(ws, { recursive: true, force: true });
      rmSync(state, { recursive: true, force: true });
    },
    60_000,
  );
});
