/**
 * The edge's side of admission (answered by the team's Durable Object: admission.ts): every
 * authenticated request asks it, a revocation is written to it before it is acknowledged, and a
 * saved policy tells it its new version.
 */
import type { Env } from '../env.ts';
import type { PolicyStamp } from '../store/admission.ts';
import type { RetentionPolicy } from '../contracts/policy.ts';
import type { Admission, Suspension } from './admission.ts';
import { teamStub } from './client.ts';

export async function admitToken(env: Env, team: string, jti: string): Promise<Admission> {
  return await teamStub(env, team).admit(jti);
}

/** Revokes `jti` in the team's object (effective for the team's next request) and disconnects its agents. */
export async function revokeInTeam(env: Env, team: string, jti: string, revokedAt: number): Promise<{ revokedAt: number; agentsDisconnected: number }> {
  return await teamStub(env, team).revokeToken(jti, revokedAt);
}

export async function policyChanged(env: Env, team: string, stamp: PolicyStamp, retention: RetentionPolicy): Promise<void> {
  await teamStub(env, team).policyChanged(stamp, retention);
}

export async function suspendTeam(env: Env, team: string, s: Suspension | null): Promise<void> {
  await teamStub(env, team).suspend(s);
}
