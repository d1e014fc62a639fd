/**
 * Bearer token verification: header extraction and limits, algorithm allowlist, verifier chosen
 * by the token's `iss`, claims, revocation. Every failure is a value with the HTTP status it maps
 * to and a message that says exactly what was wrong.
 */
import { decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { Env } from '../env.ts';
import type { Principal } from './principal.ts';
import type { Scope } from '../contracts/scopes.ts';
import {
  EXTERNAL_ALGS,
  canonicalMcpUrl,
  developmentOrigin,
  gatehouseIssuer,
  normaliseTyp,
  sameUrlForms,
  trustConfig,
  withoutTrailingSlash,
  type IssuerTrust,
  type TrustConfig,
} from './config.ts';
import { AGENT_GRANT_CLAIM, AgentGrant } from '../contracts/agent-grant.ts';
import { describeIssues } from '../contracts/errors.ts';
import { MINTER_CLAIM, Minter } from './minter.ts';
import { admitToken } from '../dispatch/admission-client.ts';
import type { Admission } from '../dispatch/admission.ts';
import { notePolicyStamp } from '../store/policy-cache.ts';
import { verifyOAuthBearer } from '../oauth/verify.ts';
import { forgetGrants } from '../oauth/grants.ts';
import { LAST_USED_RESOLUTION_MS, OAUTH_TOKEN_PREFIX, noteGrantUsed, oauthAdmissionOf } from '../store/oauth-grants.ts';

/** Requests whose Authorization header is larger than this are refused before any parsing. */
const MAX_AUTH_HEADER_BYTES = 8 * 1024;
const CLOCK_TOLERANCE_S = 30;
const TEAM_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export interface AuthFailure {
  status: 400 | 401 | 403 | 431 | 500;
  code: 'unauthenticated' | 'insufficient_scope' | 'invalid_argument' | 'config_error' | 'internal' | 'team_suspended';
  message: string;
  /** A token was presented (RFC 6750: add error="invalid_token" to the challenge). */
  tokenPresented: boolean;
  /** For insufficient_scope: the scopes the route needs. */
  scope?: string;
}

export interface ScopeRequirement {
  /** All of these are required. */
  scopes?: Scope[];
  /** At least one of these is required. */
  anyScope?: Scope[];
}

export type AuthResult = { ok: true; value: Principal } | { ok: false; error: AuthFailure };

const fail = (status: AuthFailure['status'], code: AuthFailure['code'], message: string, tokenPresented = true): AuthResult => ({
  ok: false,
  error: { status, code, message, tokenPresented },
});
const invalid = (message: string): AuthResult => fail(401, 'unauthenticated', message);

const QUERY_TOKEN_PARAMS = ['access_token', 'token'];

/** Extracts the bearer token: exactly one `Authorization: Bearer <token>`, never the query string. */
function extractBearer(req: Request): { ok: true; value: string | null } | { ok: false; error: AuthFailure } {
  const url = new URL(req.url);
  const inQuery = QUERY_TOKEN_PARAMS.find((p) => url.searchParams.has(p));
  if (inQuery) {
    return {
      ok: false,
      error: {
        status: 400,
        code: 'invalid_argument',
        tokenPresented: false,
        message: `tokens in the query string ("${inQuery}=") are not accepted (they leak into logs); send "Authorization: Bearer <token>"`,
      },
    };
  }
  const header = req.headers.get('Authorization');
  if (header === null || header.trim() === '') return { ok: true, value: null };
  const size = new TextEncoder().encode(header).byteLength;
  if (size > MAX_AUTH_HEADER_BYTES) {
    return {
      ok: false,
      error: {
        status: 431,
        code: 'unauthenticated',
        tokenPresented: true,
        message: `Authorization header is ${size} bytes; the limit is ${MAX_AUTH_HEADER_BYTES}`,
      },
    };
  }
  const m = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header);
  if (!m) {
    const scheme = header.trim().split(/\s+/)[0];
    const message = /^bearer$/i.test(scheme)
      ? 'Authorization header has "Bearer" but the token is missing or contains invalid characters'
      : `Authorization scheme "${scheme.slice(0, 20)}" is not supported; use "Bearer <token>"`;
    return { ok: false, error: { status: 401, code: 'unauthenticated', tokenPresented: true, message } };
  }
  return { ok: true, value: m[1] };
}

