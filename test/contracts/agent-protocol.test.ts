/**
 * What the edge keeps of an agent's text fields it stores (error code and message, signal): cut to
 * a bound, never refused — a result must not be lost because its agent sent too much.
 */
import { describe, expect, it } from 'vitest';
import { ERROR_CODE_MAX_CHARS, ERROR_MESSAGE_MAX_CHARS, PROTOCOL_VERSION, parseAgentMessage } from '../../src/contracts/agent-protocol.ts';

const exit = (over: Record<string, unknown>) =>
  JSON.stringify({
    type: 'job.exit',
    jobId: 'j1',
    state: 'signaled',
    exitCode: null,
    signal: 'SIGKILL',
    timedOut: false,
    durationMs: 1,
    stdout: '',
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: { stdout: { bytes: 0, lines: 0, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
    artifactsUploaded: true,
    ...over,
  });

describe('agent messages: oversized text is cut, not refused', () => {
  it('keeps ordinary values as they are', () => {
    const p = parseAgentMessage(exit({ error: { code: 'compile_error', message: 'main.c:1: error' } }));
    expect(p.ok && p.message.type === 'job.exit' && [p.message.signal, p.message.error]).toEqual([
      'SIGKILL',
      { code: 'compile_error', message: 'main.c:1: error' },
    ]);
  });

  it('cuts a long signal, error code and message, saying how long each was; a cut value parses back unchanged', () => {
    const p = parseAgentMessage(exit({ signal: 'S'.repeat(5000), error: { code: 'c'.repeat(5000), message: 'm'.repeat(100_000) } }));
    if (!p.ok || p.message.type !== 'job.exit') throw new Error('not parsed');
    expect(p.message.signal).toBe(`${'S'.repeat(ERROR_CODE_MAX_CHARS)}… (cut: 5000 characters)`);
    expect(p.message.error!.code).toBe(`${'c'.repeat(ERROR_CODE_MAX_CHARS)}… (cut: 5000 characters)`);
    expect(p.message.error!.message).toBe(`${'m'.repeat(ERROR_MESSAGE_MAX_CHARS)}… (cut: 100000 characters)`);
    const again = parseAgentMessage(JSON.stringify(p.message));
    expect(again.ok && again.message).toEqual(p.message);
  });

  it('cuts a job.error message the same way', () => {
    const p = parseAgentMessage(JSON.stringify({ type: 'job.error', jobId: 'j1', code: 'capacity', message: 'x'.repeat(50_000) }));
    expect(p.ok && p.message.type === 'job.error' && p.message.message.length).toBe(ERROR_MESSAGE_MAX_CHARS + '… (cut: 50000 characters)'.length);
  });
});

describe('agent messages: identity fields have bounds (refused past them)', () => {
  const hello = (over: Record<string, unknown>) =>
    JSON.stringify({ type: 'hello', v: PROTOCOL_VERSION, agentId: 'a1', version: '0.1.0', capacity: 4, sandbox: 'none', runtimes: [], running: [], ...over });
  it('accepts a normal hello and heartbeat', () => {
    expect(parseAgentMessage(hello({})).ok).toBe(true);
    // Another version parses too: the edge answers it with a close that names both (agent-messages.ts), not with silence.
    expect(parseAgentMessage(hello({ v: 1 })).ok).toBe(true);
    expect(parseAgentMessage(JSON.stringify({ type: 'heartbeat', running: [crypto.randomUUID()] })).ok).toBe(true);
  });
  it('refuses a 1 MB version, a running list past 256 jobs, or a job id past 128 characters', () => {
    expect(parseAgentMessage(hello({ version: 'v'.repeat(1 << 20) })).ok).toBe(false);
    expect(parseAgentMessage(hello({ running: Array.from({ length: 257 }, () => crypto.randomUUID()) })).ok).toBe(false);
    expect(parseAgentMessage(JSON.stringify({ type: 'heartbeat', running: ['j'.repeat(129)] })).ok).toBe(false);
  });
  it('takes the agent ids `gatehouse agent --id` takes (a hostname-pid, user@host:1) and refuses control and bidi characters, saying what is allowed', () => {
    for (const agentId of ['a1', 'build-host.example.com-4242', 'ci@runner:3', 'x_y', 'a'.repeat(128)])
      expect(parseAgentMessage(hello({ agentId })).ok, agentId).toBe(true);
    for (const agentId of ['build\x1b[8m-1', 'build\u202e1-', 'a\u2066b', 'a b', 'a/b', '', 'a'.repeat(129)]) {
      const p = parseAgentMessage(hello({ agentId }));
      expect(p.ok, agentId).toBe(false);
      if (!p.ok)
        expect(p.reason).toBe('malformed message: agentId: agentId must be 1-128 characters of letters, digits, . _ - @ : (as `gatehouse agent --id` takes)');
    }
  });
});

describe('agent messages: an exit may leave its inline output to the live frames', () => {
  it('says so with inlineFromLive: true, and only true', () => {
    const p = parseAgentMessage(exit({ inlineFromLive: true }));
    expect(p.ok && p.message.type === 'job.exit' && p.message.inlineFromLive).toBe(true);
    expect(parseAgentMessage(exit({ inlineFromLive: false })).ok).toBe(false);
  });
});
