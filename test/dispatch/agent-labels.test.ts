/** `gatehouse agent --label …`: placement labels parsed, validated and advertised in hello. */
import { describe, expect, it } from 'vitest';
import { parseAgentArgs } from '../../executor/config.ts';
import { AgentHello, PROTOCOL_VERSION } from '../../src/contracts/agent-protocol.ts';

const base = ['--url', 'http://127.0.0.1:1', '--root', '/tmp/ws'];
const env = { GATEHOUSE_AGENT_TOKEN: 'x' };

describe('agent labels', () => {
  it('takes --label more than once, and GATEHOUSE_AGENT_LABELS when no flag is given', () => {
    const r = parseAgentArgs([...base, '--label', 'gpu', '--label=linux-x64', '--label', 'gpu'], env);
    expect(r.ok && r.config.labels).toEqual(['gpu', 'linux-x64']);
    const e = parseAgentArgs(base, { ...env, GATEHOUSE_AGENT_LABELS: 'a, b' });
    expect(e.ok && e.config.labels).toEqual(['a', 'b']);
  });

  it('refuses a malformed label with what is allowed', () => {
    const r = parseAgentArgs([...base, '--label', 'has space'], env);
    expect(r).toMatchObject({ ok: false, message: expect.stringContaining('--label must be 1-64 characters') });
  });

  it('a hello without labels still parses (older agents), with none', () => {
    const h = AgentHello.parse({ type: 'hello', v: PROTOCOL_VERSION, agentId: 'a', version: '1', capacity: 1, sandbox: 'bwrap', runtimes: [], running: [] });
    expect(h.labels).toEqual([]);
  });
});