/** Verifies the request's token and checks the route's scopes. */
export async function authenticate(req: Request, env: Env, o: ScopeRequirement = {}): Promise<AuthResult> {
  const cfg = await trustConfig(env);
  if (!cfg.ok) return fail(500, 'config_error', cfg.message, false);
  // Trusted issuer hook: access tokens our OAuth authorization server issued (src/oauth/) are
  // opaque "user:grant:secret" strings, not JWTs; they are checked there, then scoped like any token.
  const oauth = await verifyOAuthBearer(req, env);
  if (oauth) return oauth.ok ? admitOAuth(req, env, oauth.value, o) : invalid(oauth.message);
  const bearer = extractBearer(req);
  if (!bearer.ok) return bearer;
  if (bearer.value === null) {
    return fail(401, 'unauthenticated', 'authentication required: send "Authorization: Bearer <token>"', false);
  }
  const verified = await verifyToken(bearer.value, req, env, cfg.value);
  if (!verified.ok) return verified;
  const principal = verified.value;
  let admission: Admission;
  try {
    // One call to the team's own Durable Object: revocation (never cached), the team's current policy version (for the policy cache), suspension.
    admission = await admitToken(env, principal.team, principal.tokenId);
  } catch (e) {
    // Fail closed: without the revocation list we cannot tell a revoked token from a good one.
    return fail(500, 'internal', `cannot check token revocation: ${(e as Error).message}`);
  }
  if (admission.revoked) return invalid(`token ${principal.tokenId} has been revoked`);
  if (admission.suspended) return suspendedTeam(principal.team, admission);
  notePolicyStamp(principal, admission.policy);
  return checkScopes(principal, o);
}

/** Every call of a suspended team is refused, with who suspended it and why. */
function suspendedTeam(team: string, a: Admission): AuthResult {
  const s = a.suspended!;
  if (s.deleted) return fail(403, 'team_suspended', `team "${team}" was deleted (${new Date(s.at).toISOString()}, by ${s.by}): its tokens no longer work`);
  return fail(403, 'team_suspended', `team "${team}" is suspended (since ${new Date(s.at).toISOString()}, by ${s.by}: ${s.reason}); an operator resumes it`);
}

/**
 * An OAuth principal passes the same gate as a token: its grant must be on record and not ended —
 * revoked itself, by its consenting admin token's revocation, or by its client being cut off.
 */
async function admitOAuth(req: Request, env: Env, principal: Principal, o: ScopeRequirement): Promise<AuthResult> {
  const grantId = principal.tokenId.slice(OAUTH_TOKEN_PREFIX.length);
  let admission: Awaited<ReturnType<typeof oauthAdmissionOf>>;
  let team: Admission;
  try {
    // The grant is the directory's (D1); suspension and the policy version are the team's own (its DO).
    [admission, team] = await Promise.all([oauthAdmissionOf(env, principal.team, grantId), admitToken(env, principal.team, principal.tokenId)]);
  } catch (e) {
    return fail(500, 'internal', `cannot check the OAuth grant: ${(e as Error).message}`);
  }
  if (team.suspended) return suspendedTeam(principal.team, team);
  if (!admission.ok) {
    // The grant's tokens may still sit in the authorization server's store: forget them now.
    if (admission.key) await forgetGrants(req, env, [admission.key]);
    return invalid(admission.message);
  }
  if (admission.lastUsedAt === null || admission.lastUsedAt < Date.now() - LAST_USED_RESOLUTION_MS) {
    await noteGrantUsed(env, grantId).catch((e: Error) => console.error(`oauth: could not note the grant's last use: ${e.message}`));
  }
  notePolicyStamp(principal, admission.policy);
  return checkScopes(principal, o);
}

