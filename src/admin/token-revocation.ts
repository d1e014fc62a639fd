/**
 * Ending an API token and what came from it: the revocation row (every request checks it), the OAuth
 * grants it consented to (and their tokens in the authorization server's store), and any agent connected
 * with it (disconnected now, not at its next reconnect). The admin API's revoke and a member's demotion
 * or removal end tokens the same way.
 */
import type { Env } from '../env.ts';
import { revokeToken } from '../store/tokens.ts';
import { revokeGrantsOfToken } from '../store/oauth-grants.ts';
import { forgetGrants } from '../oauth/grants.ts';
import { revokeAgentToken } from '../dispatch/client.ts';
import type { GatehouseErrorShape, Result } from '../contracts/errors.ts';

export interface EndedToken {
  jti: string;
  revokedAt: number;
  oauthGrantsEnded: string[];
  agentsDisconnected: number;
}

/** Revokes `jti` of `team` and ends what it consented to; not found when the team has no such token (see `revokeToken`). */
export async function endToken(
  req: Request,
  env: Env,
  team: string,
  jti: string,
  o: { unrecorded?: boolean } = {},
): Promise<Result<EndedToken, GatehouseErrorShape>> {
  const r = await revokeToken(env, team, jti, o);
  if (!r.ok) return r;
  const ended = await revokeGrantsOfToken(env, team, jti);
  await forgetGrants(req, env, ended);
  const agentsDisconnected = await revokeAgentToken(env, team, jti).catch((e: Error) => {
    console.error(`revoke: could not reach the team dispatcher: ${e.message}; its next liveness check disconnects the agent`);
    return 0;
  });
  return { ok: true, value: { ...r.value, oauthGrantsEnded: ended.map((g) => g.grantId), agentsDisconnected } };
}
