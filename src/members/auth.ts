/**
 * A signed-in person as a principal: where a request carries no API token but a verified identity
 * (Cloudflare Access's assertion), the person's membership and role in the team become the
 * principal, read from D1 on every request, so removing a member or lowering their role takes
 * effect on their next request. Requests that change something must come from this gateway's own
 * pages (their Origin), the CSRF rule for every identity a browser carries on its own.
 *
 * ```ts
 * app.use('/admin/v1/*', memberOrToken({ scopes: ['admin'] }));
 * ```
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { AppEnv, Principal, Scope } from '../env.ts';
import type { GatehouseErrorShape, Result } from '../contracts/errors.ts';
import { authenticate, authErrorResponse, checkScopes, type ScopeRequirement } from '../auth/index.ts';
import { apiError } from '../admin/http.ts';
import { ACCESS_HEADER, accessConfig, verifyAccessAssertion } from './access.ts';
import { memberSubject, membershipsOf, touchMember, type Identity, type MemberRow } from '../store/members.ts';
import type { Role } from './roles.ts';

/** What each role may do through scopes: admin and owner hold the admin API; a member runs and reads. */
export const ROLE_SCOPES: Record<Role, Scope[]> = {
  owner: ['admin', 'execute', 'artifacts:read'],
  admin: ['admin', 'execute', 'artifacts:read'],
  member: ['execute', 'artifacts:read'],
};

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The person signed in on this request, null when none is presented, or why the presented one is refused. */
export async function signedInIdentity(c: Context<AppEnv>): Promise<Result<Identity | null>> {
  const assertion = c.req.header(ACCESS_HEADER);
  if (assertion === undefined) return { ok: true, value: null };
  const cfg = accessConfig(c.env);
  if (!cfg.ok) return cfg;
  if (!cfg.value) {
    return { ok: false, error: { code: 'unauthenticated', message: `this gateway does not trust Cloudflare Access (set CF_ACCESS_TEAM_DOMAIN and CF_ACCESS_AUD); sign in with an API token` } };
  }
  return verifyAccessAssertion(cfg.value, assertion);
}

/** A state-changing request signed in by a browser-held identity must come from this origin. */
export function crossSiteRefusal(c: Context<AppEnv>): GatehouseErrorShape | null {
  if (SAFE_METHODS.has(c.req.method)) return null;
  const origin = c.req.header('Origin');
  const own = new URL(c.req.url).origin;
  if (origin === own) return null;
  return { code: 'forbidden', message: `a signed-in request that changes something must come from this gateway's pages (Origin ${own}); got ${origin ? `Origin ${origin.slice(0, 100)}` : 'no Origin header'}` };
}

/** The membership a request acts in: the team its path names, else the person's only team. */
export function pickMembership(memberships: MemberRow[], pathTeam: string | undefined, who: Identity): Result<MemberRow> {
  const name = who.email ?? who.subject;
  if (pathTeam !== undefined) {
    const m = memberships.find((x) => x.team === pathTeam);
    return m ? { ok: true, value: m } : { ok: false, error: { code: 'not_found', message: `team "${pathTeam.slice(0, 100)}" not found among ${name}'s teams (${memberships.map((x) => x.team).join(', ') || 'none'})` } };
  }
  if (memberships.length === 1) return { ok: true, value: memberships[0] };
  if (memberships.length === 0) {
    return { ok: false, error: { code: 'forbidden', message: `${name} is not a member of any team on this gateway: ask a team owner or admin for an invitation` } };
  }
  return { ok: false, error: { code: 'invalid_argument', message: `${name} is a member of several teams (${memberships.map((x) => x.team).join(', ')}): pick one with /admin/v1/teams/<team>/…` } };
}

export const memberPrincipal = (m: MemberRow): Principal => ({
  team: m.team, subject: memberSubject(m), scopes: ROLE_SCOPES[m.role], tokenId: memberSubject(m), issuer: m.issuer,
  member: { memberId: m.memberId, role: m.role },
});

/**
 * An API token when the request has an Authorization header (automation, break-glass); otherwise
 * the signed-in person, with the scopes of their role in the team.
 */
export function memberOrToken(o: ScopeRequirement): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const who = c.req.header('Authorization') === undefined ? await signedInIdentity(c) : ({ ok: true, value: null } as const);
    if (!who.ok) return apiError(c, who.error.code, who.error.message);
    if (!who.value) {
      const r = await authenticate(c.req.raw, c.env, o);
      if (!r.ok) return authErrorResponse(c.req.raw, c.env, r.error);
      c.set('principal', r.value);
      return next();
    }
    const csrf = crossSiteRefusal(c);
    if (csrf) return apiError(c, csrf.code, csrf.message);
    const pathTeam = /^\/admin\/v1\/teams\/([^/]+)/.exec(new URL(c.req.url).pathname)?.[1];
    const m = pickMembership(await membershipsOf(c.env, who.value.issuer, who.value.subject), pathTeam && decodeURIComponent(pathTeam), who.value);
    if (!m.ok) return apiError(c, m.error.code, m.error.message);
    const p = memberPrincipal(m.value);
    const scoped = checkScopes(p, o);
    if (!scoped.ok) {
      return apiError(c, 'insufficient_scope', `your role in team "${p.team}" is ${m.value.role}; this needs the owner or admin role (a member connects clients and runs what the policy allows)`);
    }
    c.set('principal', p);
    c.executionCtx.waitUntil(touchMember(c.env, m.value.memberId).catch(() => undefined));
    await next();
  };
}