export function checkScopes(p: Principal, o: ScopeRequirement): AuthResult {
  const missing = (o.scopes ?? []).filter((s) => !p.scopes.includes(s));
  if (missing.length) {
    return {
      ok: false,
      error: {
        status: 403,
        code: 'insufficient_scope',
        tokenPresented: true,
        scope: (o.scopes ?? []).join(' '),
        message: `this token lacks the required scope ${missing.map((s) => `"${s}"`).join(', ')} (token scopes: ${p.scopes.join(' ') || 'none'})`,
      },
    };
  }
  if (o.anyScope?.length && !o.anyScope.some((s) => p.scopes.includes(s))) {
    return {
      ok: false,
      error: {
        status: 403,
        code: 'insufficient_scope',
        tokenPresented: true,
        scope: o.anyScope.join(' '),
        message: `this token needs one of the scopes ${o.anyScope.map((s) => `"${s}"`).join(', ')} (token scopes: ${p.scopes.join(' ') || 'none'})`,
      },
    };
  }
  return { ok: true, value: p };
}

interface Verifier {
  issuer: string;
  audience: string;
  algorithms: string[];
  key: JWTVerifyGetKey | Uint8Array;
  label: string;
  /** What this issuer may say; null for Gatehouse's own key (it mints what the admin API allows). */
  trust: IssuerTrust | null;
  /** The variables that configure `trust`, for messages. */
  trustVars?: { teams: string; scopes: string; types?: string };
  /** Gatehouse's own key: its issuer and audience match with or without a trailing slash. */
  ownUrls?: boolean;
}

/** Verifies signature and registered claims, then maps the Gatehouse claims to a Principal. */
async function verifyToken(token: string, req: Request, env: Env, cfg: TrustConfig): Promise<AuthResult> {
  let alg: string | undefined;
  let iss: unknown;
  try {
    alg = decodeProtectedHeader(token).alg;
    iss = decodeJwt(token).iss;
  } catch {
    return invalid('malformed token: not a signed JWT (expected three base64url parts with a JSON header and claims)');
  }
  if (!alg || alg.toLowerCase() === 'none') return invalid('unsigned tokens (alg "none") are never accepted');

  // A development gateway's issuer and audience follow the request's origin, which is any loopback
  // address: a token it minted for itself at one loopback origin stays good through another (a dev
  // server's proxy on another port). Its signature still has to be this gateway's own.
  const local = typeof iss === 'string' ? developmentOrigin(iss, req, env) : null;
  const issuer = local ?? gatehouseIssuer(req, env);
  const audience = local ? `${local}/mcp` : canonicalMcpUrl(req, env);
  let v: Verifier;
  if (cfg.external && iss === cfg.external.issuer) {
    v = {
      issuer: cfg.external.issuer,
      audience: cfg.external.audience ?? audience,
      algorithms: EXTERNAL_ALGS,
      key: cfg.external.keys,
      label: 'external issuer',
      trust: cfg.external.trust,
      trustVars: { teams: 'EXTERNAL_TEAMS', scopes: 'EXTERNAL_SCOPES', types: 'EXTERNAL_TOKEN_TYPES' },
    };
  } else {
    // A trailing slash never matters: a token minted for `https://gw/` is this gateway's as much as `https://gw`'s.
    if (typeof iss !== 'string' || withoutTrailingSlash(iss) !== issuer) {
      const trusted = [issuer, ...(cfg.external ? [cfg.external.issuer] : [])].map((i) => `"${i}"`).join(' or ');
      return invalid(`wrong issuer: expected ${trusted}, got ${typeof iss === 'string' ? `"${iss}"` : 'no "iss" claim'}`);
    }
    const algs = [...(cfg.localKeys ? ['ES256'] : []), ...(cfg.hsKey ? ['HS256'] : [])];
    if (!algs.includes(alg)) {
      const why = alg === 'HS256' ? ' (no GATEHOUSE_HS_SECRET is configured)' : alg === 'ES256' ? ' (no GATEHOUSE_SIGNING_KEY is configured)' : '';
      return invalid(`signing algorithm "${alg}" is not accepted${why}; accepted: ${algs.join(', ') || 'none'}`);
    }
    v =
      alg === 'HS256'
        ? {
            issuer,
            audience,
            algorithms: [alg],
            key: cfg.hsKey!,
            label: 'HS256 secret',
            ownUrls: true,
            trust: cfg.hsTrust,
            trustVars: { teams: 'HS_TEAMS', scopes: 'HS_SCOPES' },
          }
        : { issuer, audience, algorithms: [alg], key: cfg.localKeys!, label: 'Gatehouse', trust: null, ownUrls: true };
  }

  let payload: JWTPayload;
  let typ: string | undefined;
  try {
    const opts = {
      issuer: v.ownUrls ? sameUrlForms(v.issuer) : v.issuer,
      audience: v.ownUrls ? sameUrlForms(v.audience) : v.audience,
      algorithms: v.algorithms,
      clockTolerance: CLOCK_TOLERANCE_S,
      requiredClaims: ['exp', 'iat', 'sub', 'jti'],
    };
    const r = v.key instanceof Uint8Array ? await jwtVerify(token, v.key, opts) : await jwtVerify(token, v.key, opts);
    payload = r.payload;
    typ = r.protectedHeader.typ;
  } catch (e) {
    return invalid(describeJoseError(e, v));
  }
  // jose checks iat's type only; a token "issued" in the future is a clock or forgery problem.
  if (typeof payload.iat === 'number' && payload.iat > Date.now() / 1000 + CLOCK_TOLERANCE_S) {
    return invalid(`token "iat" is in the future (${new Date(payload.iat * 1000).toISOString()}); check the issuer's clock`);
  }
  const life = lifetimeProblem(payload, cfg.maxLifetimeS);
  if (life) return invalid(life);
  if (v.trust?.types && !v.trust.types.includes(normaliseTyp(typ ?? ''))) {
    return invalid(
      `token type ${typ === undefined ? '(no "typ" header)' : `"${typ}"`} is not accepted from the ${v.label}: send an access token (typ ${v.trust.types.map((t) => `"${t}"`).join(' or ')}; ${v.trustVars?.types} configures this), not an ID token`,
    );
  }
  // Only the gateway's own key vouches for a minter: another issuer's `minted_by` is not read (its tokens are capped at admin).
  const p = principalFrom(payload, v.issuer, v.trust === null);
  if (!p.ok || !v.trust) return p;
  return trusted(p.value, v);
}

