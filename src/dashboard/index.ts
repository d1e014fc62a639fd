/**
 * The web dashboard at /dashboard: one HTML document plus same-origin assets (assets.ts: the client, a TypeScript
 * program in client/ bundled into main.js at build time, its stylesheet and its icon).
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
import { DASHBOARD_ASSETS, dashboardAsset, isDashboardAsset } from './assets.ts';
import { joinRoutes } from './join.ts';
import { authRoutes } from './auth.ts';
import { meRoutes } from './me.ts';

export const dashboardRoutes = new Hono<AppEnv>();

dashboardRoutes.use('*', dashboardHeaders());

const page = () => new Response(DASHBOARD_HTML, { headers: { 'Content-Type': 'text/html; charset=utf-8' } });
dashboardRoutes.get('/', page);

dashboardRoutes.get('/assets/:name', async (c) => {
  const name = c.req.param('name');
  if (!isDashboardAsset(name)) return c.text(`no dashboard asset "${name.slice(0, 60)}"; the assets are ${DASHBOARD_ASSETS.join(', ')}`, 404);
  return dashboardAsset(c.env, c.req.url, name);
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
