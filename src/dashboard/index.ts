/**
 * The web dashboard at /dashboard: one HTML document plus same-origin scripts and a stylesheet.
 * It holds no data of its own: the browser calls the admin API with the admin token the user
 * signed in with (kept in sessionStorage), so every answer is scoped to that token's team.
 *
 * ```ts
 * app.route('/dashboard', dashboardRoutes);
 * ```
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { APP_FRAME_PATH, appFrameCsp, dashboardHeaders } from './headers.ts';
import { JOB_VIEWER_CONTENT } from '../mcp/apps/job-viewer.ts';
import { DASHBOARD_HTML } from './page.ts';
import { POLICY_PRESETS } from './presets.ts';
import { CORE_JS } from './client/core.ts';
import { MAIN_JS } from './client/main.ts';
import { AGENTS_JS } from './client/agents.ts';
import { JOBS_JS } from './client/jobs.ts';
import { AUDIT_JS } from './client/audit.ts';
import { POLICY_JS } from './client/policy.ts';
import { TOKENS_JS } from './client/tokens.ts';
import { APPROVALS_JS } from './client/approvals.ts';
import { OVERVIEW_JS } from './client/overview.ts';
import { MEMBERS_JS } from './client/members.ts';
import { ME_JS } from './client/me.ts';
import { APP_HOST_JS } from './client/app-host.ts';
import { STYLE_CSS } from './client/style.ts';
import { FAVICON_SVG } from './client/favicon.ts';
import { joinRoutes } from './join.ts';
import { authRoutes } from './auth.ts';
import { meRoutes } from './me.ts';

const JS = 'text/javascript; charset=utf-8';
const ASSETS: Record<string, { type: string; body: string }> = {
  'main.js': { type: JS, body: MAIN_JS },
  'core.js': { type: JS, body: CORE_JS },
  'agents.js': { type: JS, body: AGENTS_JS },
  'jobs.js': { type: JS, body: JOBS_JS },
  'audit.js': { type: JS, body: AUDIT_JS },
  'policy.js': { type: JS, body: POLICY_JS },
  'tokens.js': { type: JS, body: TOKENS_JS },
  'approvals.js': { type: JS, body: APPROVALS_JS },
  'overview.js': { type: JS, body: OVERVIEW_JS },
  'members.js': { type: JS, body: MEMBERS_JS },
  'me.js': { type: JS, body: ME_JS },
  'app-host.js': { type: JS, body: APP_HOST_JS },
  'style.css': { type: 'text/css; charset=utf-8', body: STYLE_CSS },
  'favicon.svg': { type: 'image/svg+xml', body: FAVICON_SVG },
};
const DASHBOARD_ASSETS: readonly string[] = Object.keys(ASSETS);

export const dashboardRoutes = new Hono<AppEnv>();

dashboardRoutes.use('*', dashboardHeaders());

const page = () => new Response(DASHBOARD_HTML, { headers: { 'Content-Type': 'text/html; charset=utf-8' } });
dashboardRoutes.get('/', page);

dashboardRoutes.get('/assets/:name', (c) => {
  const a = Object.hasOwn(ASSETS, c.req.param('name')) ? ASSETS[c.req.param('name')] : undefined;
  if (!a) return c.text(`no dashboard asset "${c.req.param('name').slice(0, 60)}"; the assets are ${DASHBOARD_ASSETS.join(', ')}`, 404);
  return new Response(a.body, { headers: { 'Content-Type': a.type } });
});

dashboardRoutes.route('/join', joinRoutes);
dashboardRoutes.route('/auth', authRoutes);
dashboardRoutes.route('/me', meRoutes);

dashboardRoutes.get('/presets.json', (c) => c.json({ presets: POLICY_PRESETS }));

// The MCP Apps job view, as `resources/read` serves it, under the CSP its resource declares (headers.ts).
dashboardRoutes.get(
  APP_FRAME_PATH.slice('/dashboard'.length),
  (c) =>
    new Response(JOB_VIEWER_CONTENT.text, {
      headers: {
        'Content-Type': 'text/html; charset=utf-8',
        'Content-Security-Policy': appFrameCsp(JOB_VIEWER_CONTENT._meta.ui.csp, new URL(c.req.url).origin),
      },
    }),
);

dashboardRoutes.all('*', (c) =>
  c.text(
    `no dashboard page ${c.req.method} ${new URL(c.req.url).pathname}; open /dashboard (pages are #/overview, #/agents, #/jobs, #/approvals, #/audit, #/policy, #/tokens, #/members, #/me)`,
    404,
  ),
);
