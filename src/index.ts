/**
 * Gatehouse edge Worker: routes only. Each concern lives in its own folder.
 */
import { Hono } from 'hono';
import type { AppEnv, Env } from './env.ts';
import { configGuard, hostCheck, wellKnownRoutes } from './auth/index.ts';
import { rateLimit } from './edge/rate-limit.ts';
import { publicCors } from './edge/cors.ts';
import { adminRoutes } from './admin/index.ts';
import { mcpRoutes } from './mcp/index.ts';
import { agentRoutes } from './dispatch/routes.ts';
import { dashboardRoutes } from './dashboard/index.ts';
import { cleanupLegacyArtifacts } from './store/artifacts.ts';
import { siteRoutes, mcpPathHint, notFound } from './site/index.ts';
import { oauthRoutes } from './oauth/routes.ts';
import { serverCallbackRoutes } from './oauth/server-callback.ts';
import { memberOrToken } from './members/auth.ts';
import { readiness } from './edge/readiness.ts';
import { agentStorageLog, meterStorage } from './edge/call-log.ts';
import { operatorRoutes } from './operator/index.ts';
export { TeamDispatcher } from './dispatch/team-dispatcher.ts';

const app = new Hono<AppEnv>();

// `time` lets `gatehouse agent doctor` measure clock skew (local workerd sends no Date header).
app.get('/healthz', (c) => c.json({ ok: true, time: Date.now() }));
// Each request's D1 and R2 operations are counted; the call lines (src/edge/call-log.ts) carry them.
app.use('*', meterStorage());
// Only configured hosts are served (DNS rebinding: always a 4xx); then misconfiguration (short
// HS secret, bad signing key, no issuer/audience on a public host) refuses every request but /healthz.
app.use('*', hostCheck());
// Readiness: D1, R2 and a Durable Object, unauthenticated and cached briefly; a broken config is its own answer (503).
app.get('/readyz', readiness());
app.use('*', configGuard());
app.use('/.well-known/oauth-protected-resource', publicCors());
app.use('/.well-known/oauth-protected-resource/*', publicCors());
app.use('/.well-known/jwks.json', publicCors());
app.route('/', wellKnownRoutes);
app.route('/', siteRoutes);
// Before oauthRoutes, whose /oauth/* belongs to the gateway's own authorization server.
app.route('/', serverCallbackRoutes);
app.route('/', oauthRoutes);
// Near-miss MCP paths get the right URL (before /mcp's auth, which would only say 401).
app.all('/mcp/', mcpPathHint);
app.all('/mcp/:rest{.+}', mcpPathHint);
app.all('/sse', mcpPathHint);
app.route('/mcp', mcpRoutes);
app.use('/agent/v1/*', agentStorageLog());
app.route('/agent/v1', agentRoutes);
// An API token, or a signed-in member with the role that carries the admin scope (src/members/).
app.use('/admin/v1/*', memberOrToken({ scopes: ['admin'] }), rateLimit('admin'));
app.route('/admin/v1', adminRoutes);
// The same API for the dashboard's signed-in people: their session cookie is scoped to /dashboard.
app.use('/dashboard/api/v1/*', memberOrToken({ scopes: ['admin'] }), rateLimit('admin'));
app.route('/dashboard/api/v1', adminRoutes);
app.route('/dashboard', dashboardRoutes);
// The deployment's operators: teams' life cycle (src/operator/, docs/teams.md); an operator token, never a team's.
app.route('/operator/v1', operatorRoutes);
app.notFound(notFound);

export default {
  fetch: app.fetch,
  // Each team's object expires its own artifacts (src/dispatch/artifact-index.ts); the cron only sweeps
  // what D1 still indexes from before that (one query a run once nothing is left).
  async scheduled(_controller: ScheduledController, env: Env, ctx: ExecutionContext) {
    ctx.waitUntil(cleanupLegacyArtifacts(env, Date.now()));
  },
} satisfies ExportedHandler<Env>;
