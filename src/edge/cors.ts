/**
 * CORS for browser-based MCP clients, on Hono's own `cors` middleware.
 *
 * ```ts
 * mcpRoutes.use('*', mcpCors());                 // before auth: a preflight carries no token
 * app.use('/.well-known/*', publicCors());       // metadata documents are public
 * ```
 * A request from an origin the rules refuse (src/edge/origins.ts) gets 403 with the reason and no CORS
 * grant — a preflight too, so the browser never sends the real request. Requests without `Origin`
 * (CLIs, SDKs outside a browser) are not affected.
 */
import type { MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import type { AppEnv } from '../env.ts';
import { originRules, originVerdict } from './origins.ts';

/** What MCP Streamable HTTP requests carry (both protocol eras) besides CORS-safelisted headers. */
const MCP_REQUEST_HEADERS = ['Authorization', 'Content-Type', 'Accept', 'Mcp-Protocol-Version', 'Mcp-Session-Id', 'Mcp-Method', 'Mcp-Name', 'Last-Event-ID'];
/** What a browser client must be able to read: the auth challenge (discovery), the negotiated version, backoff. */
const MCP_EXPOSED_HEADERS = ['WWW-Authenticate', 'Mcp-Protocol-Version', 'Mcp-Session-Id', 'Retry-After'];
/** Browsers cache a preflight at most this long (Chromium caps Access-Control-Max-Age at 7200 s). */
const PREFLIGHT_MAX_AGE_S = 7200;

export function mcpCors(): MiddlewareHandler<AppEnv> {
  const grant = cors({
    // Reached only for origins the check below allowed.
    origin: (origin) => origin || null,
    allowMethods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
    allowHeaders: MCP_REQUEST_HEADERS,
    exposeHeaders: MCP_EXPOSED_HEADERS,
    maxAge: PREFLIGHT_MAX_AGE_S,
  });
  return async (c, next) => {
    const origin = c.req.header('Origin');
    if (origin === undefined) return next();
    const v = originVerdict(origin, originRules(c.req.raw, c.env));
    if (!v.ok) {
      return c.json({ jsonrpc: '2.0', error: { code: -32000, message: `Forbidden: ${v.message}` }, id: null }, 403);
    }
    return grant(c, next);
  };
}

/** Public documents (RFC 9728 metadata, JWKS): readable from any origin, no credentials. */
export function publicCors(): MiddlewareHandler<AppEnv> {
  return cors({ origin: '*', allowMethods: ['GET', 'HEAD', 'OPTIONS'], maxAge: PREFLIGHT_MAX_AGE_S });
}
