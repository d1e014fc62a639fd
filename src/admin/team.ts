/** An admin token acts on its own team only; any other team simply does not exist for it. */
import type { Context, MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';
import { apiError } from './http.ts';

export const teamNotFound = (c: Context<AppEnv>, team: string): Response => apiError(c, 'not_found', `team "${team.slice(0, 100)}" not found`);

/** For `/teams/:team/...`: 404 unless `:team` is the principal's team (never "forbidden": no enumeration). */
export function ownTeamOnly(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const team = c.req.param('team');
    if (team !== undefined && team !== c.get('principal').team) return teamNotFound(c, team);
    await next();
  };
}
