/** The test-mode resolver switch: only with its explicit test flag, only to 127.0.0.1. */
import { describe, expect, it } from 'vitest';
import { parseAgentArgs } from '../../../executor/config.ts';
import { parseTestHosts, testHostsFromEnv } from '../../../executor/egress/test-hosts.ts';

const base = { GATEHOUSE_URL: 'http://127.0.0.1:8787', GATEHOUSE_AGENT_TOKEN: 't', GATEHOUSE_ROOT: '/tmp/ws' };

describe('egress test hosts', () => {
  it('the agent refuses to start with the map unless the test flag is set too', () => {
    const r = parseAgentArgs([], { ...base, GATEHOUSE_EGRESS_TEST_HOSTS: 'registry.npmjs.org=127.0.0.1' });
    expect(r.ok).toBe(false);
    expect(!r.ok && !r.help && r.message).toContain('GATEHOUSE_EGRESS_TEST_MODE=1');
    const ok = parseAgentArgs([], { ...base, GATEHOUSE_EGRESS_TEST_HOSTS: 'Registry.npmjs.org=127.0.0.1:4873', GATEHOUSE_EGRESS_TEST_MODE: '1' });
    expect(ok.ok && [...(ok.config.egressTestHosts ?? new Map())]).toEqual([['registry.npmjs.org', { port: 4873 }]]);
    const prod = parseAgentArgs([], base);
    expect(prod.ok && prod.config.egressTestHosts).toBe(null);
  });

  it('accepts only 127.0.0.1 as a target', () => {
    for (const bad of ['a.test=10.0.0.1', 'a.test=localhost', 'a.test=127.0.0.2', 'a.test=127.0.0.1:0', 'a.test']) {
      expect(parseTestHosts(bad).ok, bad).toBe(false);
    }
    const r = parseTestHosts('a.test=127.0.0.1, b.test=127.0.0.1:99');
    expect(r.ok && [...r.hosts]).toEqual([
      ['a.test', {}],
      ['b.test', { port: 99 }],
    ]);
    expect(testHostsFromEnv({})).toEqual({ ok: true, hosts: null });
  });
});
