/**
 * Authentication for every protected route: bearer JWTs (ES256 Gatehouse-issued, optional HS256
 * shared secret, optional external issuer via JWKS), scopes, revocation, discovery documents.
 *
 * ```ts
 * app.use('/admin/v1/*', requireAuth({ scopes: ['admin'] }));
 * app.get('/admin/v1/tokens', (c) => c.json(c.get('principal')));
 * ```
 */
import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';
import { productionConfigProblem, trustConfig } from './config.ts';
import { gatewayConfig } from '../platform/config.ts';
import { authErrorResponse } from './respond.ts';
import { authenticate, type ScopeRequirement } from './verify.ts';

export {
  authenticate,
  checkScopes,
  type ScopeRequirement,
} from './verify.ts';
export { authErrorResponse } from './respond.ts';
export { hostCheck } from './host-check.ts';
export { wellKnownRoutes } from './well-known.ts';

/** Verifies the bearer token, checks scopes (`scopes`: all of them, `anyScope`: at least one), sets `principal`. */
export function requireAuth(o: ScopeRequirement = {}): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const r = await authenticate(c.req.raw, c.env, o);
    if (!r.ok) return authErrorResponse(c.req.raw, c.env, r.error);
    c.set('principal', r.value);
    await next();
  };
}

/**
 * Refuses every request (500, code config_error, naming the problem) while the trust
 * configuration is broken — e.g. an HS256 secret under 32 bytes or an unparsable signing key —
 * instead of silently accepting fewer or weaker tokens. /healthz stays up so the deploy is diagnosable.
 */
export function configGuard(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (new URL(c.req.url).pathname === '/healthz') return next();
    const cfg = await trustConfig(c.env);
    if (!cfg.ok) {
      return c.json({ error: { code: 'config_error', message: `gateway misconfigured: ${cfg.message}` } }, 500);
    }
    const vars = gatewayConfig(c.env);
    if (!vars.ok) return c.json({ error: { code: vars.code, message: `gateway misconfigured: ${vars.message}` } }, 500);
    const prod = productionConfigProblem(c.req.raw, c.env);
    if (prod) return c.json({ error: { code: 'config_error', message: `gateway misconfigured: ${prod}` } }, 500);
    await next();
  };
}
