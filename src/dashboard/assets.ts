/**
 * The dashboard's browser files. They are built from `src/dashboard/client/` by scripts/build-dashboard.ts (wrangler.toml
 * `[build]`: before every `wrangler dev` and `wrangler deploy`) into the Worker's static assets (`[assets]`, bound as
 * ASSETS), and served at /dashboard/assets/<name> through the Worker, so every answer carries the dashboard's headers.
 *
 * ```ts
 * if (isDashboardAsset(name)) return dashboardAsset(c.env, c.req.url, name);
 * ```
 */
import type { Env } from '../env.ts';

/** Every file the build writes: the bundled client, its stylesheet, its icon. */
export const DASHBOARD_ASSETS = ['main.js', 'style.css', 'favicon.svg'] as const;
export type DashboardAsset = (typeof DASHBOARD_ASSETS)[number];

/** Where the assets are served, and where they sit in the assets directory. */
export const ASSETS_PATH = '/dashboard/assets/';

export const isDashboardAsset = (name: string): name is DashboardAsset => (DASHBOARD_ASSETS as readonly string[]).includes(name);

/**
 * The asset as a fresh response: its body and content type only, the caller sets the headers. A missing ASSETS
 * binding or a file the build did not write is a misconfigured deployment: 500, with what is missing.
 */
export async function dashboardAsset(env: Pick<Env, 'ASSETS'>, requestUrl: string, name: DashboardAsset): Promise<Response> {
  const r = env.ASSETS ? await env.ASSETS.fetch(new URL(ASSETS_PATH + name, requestUrl)) : null;
  if (!r?.ok) {
    const why = r ? `the assets have no ${name} (scripts/build-dashboard.ts writes it)` : 'no ASSETS binding (wrangler.toml [assets])';
    return new Response(`config_error: the dashboard asset ${name} is missing: ${why}`, {
      status: 500,
      headers: { 'Content-Type': 'text/plain; charset=utf-8' },
    });
  }
  return new Response(r.body, { headers: { 'Content-Type': r.headers.get('Content-Type') ?? 'application/octet-stream' } });
}
