/**
 * The operators' API (mounted at /operator/v1): the teams of the deployment and their life cycle
 * (teams.ts). Every route needs an operator token (auth.ts); a team's own tokens, admins' included,
 * get 403 here. docs/teams.md describes it.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { toErrorShape } from '../contracts/errors.ts';
import { apiError } from '../admin/http.ts';
import { requireOperator } from './auth.ts';
import { createTeamRoute, deleteTeamRoute, listTeamsRoute, resumeTeamRoute, setQuotasRoute, showTeamRoute, suspendTeamRoute, teamUsageRoute } from './teams.ts';

export const operatorRoutes = new Hono<AppEnv>();

operatorRoutes.onError((e, c) => {
  const shape = toErrorShape(e);
  console.error('operator API error', shape.message);
  return apiError(c, shape.code, shape.message);
});

operatorRoutes.use('*', requireOperator());
operatorRoutes.post('/teams', createTeamRoute);
operatorRoutes.get('/teams', listTeamsRoute);
operatorRoutes.get('/teams/:id', showTeamRoute);
operatorRoutes.get('/teams/:id/usage', teamUsageRoute);
operatorRoutes.post('/teams/:id/suspend', suspendTeamRoute);
operatorRoutes.post('/teams/:id/resume', resumeTeamRoute);
operatorRoutes.put('/teams/:id/quotas', setQuotasRoute);
operatorRoutes.delete('/teams/:id', deleteTeamRoute);
operatorRoutes.all('*', (c) =>
  apiError(
    c,
    'not_found',
    `no operator route ${c.req.method} ${new URL(c.req.url).pathname}; see /operator/v1/teams, /teams/:id, /teams/:id/{usage,suspend,resume,quotas}`,
  ),
);
