/** `network.credentials`: a secret bound to exact hosts the same section allows, with a header the proxy may set. */
import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/policy/parse.ts';
import { networkGrant } from '../../src/policy/network.ts';

const policy = (network: unknown) => ({ version: 1, network });
const problem = (network: unknown) => {
  const r = parsePolicy(policy(network));
  if (r.ok) throw new Error('expected the policy to be refused');
  expect(r.error.code).toBe('invalid_argument');
  return r.error.message;
};

describe('network.credentials', () => {
  it('puts a binding to an allowed host in the grant, header Authorization by default', () => {
    const r = parsePolicy(
      policy({ mode: 'allowlist', allow: [{ host: '*.example.com' }], credentials: [{ secret: 'GIT_TOKEN', hosts: ['Git.Example.com'], scheme: 'Bearer' }] }),
    );
    if (!r.ok) throw new Error(r.error.message);
    expect(networkGrant(r.value).credentials).toEqual([{ secret: 'GIT_TOKEN', hosts: ['git.example.com'], header: 'Authorization', scheme: 'Bearer' }]);
  });

  it('refuses a host the section does not allow on 443, naming the path and the key to change', () => {
    const m = problem({
      mode: 'allowlist',
      allow: [{ host: 'a.example.com' }, { host: 'b.example.com', ports: [80] }],
      credentials: [{ secret: 'T', hosts: ['a.example.com', 'b.example.com', 'c.example.com'] }],
    });
    expect(m).toContain('network.credentials.0.hosts.1');
    expect(m).toContain('network.credentials.0.hosts.2');
    expect(m).not.toContain('hosts.0');
    expect(m).toContain('add it to allow');
  });

  it('refuses credentials with mode off, a wildcard or IP host, a framing header, a bad name and two secrets for one header', () => {
    expect(problem({ mode: 'off', credentials: [{ secret: 'T', hosts: ['a.example.com'] }] })).toContain('mode "off"');
    expect(problem({ mode: 'open', credentials: [{ secret: 'T', hosts: ['*.example.com'] }] })).toContain('no wildcard');
    expect(problem({ mode: 'open', credentials: [{ secret: 'T', hosts: ['10.0.0.1'] }] })).toContain('no wildcard, no IP');
    expect(problem({ mode: 'open', credentials: [{ secret: 'T', hosts: ['a.example.com'], header: 'Host' }] })).toContain('does not set "Host"');
    expect(problem({ mode: 'open', credentials: [{ secret: '1bad name', hosts: ['a.example.com'] }] })).toContain('a secret name is');
    expect(
      problem({
        mode: 'open',
        credentials: [
          { secret: 'A', hosts: ['a.example.com'] },
          { secret: 'B', hosts: ['a.example.com'], header: 'authorization' },
        ],
      }),
    ).toContain('already gets header');
  });
});
