/**
 * Who may use /operator/v1/: an operator token — scope `operator`, minted offline with the signing key
 * (`gatehouse token bootstrap --scope operator`; src/auth/minter.ts `isOperator`). The token's own
 * `team` claim plays no part in what it may do here; it only names the object that admits the token
 * (mint operator tokens for a team of their own, never a customer's: docs/teams.md).
 *
 * ```ts
 * operatorRoutes.use('*', requireOperator());
 * ```
 */
import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';
import { authenticate, authErrorResponse } from '../auth/index.ts';
import { isOperator, OPERATOR_SCOPE } from '../auth/minter.ts';
import { apiError } from '../admin/http.ts';

/** Verifies the bearer token as every route does (src/auth/), then that it is an operator's; sets `principal`. */
export function requireOperator(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const r = await authenticate(c.req.raw, c.env, { scopes: [OPERATOR_SCOPE] });
    if (!r.ok) return authErrorResponse(c.req.raw, c.env, r.error);
    if (!isOperator(r.value)) {
      return apiError(
        c,
        'forbidden',
        `the "${OPERATOR_SCOPE}" scope counts only on a token minted offline with this gateway's signing key (gatehouse token bootstrap --scope ${OPERATOR_SCOPE}); this one was not`,
      );
    }
    c.set('principal', r.value);
    await next();
  };
}
