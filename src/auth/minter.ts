/**
 * Who minted an API token, and what authority that gives it. Every token this gateway mints carries
 * its minter as a signed claim: the member whose session or token minted it (with that member's role
 * at the time), or `bootstrap` for tokens minted offline with the signing key (`gatehouse token
 * bootstrap`, `npm start`). A token is never stronger than its minter:
 *
 * - it acts in member management with its minter's role (a bootstrap token: owner);
 * - it may mint only the scopes its minter's role may mint, and passes its minter on;
 * - a token without the claim (minted before minters were recorded, or by another issuer) is capped
 *   at admin: it never acts as an owner.
 *
 * The role travels in the token, so no request joins the members table: when a member is demoted or
 * removed, the tokens their new role no longer covers are revoked at that moment (src/admin/member-tokens.ts).
 */
import { z } from 'zod';
import { ROLE_RANK, Role } from '../members/roles.ts';

/** The token claim that carries the minter. */
export const MINTER_CLAIM = 'minted_by';

const MEMBER_ID_RE = /^[A-Za-z0-9_-]{1,100}$/;

export const Minter = z.union([
  z.object({ kind: z.literal('bootstrap') }).strict(),
  z.object({ kind: z.literal('member'), memberId: z.string().regex(MEMBER_ID_RE, 'memberId must be a member id'), role: Role }).strict(),
]);
export type Minter = z.infer<typeof Minter>;

export const BOOTSTRAP_MINTER: Minter = { kind: 'bootstrap' };

/** The role an unattributed token (no minter claim) acts with: never owner. */
const UNATTRIBUTED_AUTHORITY: Role = 'admin';

/** The scopes each role may put into a token it mints (agent tokens receive the team's jobs: admins and owners only). */
const MINTABLE: Record<Role, readonly string[]> = {
  owner: ['execute', 'artifacts:read', 'admin', 'agent'],
  admin: ['execute', 'artifacts:read', 'admin', 'agent'],
  member: ['execute', 'artifacts:read'],
};

/** What of a principal (src/env.ts) says who stands behind it. */
interface Backed {
  member?: { memberId: string; role: Role };
  minter?: Minter;
}

/** The role a principal acts with in its team: a signed-in member's role, else its token's minter's. */
export function authorityOf(p: Backed): Role {
  if (p.member) return p.member.role;
  if (!p.minter) return UNATTRIBUTED_AUTHORITY;
  return p.minter.kind === 'bootstrap' ? 'owner' : p.minter.role;
}

/** The minter a token minted by `p` carries: the person behind it, never someone stronger. */
export function minterFor(p: Backed): Minter | null {
  if (p.member) return { kind: 'member', memberId: p.member.memberId, role: p.member.role };
  return p.minter ?? null;
}

/**
 * The operators' scope (src/operator/): above every team role, so no role mints it — only the holder of the
 * signing key, offline — and a request is served as an operator only with a bootstrap minter (`isOperator`).
 */
export const OPERATOR_SCOPE = 'operator';

/** null when `role` may mint `scopes`; otherwise what is refused and what is allowed. */
export function mintRefusal(role: Role, scopes: readonly string[], unattributed: boolean): string | null {
  const allowed = MINTABLE[role];
  const beyond = scopes.filter((s) => !allowed.includes(s));
  if (!beyond.length) return null;
  if (beyond.includes(OPERATOR_SCOPE)) {
    return `no team token mints scope "${OPERATOR_SCOPE}" (it is above every team role): an operator token is minted offline with the signing key (gatehouse token bootstrap --scope ${OPERATOR_SCOPE}); ${role}s may mint: ${allowed.join(', ')}`;
  }
  const who = unattributed ? `a token without a recorded minter (capped at ${role})` : `the ${role} role`;
  return `${who} cannot mint scope ${beyond.map((s) => `"${s}"`).join(', ')}; it may mint: ${allowed.join(', ')}`;
}

/**
 * Whether `p` acts as an operator: the scope, on a token the gateway's own key minted offline. Another
 * issuer's token (HS256 secret, external issuer) never carries a minter, so its `operator` scope counts for nothing.
 */
export function isOperator(p: Backed & { scopes: readonly string[] }): boolean {
  return p.scopes.includes(OPERATOR_SCOPE) && !p.member && p.minter?.kind === 'bootstrap';
}

/**
 * Whether a token minted by a member (with `minterRole` then) stays within what the member's new role
 * covers; `newRole` null: the member left the team, and nothing they minted stays.
 */
export function roleCovers(newRole: Role | null, token: { scopes: readonly string[]; minterRole: Role }): boolean {
  if (newRole === null) return false;
  if (token.scopes.some((s) => !MINTABLE[newRole].includes(s))) return false;
  // An admin token acts with its minter's role: it must not act above the role the member now has.
  return !token.scopes.includes('admin') || ROLE_RANK[token.minterRole] <= ROLE_RANK[newRole];
}
