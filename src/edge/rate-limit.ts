/**
 * Per-token and per-team rate limits on `/mcp` and the admin API, with the Workers Rate Limiting
 * binding (`[[ratelimits]]` in wrangler.toml). Runs after authentication (the keys are the
 * verified token and team) and before any work: a caller over its budget gets 429 with
 * Retry-After and nothing reaches a Durable Object.
 *
 * ```ts
 * app.use('/admin/v1/*', requireAuth({ scopes: ['admin'] }), rateLimit('admin'));
 * ```
 */
import type { MiddlewareHandler } from 'hono';
import type { AppEnv, Env } from '../env.ts';
import type { RATE_LIMIT_PERIODS_S } from '../platform/limits.ts';

/**
 * The period wrangler.toml configures, one of those the binding counts in (RATE_LIMIT_PERIODS_S); the binding does
 * not say when a window resets, so Retry-After is the period.
 */
export const RATE_LIMIT_PERIOD_S: (typeof RATE_LIMIT_PERIODS_S)[number] = 60;

/** Limits as configured in wrangler.toml, per period, for the messages (the binding holds the real numbers). */
export const RATE_LIMITS = {
  mcp: { token: 300, team: 1200 },
  admin: { token: 120, team: 600 },
} as const;

type Surface = keyof typeof RATE_LIMITS;

function bindings(env: Env, surface: Surface): { token?: RateLimit; team?: RateLimit } {
  return surface === 'mcp' ? { token: env.RL_MCP_TOKEN, team: env.RL_MCP_TEAM } : { token: env.RL_ADMIN_TOKEN, team: env.RL_ADMIN_TEAM };
}

export function rateLimit(surface: Surface): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const p = c.get('principal');
    const b = bindings(c.env, surface);
    // Token first: one noisy token should not use up its team's budget before being stopped.
    for (const [which, rl, key] of [
      ['token', b.token, `${p.team}/${p.tokenId}`],
      ['team', b.team, p.team],
    ] as const) {
      if (!rl) continue;
      const { success } = await rl.limit({ key: `${surface}:${key}` });
      if (!success) {
        const limit = RATE_LIMITS[surface][which];
        c.header('Retry-After', String(RATE_LIMIT_PERIOD_S));
        return c.json(
          {
            error: {
              code: 'rate_limited',
              message: `rate limit exceeded: at most ${limit} ${surface === 'mcp' ? 'MCP' : 'admin API'} requests per ${RATE_LIMIT_PERIOD_S} s per ${which === 'token' ? 'token' : 'team'}; retry after ${RATE_LIMIT_PERIOD_S} s`,
            },
          },
          429,
        );
      }
    }
    await next();
  };
}
