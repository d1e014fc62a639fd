/**
 * A member's tokens follow the member: when their role is lowered or they leave the team, every live
 * token they minted (through the dashboard, or with a token they minted) that their new role no longer
 * covers is revoked at that moment — with the OAuth grants those tokens consented to and the agents
 * connected with them (src/admin/token-revocation.ts). What "covers" means is src/auth/minter.ts.
 */
import type { Env } from '../env.ts';
import type { Role } from '../members/roles.ts';
import { roleCovers } from '../auth/minter.ts';
import { liveTokensMintedBy } from '../store/tokens.ts';
import { endToken, type EndedToken } from './token-revocation.ts';

/** Ends the tokens member `memberId` minted that `newRole` (null: no membership) does not cover; returns what ended. */
export async function endTokensBeyond(req: Request, env: Env, team: string, memberId: string, newRole: Role | null): Promise<EndedToken[]> {
  const minted = await liveTokensMintedBy(env, team, memberId);
  const ended: EndedToken[] = [];
  for (const t of minted) {
    const minterRole = t.mintedBy?.kind === 'member' ? t.mintedBy.role : 'owner';
    if (roleCovers(newRole, { scopes: t.scopes, minterRole })) continue;
    const r = await endToken(req, env, team, t.jti);
    if (r.ok) ended.push(r.value);
  }
  return ended;
}
