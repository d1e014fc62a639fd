/**
 * A signed-in person as a principal: where a request carries no API token but a verified identity
 * (Cloudflare Access's assertion, or the session cookie of the OpenID Connect sign-in), the person's membership and role in the team become the
 * principal, read from D1 on every request, so removing a member or lowering their role takes
 * effect on their next request. Requests that change something must come from this gateway's own
 * pages (their Origin) and, with a session, carry its CSRF token (header X-Gatehouse-CSRF or form
 * field `csrf`): a browser presents either identity on its own, so neither alone proves intent.
 *
 * ```ts
 * app.use('/admin/v1/*', memberOrToken({ scopes: ['admin'] }));
 * ```
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';
import type { Principal } from '../auth/principal.ts';
import type { Scope } from '../contracts/scopes.ts';
import type { GatehouseErrorShape, Result } from '../contracts/errors.ts';
import { authenticate, authErrorResponse, checkScopes, type ScopeRequirement } from '../auth/index.ts';
import { apiError } from '../admin/http.ts';
import { ACCESS_HEADER, accessConfig, verifyAccessAssertion } from './access.ts';
import { memberSubject, membershipsOf, touchMember, type Identity, type MemberRow } from '../store/members.ts';
import { SESSION_PATH, readSession } from './session.ts';
import type { Role } from './roles.ts';

/** What each role may do through scopes: admin and owner hold the admin API; a member runs and reads. */
export const ROLE_SCOPES: Record<Role, Scope[]> = {
  owner: ['admin', 'execute', 'artifacts:read'],
  admin: ['admin', 'execute', 'artifacts:read'],
  member: ['execute', 'artifacts:read'],
};

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const CSRF_HEADER = 'X-Gatehouse-CSRF';

export interface SignedIn {
  identity: Identity;
  /** The session's CSRF token; null for Cloudflare Access (no session of ours: the Origin rule alone). */
  csrf: string | null;
}

/** The person signed in on this request, null when none is presented, or why the presented one is refused. */
export async function signedInIdentity(c: Context<AppEnv>): Promise<Result<SignedIn | null>> {
  const assertion = c.req.header(ACCESS_HEADER);
  if (assertion === undefined) {
    // The session is for the dashboard and the consent page (its cookie's paths), even if a client sends it elsewhere.
    if (!c.req.path.startsWith(`${SESSION_PATH}/`) && c.req.path !== '/authorize') return { ok: true, value: null };
    const s = await readSession(c);
    return { ok: true, value: s ? { identity: s.identity, csrf: s.csrf } : null };
  }
  const cfg = accessConfig(c.env);
  if (!cfg.ok) return cfg;
  if (!cfg.value) {
    return {
      ok: false,
      error: {
        code: 'unauthenticated',
        message: `this gateway does not trust Cloudflare Access (set CF_ACCESS_TEAM_DOMAIN and CF_ACCESS_AUD); sign in with an API token`,
      },
    };
  }
  const who = await verifyAccessAssertion(cfg.value, assertion);
  return who.ok ? { ok: true, value: { identity: who.value, csrf: null } } : who;
}

/** A state-changing request signed in by a browser-held identity must come from this origin, with the session's CSRF token. */
export function crossSiteRefusal(c: Context<AppEnv>, s: SignedIn, formToken?: string): GatehouseErrorShape | null {
  if (SAFE_METHODS.has(c.req.method)) return null;
  const origin = c.req.header('Origin');
  const own = new URL(c.req.url).origin;
  // Pages under Referrer-Policy: no-referrer post forms with `Origin: null`; the browser's own
  // Sec-Fetch-Site (no page can set it) then says whether the form was this origin's.
  const sameSite = origin && origin !== 'null' ? origin === own : c.req.header('Sec-Fetch-Site') === 'same-origin';
  if (!sameSite) {
    return {
      code: 'forbidden',
      message: `a signed-in request that changes something must come from this gateway's pages (Origin ${own}); got ${origin ? `Origin ${origin.slice(0, 100)}` : 'no Origin header'}${origin && origin !== 'null' ? '' : ' and no Sec-Fetch-Site: same-origin'}`,
    };
  }
  if (s.csrf === null) return null;
  const token = c.req.header(CSRF_HEADER) ?? formToken;
  if (token === s.csrf) return null;
  return {
    code: 'forbidden',
    message: `${token ? 'wrong' : 'missing'} CSRF token: a signed-in change carries the session's token (header ${CSRF_HEADER}, from GET /dashboard/auth/session); reload the page`,
  };
}

/** The membership a request acts in: the team its path names, else the person's only team. */
export function pickMembership(memberships: MemberRow[], pathTeam: string | undefined, who: Identity): Result<MemberRow> {
  const name = who.email ?? who.subject;
  if (pathTeam !== undefined) {
    const m = memberships.find((x) => x.team === pathTeam);
    return m
      ? { ok: true, value: m }
      : {
          ok: false,
          error: {
            code: 'not_found',
            message: `team "${pathTeam.slice(0, 100)}" not found among ${name}'s teams (${memberships.map((x) => x.team).join(', ') || 'none'})`,
          },
        };
  }
  if (memberships.length === 1) return { ok: true, value: memberships[0] };
  if (memberships.length === 0) {
    return {
      ok: false,
      error: { code: 'forbidden', message: `${name} is not a member of any team on this gateway: ask a team owner or admin for an invitation` },
    };
  }
  return {
    ok: false,
    error: {
      code: 'invalid_argument',
      message: `${name} is a member of several teams (${memberships.map((x) => x.team).join(', ')}): pick one with /admin/v1/teams/<team>/…`,
    },
  };
}

export const memberPrincipal = (m: MemberRow): Principal => ({
  team: m.team,
  subject: memberSubject(m),
  scopes: ROLE_SCOPES[m.role],
  tokenId: memberSubject(m),
  issuer: m.issuer,
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
    const csrf = crossSiteRefusal(c, who.value);
    if (csrf) return apiError(c, csrf.code, csrf.message);
    const pathTeam = /^\/(?:admin|dashboard\/api)\/v1\/teams\/([^/]+)/.exec(new URL(c.req.url).pathname)?.[1];
    const person = who.value.identity;
    const m = pickMembership(await membershipsOf(c.env, person.issuer, person.subject), pathTeam && decodeURIComponent(pathTeam), person);
    if (!m.ok) return apiError(c, m.error.code, m.error.message);
    const p = memberPrincipal(m.value);
    const scoped = checkScopes(p, o);
    if (!scoped.ok) {
      return apiError(
        c,
        'insufficient_scope',
        `your role in team "${p.team}" is ${m.value.role}; this needs the owner or admin role (a member connects clients and runs what the policy allows)`,
      );
    }
    c.set('principal', p);
    c.executionCtx.waitUntil(touchMember(c.env, m.value.memberId).catch(() => undefined));
    await next();
  };
}
