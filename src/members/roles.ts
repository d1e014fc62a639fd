/**
 * Who may change whom in a team: pure decisions over roles, so the admin API, the dashboard and the
 * CLI refuse the same things with the same words.
 *
 * - only an owner or an admin manages members;
 * - only an owner makes someone an owner, or changes or removes an owner;
 * - the team's last owner can be neither removed nor demoted.
 *
 * An admin API token (scope `admin`) acts with its minter's role (src/auth/minter.ts): a token an
 * admin minted acts as an admin, one minted offline with the signing key (bootstrap) as an owner — the
 * break-glass key that repairs a team whose owners all left — and one without a recorded minter as an
 * admin, never an owner.
 */
import { z } from 'zod';
import type { GatehouseErrorShape } from '../contracts/errors.ts';

export const ROLES = ['owner', 'admin', 'member'] as const;
export const Role = z.enum(ROLES);
export type Role = z.infer<typeof Role>;

/** Roles in order of authority: a higher rank covers everything a lower one may do. */
export const ROLE_RANK: Record<Role, number> = { member: 0, admin: 1, owner: 2 };

/** Who is asking: the role they act with (a signed-in member's own, or an API token's minter's) and how they came. */
export interface Actor {
  role: Role;
  via: 'session' | 'token';
}

export type MemberChange = { op: 'invite'; role: Role } | { op: 'role'; from: Role; to: Role; owners: number } | { op: 'remove'; role: Role; owners: number };

const refuse = (message: string): GatehouseErrorShape => ({ code: 'forbidden', message });

/** null when `actor` may make `change` in `team`; otherwise the refusal, naming what is allowed. */
export function checkMemberChange(actor: Actor, team: string, change: MemberChange): GatehouseErrorShape | null {
  const by = actor.role;
  if (by === 'member') {
    return refuse(`managing the members of team "${team}" needs the owner or admin role; your role is member (ask an owner or admin)`);
  }
  const asAdmin = actor.via === 'token' ? ' (this token acts as an admin: it was minted by an admin, or before minters were recorded)' : '';
  const ownerOnly = (what: string) =>
    by === 'owner' ? null : refuse(`only an owner may ${what}; an admin may invite, change and remove admins and members${asAdmin}`);
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
