/**
 * The admin HTTP API (mounted at /admin/v1 behind requireAuth({ scopes: ['admin'] })).
 * Everything acts on the admin token's own team: the plain paths (`/tokens`, `/policy`, `/audit`)
 * and the explicit `/teams/:team/...` form, where any other team is "not found".
 */
import { secretRoutes } from './secrets.ts';
import { Hono, type Handler } from 'hono';
import type { AppEnv } from '../env.ts';
import { toErrorShape } from '../contracts/errors.ts';
import { tokenRoutes } from './tokens.ts';
import { policyRoutes } from './policy.ts';
import { auditRoutes } from './audit.ts';
import { auditExportRoutes } from './audit-export.ts';
import { artifactRoutes, jobOutputRoutes } from './artifacts.ts';
import { policyHistoryRoutes } from './policy-history.ts';
import { ownTeamOnly } from './team.ts';
import { agentAdminRoutes, jobAdminRoutes } from './job-routes.ts';
import { approvalRoutes } from './approvals.ts';
import { oauthAdminRoutes } from './oauth.ts';
import { overviewRoutes } from './overview.ts';
import { memberRoutes } from './members.ts';
import { scriptRoutes } from './scripts.ts';
import { serverRoutes } from './servers.ts';
import { workspaceRoutes } from './workspaces.ts';
import { teamUsageRoutes } from '../operator/usage.ts';
import { apiError } from './http.ts';
import { authorityOf, minterFor } from '../auth/minter.ts';
import { adminCallLog } from '../edge/call-log.ts';

/** Who am I: the admin token's team and subject (the CLI uses it to check `--team`), and the role it acts with. */
const whoami: Handler<AppEnv> = (c) => {
  const p = c.get('principal');
  return c.json({ team: p.team, subject: p.subject, scopes: p.scopes, tokenId: p.tokenId, issuer: p.issuer, actsAs: authorityOf(p), mintedBy: minterFor(p) });
};

const teamApi = new Hono<AppEnv>();
teamApi.get('/', whoami);
teamApi.route('/tokens', tokenRoutes);
teamApi.route('/policy/history', policyHistoryRoutes);
teamApi.route('/policy', policyRoutes);
teamApi.route('/audit', auditExportRoutes);
teamApi.route('/audit', auditRoutes);
teamApi.route('/agents', agentAdminRoutes);
teamApi.route('/jobs', jobOutputRoutes);
teamApi.route('/jobs', jobAdminRoutes);
teamApi.route('/artifacts', artifactRoutes);
teamApi.route('/approvals', approvalRoutes);
teamApi.route('/oauth', oauthAdminRoutes);
teamApi.route('/overview', overviewRoutes);
teamApi.route('/members', memberRoutes);
teamApi.route('/scripts', scriptRoutes);
teamApi.route('/secrets', secretRoutes);
teamApi.route('/servers', serverRoutes);
teamApi.route('/workspaces', workspaceRoutes);
teamApi.route('/usage', teamUsageRoutes);

export const adminRoutes = new Hono<AppEnv>();

adminRoutes.onError((e, c) => {
  const shape = toErrorShape(e);
  console.error('admin API error', shape.message);
  return apiError(c, shape.code, shape.message);
});

// One log line and data point per call (src/edge/call-log.ts), whatever answers it.
adminRoutes.use('*', adminCallLog());
adminRoutes.get('/whoami', whoami);
adminRoutes.use('/teams/:team', ownTeamOnly());
adminRoutes.use('/teams/:team/*', ownTeamOnly());
adminRoutes.route('/teams/:team', teamApi);
adminRoutes.route('/', teamApi);

adminRoutes.all('*', (c) =>
  apiError(
    c,
    'not_found',
    `no admin route ${c.req.method} ${new URL(c.req.url).pathname}; see /admin/v1/{overview,tokens,policy,policy/check,audit,audit/export,audit/storage,agents,jobs,artifacts/:handle,approvals,oauth/grants,oauth/clients/:id,members,members/invitations,scripts,secrets,servers,workspaces}`,
  ),
);
