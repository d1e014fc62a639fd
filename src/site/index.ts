/**
 * First contact: what someone sees who opens the gateway's URL in a browser or points a client
 * at a slightly wrong path. `GET /` is a short page (what this is, where /mcp and /dashboard are);
 * a wrong path under /mcp (a trailing slash, the old `/sse` transport, `/mcp/messages`) answers
 * with the endpoint to use; any other unknown path lists what exists.
 */
import { Hono, type Context, type Handler } from 'hono';
import type { AppEnv } from '../env.ts';
import { canonicalMcpUrl } from '../auth/config.ts';
import { landingPage } from './landing.ts';
import { dashboardAsset } from '../dashboard/assets.ts';

/** A static page with no scripts: nothing may load, nothing may frame it. */
const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export const siteRoutes = new Hono<AppEnv>();

siteRoutes.get('/', (c) => {
  const origin = new URL(c.req.url).origin;
  const mcpUrl = canonicalMcpUrl(c.req.raw, c.env);
  // Scripts and monitors ask for JSON: give them the same facts.
  const accept = c.req.header('Accept') ?? '';
  if (accept.includes('application/json') && !accept.includes('text/html')) {
    return c.json({
      name: 'Gatehouse',
      mcp: mcpUrl,
      dashboard: `${origin}/dashboard`,
      protectedResourceMetadata: `${origin}/.well-known/oauth-protected-resource`,
    });
  }
  c.header('Content-Security-Policy', PAGE_CSP);
  c.header('X-Content-Type-Options', 'nosniff');
  c.header('Referrer-Policy', 'no-referrer');
  return c.html(landingPage({ origin, mcpUrl }));
});

/** Browsers ask every site for /favicon.ico: the dashboard's icon (SVG; browsers go by the type, not the name). */
for (const path of ['/favicon.ico', '/favicon.svg']) {
  siteRoutes.get(path, async (c) => {
    const icon = await dashboardAsset(c.env, c.req.url, 'favicon.svg');
    if (icon.ok) icon.headers.set('Cache-Control', 'public, max-age=86400');
    icon.headers.set('X-Content-Type-Options', 'nosniff');
    return icon;
  });
}

/** What a client that used a near-miss path should use instead (JSON-RPC shape: MCP clients show `message`). */
export const mcpPathHint: Handler<AppEnv> = (c) => {
  const mcpUrl = canonicalMcpUrl(c.req.raw, c.env);
  const path = new URL(c.req.url).pathname;
  const why =
    path === '/sse' || path.endsWith('/sse') ? 'Gatehouse speaks MCP Streamable HTTP only (no legacy SSE transport)' : `there is no MCP endpoint at ${path}`;
  return c.json(
    {
      jsonrpc: '2.0',
      error: { code: -32601, message: `Not Found: ${why}. Use the MCP endpoint ${mcpUrl} (POST, with Authorization: Bearer <token>).` },
      id: null,
    },
    404,
  );
};

/** Unknown paths: say what exists instead of a bare 404. */
export function notFound(c: Context<AppEnv>): Response {
  const origin = new URL(c.req.url).origin;
  const path = new URL(c.req.url).pathname;
  return c.json(
    {
      error: {
        code: 'not_found',
        message: `no route ${c.req.method} ${path}. This is a Gatehouse gateway: MCP endpoint ${canonicalMcpUrl(c.req.raw, c.env)}, dashboard ${origin}/dashboard, admin API ${origin}/admin/v1/…, about ${origin}/`,
      },
    },
    404,
  );
}
