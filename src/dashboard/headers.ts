/**
 * Security headers for every dashboard response. The page holds an admin token, so: scripts and
 * styles only from this origin (no inline code an injected string could become), no framing
 * (clickjacking), no form posting anywhere (a token typed into a form can never travel in a URL),
 * no referrer, and nothing cached.
 *
 * One exception, the MCP Apps view (APP_FRAME_PATH): the dashboard frames it the way a chat host
 * does, in a sandboxed iframe without allow-same-origin (an opaque origin: it can reach neither
 * the page nor the token), under the CSP its resource declares (appFrameCsp). Only this origin may
 * frame it, and the dashboard may frame nothing else.
 */
import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';

/** The MCP Apps job view, under the dashboard's path. */
export const APP_FRAME_PATH = '/dashboard/app/job-output.html';

/** The invitation page posts its one form to itself (src/dashboard/join.ts). */
const FORM_PATHS = new Set(['/dashboard/join']);

export function dashboardCsp(origin: string, forms = false): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self'",
    `frame-src ${origin}${APP_FRAME_PATH}`,
    "base-uri 'none'",
    forms ? "form-action 'self'" : "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** An MCP Apps resource's `_meta.ui.csp` (SEP-1865): the origins it may reach; absent lists mean none. */
export interface AppResourceCsp {
  connectDomains?: string[];
  resourceDomains?: string[];
  frameDomains?: string[];
  baseUriDomains?: string[];
}

/** A declared origin goes into the header only when it cannot add a directive, a keyword or a second source. */
const origins = (xs: string[] | undefined): string[] => (xs ?? []).filter((d) => typeof d === 'string' && /^[A-Za-z0-9*.:/_-]+$/.test(d));
const list = (xs: string[], none = "'none'"): string => (xs.length ? xs.join(' ') : none);

/**
 * The CSP an MCP Apps host puts on a view: its own inline script and style, data: images and
 * fonts, and only the network origins its resource declares (none: no fetch, no frames, no base).
 */
export function appFrameCsp(csp: AppResourceCsp | undefined, ancestor: string): string {
  const res = origins(csp?.resourceDomains);
  const extra = res.length ? ` ${res.join(' ')}` : '';
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline'${extra}`,
    `style-src 'unsafe-inline'${extra}`,
    `img-src data:${extra}`,
    `font-src data:${extra}`,
    `media-src data:${extra}`,
    `connect-src ${list(origins(csp?.connectDomains))}`,
    `frame-src ${list(origins(csp?.frameDomains))}`,
    `base-uri ${list(origins(csp?.baseUriDomains))}`,
    "object-src 'none'",
    "form-action 'none'",
    `frame-ancestors ${ancestor}`,
  ].join('; ');
}

export function dashboardHeaders(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    const h = c.res.headers;
    const origin = new URL(c.req.url).origin;
    if (c.req.path === APP_FRAME_PATH && c.res.ok) {
      // The route set the view's own CSP; the dashboard (this origin) is its only possible parent.
      h.set('X-Frame-Options', 'SAMEORIGIN');
    } else {
      h.set('Content-Security-Policy', dashboardCsp(origin, FORM_PATHS.has(c.req.path)));
      h.set('X-Frame-Options', 'DENY');
      h.set('Cross-Origin-Opener-Policy', 'same-origin');
    }
    h.set('X-Content-Type-Options', 'nosniff');
    h.set('Referrer-Policy', 'no-referrer');
    h.set('Cross-Origin-Resource-Policy', 'same-origin');
    h.set('Cache-Control', 'no-store');
  };
}
