/** Who may change whom in a team (src/members/roles.ts): the decisions the admin API and dashboard share. */
import { describe, expect, it } from 'vitest';
import { checkMemberChange, type Actor } from '../../src/members/roles.ts';
import { isDemotion } from '../../src/store/members.ts';

const owner: Actor = { role: 'owner', via: 'session' };
const admin: Actor = { role: 'admin', via: 'session' };
const member: Actor = { role: 'member', via: 'session' };
/** A bootstrap token (minted offline with the signing key) acts as an owner. */
const token: Actor = { role: 'owner', via: 'token' };

describe('member management rules', () => {
  it('lets only owners and admins manage members, and says which roles may', () => {
    expect(checkMemberChange(member, 'acme', { op: 'invite', role: 'member' })).toEqual({
      code: 'forbidden',
      message: 'managing the members of team "acme" needs the owner or admin role; your role is member (ask an owner or admin)',
    });
    expect(checkMemberChange(member, 'acme', { op: 'remove', role: 'member', owners: 2 })?.code).toBe('forbidden');
    expect(checkMemberChange(admin, 'acme', { op: 'invite', role: 'admin' })).toBeNull();
    expect(checkMemberChange(admin, 'acme', { op: 'role', from: 'member', to: 'admin', owners: 1 })).toBeNull();
    expect(checkMemberChange(admin, 'acme', { op: 'remove', role: 'admin', owners: 1 })).toBeNull();
  });

  it('lets only an owner make, demote or remove an owner', () => {
    for (const change of [
      { op: 'invite', role: 'owner' },
      { op: 'role', from: 'admin', to: 'owner', owners: 1 },
      { op: 'role', from: 'owner', to: 'admin', owners: 2 },
      { op: 'remove', role: 'owner', owners: 2 },
    ] as const) {
      const r = checkMemberChange(admin, 'acme', change);
      expect(r?.code, JSON.stringify(change)).toBe('forbidden');
      expect(r?.message).toMatch(/^only an owner may .+; an admin may invite, change and remove admins and members$/);
      expect(checkMemberChange(owner, 'acme', change), JSON.stringify(change)).toBeNull();
    }
  });

  it('never removes or demotes the last owner, even for an owner or an admin token', () => {
    for (const actor of [owner, token]) {
      expect(checkMemberChange(actor, 'acme', { op: 'remove', role: 'owner', owners: 1 })).toEqual({
        code: 'forbidden',
        message: 'this is the last owner of team "acme" and cannot be removed: make another member owner first',
      });
      expect(checkMemberChange(actor, 'acme', { op: 'role', from: 'owner', to: 'member', owners: 1 })?.message).toBe(
        'this is the last owner of team "acme": make another member owner first, then change this role',
      );
      expect(checkMemberChange(actor, 'acme', { op: 'role', from: 'owner', to: 'owner', owners: 1 })).toBeNull();
    }
  });

  it("gives a bootstrap token an owner's authority (break-glass); an admin's token acts as an admin and says why", () => {
    expect(checkMemberChange(token, 'acme', { op: 'invite', role: 'owner' })).toBeNull();
    expect(checkMemberChange(token, 'acme', { op: 'remove', role: 'owner', owners: 2 })).toBeNull();
    const adminToken: Actor = { role: 'admin', via: 'token' };
    expect(checkMemberChange(adminToken, 'acme', { op: 'role', from: 'admin', to: 'owner', owners: 1 })?.message).toBe(
      'only an owner may make a member an owner; an admin may invite, change and remove admins and members (this token acts as an admin: it was minted by an admin, or before minters were recorded)',
    );
  });

  it("calls a change to a lower role a demotion (it ends the member's grants and sessions); the same or a higher role is not", () => {
    expect([isDemotion('owner', 'admin'), isDemotion('owner', 'member'), isDemotion('admin', 'member')]).toEqual([true, true, true]);
    expect([isDemotion('member', 'admin'), isDemotion('admin', 'owner'), isDemotion('admin', 'admin'), isDemotion('member', 'member')]).toEqual([
      false,
      false,
      false,
      false,
    ]);
  });
});
