import { describe, expect, it } from 'vitest';
import { ScriptServersPolicy } from '../../src/contracts/policy.ts';
import { decideServerCall, mayListServer } from '../../src/policy/servers.ts';

const policy = (p: unknown) => ScriptServersPolicy.parse(p);

describe('script.servers decisions', () => {
  it('denies every call when the policy has no servers section', () => {
    expect(decideServerCall(undefined, 'docs', 'search')).toEqual({ decision: 'deny', reason: 'the team policy has no script.servers section' });
    expect(mayListServer(undefined, 'docs').decision).toBe('deny');
  });

  it('takes the first rule whose server and tool match, else the default (deny unless set)', () => {
    const p = policy({
      rules: [
        { server: 'docs', tools: ['delete'], decision: 'deny', reason: 'no deleting' },
        { server: 'docs', decision: 'allow' },
        { server: '*', tools: ['write'], decision: 'ask', reason: 'writes need a person' },
      ],
    });
    expect(decideServerCall(p, 'docs', 'delete')).toEqual({ decision: 'deny', reason: 'no deleting' });
    expect(decideServerCall(p, 'docs', 'search').decision).toBe('allow');
    expect(decideServerCall(p, 'tracker', 'write')).toEqual({ decision: 'ask', reason: 'writes need a person' });
    expect(decideServerCall(p, 'tracker', 'read')).toMatchObject({ decision: 'deny', reason: expect.stringContaining('script.servers.default = deny') });
  });

  it('lets a script list a server unless no tool of it can be allowed', () => {
    const p = policy({
      rules: [
        { server: 'secret', decision: 'deny', reason: 'off limits' },
        { server: 'docs', tools: ['search'], decision: 'allow' },
      ],
    });
    expect(mayListServer(p, 'docs').decision).toBe('allow');
    expect(mayListServer(p, 'secret')).toEqual({ decision: 'deny', reason: 'off limits' });
    expect(mayListServer(p, 'other').decision).toBe('deny');
  });

  it('refuses a rule naming a server id that cannot exist', () => {
    const r = ScriptServersPolicy.safeParse({ rules: [{ server: 'a b', decision: 'allow' }] });
    expect(r.error?.issues[0]?.message).toMatch(/server is a server id/);
  });
});
