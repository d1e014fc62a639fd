/**
 * Who may change whom in a team: pure decisions over roles, so the admin API, the dashboard and the
 * CLI refuse the same things with the same words.
 *
 * - only an owner or an admin manages members;
 * - only an owner makes someone an owner, or changes or removes an owner;
 * - the team's last owner can be neither removed nor demoted.
 *
 * An admin API token (scope `admin`) is the team's automation and break-glass key: it acts with an
 * owner's authority, so a team whose owners all left can still be repaired.
 */
import { z } from 'zod';
import type { GatehouseErrorShape } from '../contracts/errors.ts';

export const ROLES = ['owner', 'admin', 'member'] as const;
export const Role = z.enum(ROLES);
export type Role = z.infer<typeof Role>;

/** Who is asking: a signed-in member with their role in the team, or an admin API token. */
export type Actor = { kind: 'member'; role: Role } | { kind: 'token' };

/** The role an actor acts with (an admin token: owner). */
const authorityOf = (a: Actor): Role => (a.kind === 'token' ? 'owner' : a.role);

export type MemberChange = { op: 'invite'; role: Role } | { op: 'role'; from: Role; to: Role; owners: number } | { op: 'remove'; role: Role; owners: number };

const refuse = (message: string): GatehouseErrorShape => ({ code: 'forbidden', message });

/** null when `actor` may make `change` in `team`; otherwise the refusal, naming what is allowed. */
export function checkMemberChange(actor: Actor, team: string, change: MemberChange): GatehouseErrorShape | null {
  const by = authorityOf(actor);
  if (by === 'member') {
    return refuse(`managing the members of team "${team}" needs the owner or admin role; your role is member (ask an owner or admin)`);
  }
  const ownerOnly = (what: string) => (by === 'owner' ? null : refuse(`only an owner may ${what}; an admin may invite, change and remove admins and members`));
  switch (change.op) {
    case 'invite':
      return change.role === 'owner' ? ownerOnly('invite an owner') : null;
    case 'role': {
      if (change.to === 'owner' && change.from !== 'owner') return ownerOnly('make a member an owner');
      if (change.from === 'owner' && change.to !== 'owner') {
        return (
          ownerOnly('demote an owner') ??
          (change.owners <= 1 ? refuse(`this is the last owner of team "${team}": make another member owner first, then change this role`) : null)
        );
      }
      return null;
    }
    case 'remove':
      if (change.role !== 'owner') return null;
      return (
        ownerOnly('remove an owner') ??
        (change.owners <= 1 ? refuse(`this is the last owner of team "${team}" and cannot be removed: make another member owner first`) : null)
      );
  }
}
