/** Admin: the saved versions of the team's policy, newest first (`?limit=&before=<version>` to page). */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { listPolicyVersions, POLICY_HISTORY_MAX_LIMIT } from '../store/policies.ts';
import { apiError } from './http.ts';

export const policyHistoryRoutes = new Hono<AppEnv>();

const PARAMS = ['limit', 'before'];

policyHistoryRoutes.get('/', async (c) => {
  const q = new URL(c.req.url).searchParams;
  for (const k of q.keys())
    if (!PARAMS.includes(k)) return apiError(c, 'invalid_argument', `unknown query parameter "${k.slice(0, 40)}"; allowed: ${PARAMS.join(', ')}`);
  const limit = q.get('limit') ?? '20';
  if (!/^\d{1,3}$/.test(limit) || Number(limit) < 1 || Number(limit) > POLICY_HISTORY_MAX_LIMIT) {
    return apiError(c, 'invalid_argument', `limit must be an integer from 1 to ${POLICY_HISTORY_MAX_LIMIT}, got "${limit.slice(0, 20)}"`);
  }
  const before = q.get('before');
  if (before !== null && !/^\d{1,15}$/.test(before))
    return apiError(c, 'invalid_argument', `before must be a policy version number, got "${before.slice(0, 20)}"`);
  const versions = await listPolicyVersions(c.env, c.get('principal').team, Number(limit), before === null ? undefined : Number(before));
  const last = versions[versions.length - 1];
  return c.json({ versions, nextBefore: versions.length === Number(limit) && last ? last.version : null });
});
