/**
 * What the team's Durable Object reads of D1 once, to answer admission itself from then on
 * (src/dispatch/admission.ts): the team's revoked tokens and the version of its stored policy.
 */
import type { Env } from '../env.ts';

/** Identifies one saved policy document: versions only grow, and `updatedAt` guards a re-created row. */
export interface PolicyStamp {
  /** null: the team has no stored policy (it runs the default). */
  version: number | null;
  updatedAt: number | null;
}

/** The seed: revoked tokens, the policy's version and its document as stored (JSON text; null: the default). */
export async function admissionSeed(
  env: Env,
  team: string,
): Promise<{ revoked: { jti: string; revokedAt: number }[]; policy: PolicyStamp; document: string | null }> {
  const [revoked, policy] = await env.DB.batch([
    env.DB.prepare(
      `SELECT jti, revoked_at AS revokedAt FROM revocations WHERE team = ?1
       UNION SELECT jti, revoked_at AS revokedAt FROM tokens WHERE team = ?1 AND revoked_at IS NOT NULL`,
    ).bind(team),
    env.DB.prepare(`SELECT version, updated_at AS updatedAt, document FROM policies WHERE team = ?`).bind(team),
  ]);
  const p = policy.results[0] as (PolicyStamp & { document: string }) | undefined;
  return {
    revoked: revoked.results as { jti: string; revokedAt: number }[],
    policy: p ? { version: p.version, updatedAt: p.updatedAt } : { version: null, updatedAt: null },
    document: p?.document ?? null,
  };
}
