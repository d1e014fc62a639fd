/** A token is never stronger than its minter (src/auth/minter.ts): the pure rules the admin API applies. */
import { describe, expect, it } from 'vitest';
import { authorityOf, minterFor, mintRefusal, roleCovers } from '../../src/auth/minter.ts';

describe('token authority', () => {
  it('acts with the signed-in member role, else the minter role; bootstrap is owner, no minter is admin', () => {
    expect(authorityOf({ member: { memberId: 'm', role: 'member' }, minter: { kind: 'bootstrap' } })).toBe('member');
    expect(authorityOf({ minter: { kind: 'bootstrap' } })).toBe('owner');
    expect(authorityOf({ minter: { kind: 'member', memberId: 'm', role: 'admin' } })).toBe('admin');
    expect(authorityOf({})).toBe('admin');
  });

  it('passes the person on: a session mints as that member, a token as its own minter, an unattributed token as none', () => {
    expect(minterFor({ member: { memberId: 'mem_a', role: 'owner' } })).toEqual({ kind: 'member', memberId: 'mem_a', role: 'owner' });
    expect(minterFor({ minter: { kind: 'member', memberId: 'mem_b', role: 'admin' } })).toEqual({ kind: 'member', memberId: 'mem_b', role: 'admin' });
    expect(minterFor({})).toBeNull();
  });

  it('lets a member mint only execute and artifacts:read, naming what is refused and what is allowed', () => {
    expect(mintRefusal('member', ['execute', 'artifacts:read'], false)).toBeNull();
    expect(mintRefusal('member', ['execute', 'admin', 'agent'], false)).toBe(
      'the member role cannot mint scope "admin", "agent"; it may mint: execute, artifacts:read',
    );
    expect(mintRefusal('admin', ['admin', 'agent'], false)).toBeNull();
    expect(mintRefusal('owner', ['admin', 'agent', 'execute', 'artifacts:read'], false)).toBeNull();
  });

  it('keeps a member-minted token only while the new role covers its scopes and, for admin tokens, its minter role', () => {
    const adminTok = { scopes: ['admin'], minterRole: 'admin' as const };
    const ownerTok = { scopes: ['admin'], minterRole: 'owner' as const };
    const execTok = { scopes: ['execute'], minterRole: 'owner' as const };
    const agentTok = { scopes: ['agent'], minterRole: 'admin' as const };
    expect([roleCovers('owner', ownerTok), roleCovers('admin', ownerTok), roleCovers('admin', adminTok), roleCovers('member', adminTok)]).toEqual([
      true,
      false,
      true,
      false,
    ]);
    expect([roleCovers('member', execTok), roleCovers('member', agentTok), roleCovers('admin', agentTok)]).toEqual([true, false, true]);
    for (const t of [adminTok, ownerTok, execTok, agentTok]) expect(roleCovers(null, t)).toBe(false);
  });
});
