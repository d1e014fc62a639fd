/**
 * Ending an API token and what came from it: the revocation (written first to the team's Durable
 * Object, which admits every request of the team, then to the directory in D1), the OAuth grants it
 * consented to (and their tokens in the authorization server's store), and any agent connected with
 * it (disconnected by the same DO call). The admin API's revoke and a member's demotion or removal
 * end tokens the same way. A revoke the team's DO did not take is an error, never a success: the
 * token would still work.
 */
import type { Env } from '../env.ts';
import { recordRevocation, revocationTarget } from '../store/tokens.ts';
import { revokeGrantsOfToken } from '../store/oauth-grants.ts';
import { forgetGrants } from '../oauth/grants.ts';
import { revokeInTeam } from '../dispatch/admission-client.ts';
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
  const r = await revocationTarget(env, team, jti, o);
  if (!r.ok) return r;
  let taken: { revokedAt: number; agentsDisconnected: number };
  try {
    taken = await revokeInTeam(env, team, jti, r.value.revokedAt);
  } catch (e) {
    return {
      ok: false,
      error: {
        code: 'upstream_error',
        message: `token "${jti}" is NOT revoked: the team's dispatcher did not take the revocation (${(e as Error).message}); try again`,
      },
    };
  }
  await recordRevocation(env, team, jti, taken.revokedAt);
  const ended = await revokeGrantsOfToken(env, team, jti);
  await forgetGrants(req, env, ended);
  return { ok: true, value: { jti, revokedAt: taken.revokedAt, oauthGrantsEnded: ended.map((g) => g.grantId), agentsDisconnected: taken.agentsDisconnected } };
}
