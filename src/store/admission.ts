/**
 * What every authenticated request needs from storage, in one D1 query: whether its token is
 * revoked, and which version of the team's policy is current (the policy cache keys on it).
 * Revocation is read from D1 on every request, never cached, so a revoked token is refused on
 * its very next request from any isolate.
 */
import type { Env } from '../env.ts';

/** Identifies one saved policy document: versions only grow, and `updatedAt` guards a re-created row. */
export interface PolicyStamp {
  /** null: the team has no stored policy (it runs the default). */
  version: number | null;
  updatedAt: number | null;
}

export interface Admission {
  revoked: boolean;
  policy: PolicyStamp;
}

export async function admissionOf(env: Env, team: string, jti: string): Promise<Admission> {
  const row = await env.DB.prepare(
    `SELECT
       (EXISTS (SELECT 1 FROM revocations WHERE jti = ?1 AND team = ?2)
        OR EXISTS (SELECT 1 FROM tokens WHERE jti = ?1 AND team = ?2 AND revoked_at IS NOT NULL)) AS revoked,
       p.version AS version, p.updated_at AS updated_at
     FROM (SELECT 1) LEFT JOIN policies p ON p.team = ?2`,
  )
    .bind(jti, team)
    .first<{ revoked: number; version: number | null; updated_at: number | null }>();
  if (!row) throw new Error('the admission query returned no row');
  return { revoked: row.revoked !== 0, policy: { version: row.version, updatedAt: row.updated_at } };
}