/** A token living longer than the maximum is refused, whatever its issuer says (`exp: 1e20`). */
function lifetimeProblem(payload: JWTPayload, maxS: number): string | null {
  const now = Date.now() / 1000;
  const exp = payload.exp as number;
  const iat = payload.iat as number;
  if (typeof iat === 'number' && exp - iat > maxS + CLOCK_TOLERANCE_S) {
    return `token lifetime ${Math.round(exp - iat)} s exceeds the maximum of ${maxS} s (MAX_TOKEN_LIFETIME_SECONDS)`;
  }
  if (exp - now > maxS + CLOCK_TOLERANCE_S) return `token expires too far in the future (more than ${maxS} s from now; MAX_TOKEN_LIFETIME_SECONDS)`;
  return null;
}

/** The team and every scope must be ones this issuer is trusted for. */
function trusted(p: Principal, v: Verifier): AuthResult {
  const t = v.trust!;
  if (t.teams !== '*' && !t.teams.includes(p.team)) {
    return invalid(`the ${v.label} is not trusted to speak for team "${p.team}" (${v.trustVars?.teams} lists the teams it may)`);
  }
  const extra = p.scopes.filter((sc) => !t.scopes.includes(sc));
  if (extra.length) {
    return invalid(
      `the ${v.label} may not grant scope ${extra.map((x) => `"${x}"`).join(', ')} (allowed: ${t.scopes.join(' ')}; ${v.trustVars?.scopes} configures this)`,
    );
  }
  return { ok: true, value: p };
}

