/**
 * The team policy without a D1 read on the hot path. Authentication already learns the current
 * policy version of the caller's team (same query as the revocation check) and notes it on the
 * request's principal; a tool then takes the parsed document from this isolate's cache when the
 * versions match, and reads D1 only when the policy changed (or this isolate never saw it).
 * A stale document is never used: a policy write bumps the version, so the next request misses.
 *
 * ```ts
 * notePolicyStamp(principal, admission.policy);      // in auth
 * const { policy } = await teamPolicyOf(env, principal); // in a tool
 * ```
 */
import type { Env } from '../env.ts';
import type { Principal } from '../auth/principal.ts';
import type { PolicyStamp } from './admission.ts';
import { DEFAULT_POLICY } from '../policy/default-policy.ts';
import { getTeamPolicy, type TeamPolicy } from './policies.ts';

/** Teams whose parsed policy one isolate keeps (least recently used dropped first). */
const POLICY_CACHE_TEAMS = 512;

const stamps = new WeakMap<Principal, PolicyStamp>();
const cache = new Map<string, TeamPolicy>();

/** Records the policy version current when this principal's request was authenticated. */
export function notePolicyStamp(p: Principal, stamp: PolicyStamp): void {
  stamps.set(p, stamp);
}

/** The team's current policy: from the cache when the request's stamp matches, else from D1. */
export async function teamPolicyOf(env: Env, p: Principal): Promise<TeamPolicy> {
  const stamp = stamps.get(p);
  if (stamp && stamp.version === null) {
    return { policy: DEFAULT_POLICY, version: 0, updatedAt: null, updatedBy: null, isDefault: true };
  }
  const hit = cache.get(p.team);
  if (stamp && hit && hit.version === stamp.version && hit.updatedAt === stamp.updatedAt) {
    cache.delete(p.team);
    cache.set(p.team, hit);
    return hit;
  }
  const fresh = await getTeamPolicy(env, p.team);
  if (!fresh.isDefault) {
    cache.delete(p.team);
    cache.set(p.team, fresh);
    if (cache.size > POLICY_CACHE_TEAMS) cache.delete(cache.keys().next().value!);
  }
  return fresh;
}
