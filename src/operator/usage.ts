/**
 * `GET /admin/v1/usage`: the team's own usage for its admins — the figures an operator sees
 * (calls and jobs today and this month, job-seconds, egress bytes, storage) and the quotas set on it.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { teamStub } from '../dispatch/client.ts';

export const teamUsageRoutes = new Hono<AppEnv>();

teamUsageRoutes.get('/', async (c) => {
  const team = c.get('principal').team;
  return c.json({ team, usage: await teamStub(c.env, team).teamUsage() });
});