function describeJoseError(e: unknown, v: Verifier): string {
  if (e instanceof errors.JWTExpired) {
    const exp = typeof e.payload.exp === 'number' ? ` at ${new Date(e.payload.exp * 1000).toISOString()}` : '';
    return `token expired${exp}`;
  }
  if (e instanceof errors.JWTClaimValidationFailed) {
    if (e.reason === 'missing') return `token is missing the required "${e.claim}" claim`;
    if (e.claim === 'aud') {
      const got = e.payload.aud === undefined ? 'none' : JSON.stringify(e.payload.aud);
      return `wrong audience: expected "${v.audience}", got ${got}`;
    }
    if (e.claim === 'iss') return `wrong issuer: expected "${v.issuer}", got ${JSON.stringify(e.payload.iss ?? null)}`;
    if (e.claim === 'nbf') return 'token is not yet valid ("nbf" is in the future)';
    if (e.claim === 'iat') return `invalid "iat" claim: ${e.message}`;
    return `invalid "${e.claim}" claim: ${e.message}`;
  }
  if (e instanceof errors.JOSEAlgNotAllowed) return `signing algorithm not accepted by the ${v.label}; accepted: ${v.algorithms.join(', ')}`;
  if (e instanceof errors.JWKSNoMatchingKey) return `unknown signing key: no key of the ${v.label} matches the token's "kid"`;
  if (e instanceof errors.JWKSMultipleMatchingKeys) return `ambiguous signing key: several keys of the ${v.label} match; the token needs a "kid"`;
  if (e instanceof errors.JWSSignatureVerificationFailed) return `signature verification failed: the token was not signed by the ${v.label}'s key`;
  if (e instanceof errors.JWKSTimeout) return `could not fetch the ${v.label}'s JWKS in time`;
  if (e instanceof errors.JWKSInvalid) return `the ${v.label}'s JWKS is invalid`;
  if (e instanceof errors.JWTInvalid || e instanceof errors.JWSInvalid) return `malformed token: ${e.message}`;
  if (e instanceof errors.JOSENotSupported) return `unsupported token: ${e.message}`;
  if (e instanceof errors.JOSEError) return `token rejected: ${e.message}`;
  // e.g. the external JWKS could not be fetched at all.
  return `token could not be verified by the ${v.label}: ${(e as Error)?.message ?? String(e)}`;
}

function principalFrom(payload: JWTPayload, issuer: string, ownKey: boolean): AuthResult {
  const team = payload.team;
  if (typeof team !== 'string' || !TEAM_RE.test(team)) {
    return invalid(team === undefined ? 'token has no "team" claim' : `invalid "team" claim: must match ${TEAM_RE.source}`);
  }
  if (typeof payload.sub !== 'string' || payload.sub === '') return invalid('invalid "sub" claim: must be a non-empty string');
  if (typeof payload.jti !== 'string' || payload.jti === '') return invalid('invalid "jti" claim: must be a non-empty string (needed for revocation)');
  const scopes = new Set<string>();
  if (typeof payload.scope === 'string') for (const s of payload.scope.split(/\s+/).filter(Boolean)) scopes.add(s);
  else if (payload.scope !== undefined) return invalid('invalid "scope" claim: must be a space-separated string');
  const scp = payload.scp;
  if (Array.isArray(scp))
    for (const s of scp) {
      if (typeof s === 'string') scopes.add(s);
    }
  else if (typeof scp === 'string') for (const s of scp.split(/\s+/).filter(Boolean)) scopes.add(s);
  // A malformed agent grant refuses the token: it must never read as "claims: whatever the agent says".
  const grant = payload[AGENT_GRANT_CLAIM] === undefined ? null : AgentGrant.safeParse(payload[AGENT_GRANT_CLAIM]);
  if (grant && !grant.success) return invalid(`invalid "${AGENT_GRANT_CLAIM}" claim: ${describeIssues(grant.error.issues)}`);
  const agentGrant = grant ? { agentGrant: grant.data } : {};
  const minted = ownKey && payload[MINTER_CLAIM] !== undefined ? Minter.safeParse(payload[MINTER_CLAIM]) : null;
  if (minted && !minted.success) return invalid(`invalid "${MINTER_CLAIM}" claim: ${describeIssues(minted.error.issues)}`);
  const minter = minted ? { minter: minted.data } : {};
  return { ok: true, value: { team, subject: payload.sub, scopes: [...scopes], tokenId: payload.jti, issuer, ...agentGrant, ...minter } };
}
