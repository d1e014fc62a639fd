/**
 * Security headers for every dashboard response. The page holds an admin token, so: scripts and
 * styles only from this origin (no inline code an injected string could become), no framing
 * (clickjacking), no form posting anywhere (a token typed into a form can never travel in a URL),
 * no referrer, and nothing cached.
 */
import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';

export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function dashboardHeaders(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    const h = c.res.headers;
    h.set('Content-Security-Policy', DASHBOARD_CSP);
    h.set('X-Frame-Options', 'DENY');
    h.set('X-Content-Type-Options', 'nosniff');
    h.set('Referrer-Policy', 'no-referrer');
    h.set('Cross-Origin-Opener-Policy', 'same-origin');
    h.set('Cross-Origin-Resource-Policy', 'same-origin');
    h.set('Cache-Control', 'no-store');
  };
}
