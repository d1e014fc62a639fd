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
  const stub = teamStub(c.env, team);
  // `object`: what the team's object itself has cost since it last started (wake-ups, SQL rows; src/dispatch/usage.ts).
  const [usage, object] = await Promise.all([stub.teamUsage(), stub.usage()]);
  return c.json({ team, usage, object });
});
