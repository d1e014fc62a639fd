/**
 * Trust configuration derived from Env: the Gatehouse signing key (ES256), the optional HS256
 * secret and the optional external issuer. Parsed once per distinct configuration (module cache),
 * so a bad secret is reported on every request by configGuard rather than half-working.
 */
import { createLocalJWKSet, createRemoteJWKSet, importJWK, type JWK, type JWTVerifyGetKey } from 'jose';
import { SCOPES } from '../contracts/scopes.ts';
import type { Env } from '../env.ts';
import { SIGNING_ALG, publicJwk } from './mint.ts';

const HS_MIN_BYTES = 32;
/** Algorithms accepted from an external issuer: asymmetric only (a JWKS never carries shared secrets we'd trust). */
export const EXTERNAL_ALGS = ['ES256', 'ES384', 'ES512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'EdDSA', 'Ed25519'];

/**
 * What one trusted issuer may say: the teams it speaks for (`*` = any) and the scopes it may
 * grant. A token claiming another team or scope is refused, so one identity provider cannot
 * speak for every team or hand out `admin` unless configured to.
 */
export interface IssuerTrust {
  teams: '*' | string[];
  scopes: string[];
  /** Accepted `typ` header values (normalised: lower case, no `application/`); null = not checked. */
  types: string[] | null;
}

export interface TrustConfig {
  /**
   * Public JWKs the gateway verifies its own tokens with, published at /.well-known/jwks.json: the
   * signing key, then the verify-only key while a rotation lasts (the next key, then the previous one). Empty when none.
   */
  publicKeys: JWK[];
  /** Local JWKS resolving those keys by `kid` (null when no key). */
  localKeys: JWTVerifyGetKey | null;
  hsKey: Uint8Array | null;
  /** The HS256 secret's trust (HS_TEAMS / HS_SCOPES). */
  hsTrust: IssuerTrust;
  external: { issuer: string; audience: string | null; keys: JWTVerifyGetKey; jwksUrl: string; trust: IssuerTrust } | null;
  /** Longest accepted token lifetime (exp - iat, and exp - now), seconds. */
  maxLifetimeS: number;
}

/** Scopes an outside issuer may grant unless configured otherwise: never `admin` or `agent`. */
const DEFAULT_OUTSIDE_SCOPES = ['execute', 'artifacts:read'];
/** Access tokens only (RFC 9068): an ID token or any other JWT of the provider is not a credential here. */
const DEFAULT_EXTERNAL_TYPES = ['at+jwt'];
/** Matches the admin API's longest token (1 year). */
const DEFAULT_MAX_TOKEN_LIFETIME_S = 365 * 24 * 3600;

export const normaliseTyp = (t: string) =>
  t
    .trim()
    .toLowerCase()
    .replace(/^application\//, '');

function parseTrust(name: string, teamsVar: string | undefined, scopesVar: string | undefined, types: string[] | null): IssuerTrust | string {
  if (blank(teamsVar)) return `${name}_TEAMS must list the teams this issuer may speak for (comma-separated, or * for any team)`;
  const list = teamsVar
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  const teams = list.includes('*') ? '*' : list;
  const scopes = blank(scopesVar) ? DEFAULT_OUTSIDE_SCOPES : scopesVar.split(/[\s,]+/).filter(Boolean);
  const unknown = scopes.filter((sc) => !(SCOPES as readonly string[]).includes(sc));
  if (unknown.length) return `${name}_SCOPES has unknown scope ${unknown.map((u) => `"${u}"`).join(', ')}; allowed: ${SCOPES.join(', ')}`;
  return { teams, scopes, types };
}

export type ConfigResult = { ok: true; value: TrustConfig } | { ok: false; message: string };

const blank = (s: string | undefined): s is undefined => s === undefined || s.trim() === '';

let cached: { key: string; result: Promise<ConfigResult> } | null = null;

/** The trust configuration for this Env (cached while the relevant env values stay the same). */
export function trustConfig(env: Env): Promise<ConfigResult> {
  const key = JSON.stringify(
    [
      env.GATEHOUSE_SIGNING_KEY,
      env.GATEHOUSE_VERIFY_KEY,
      env.GATEHOUSE_HS_SECRET,
      env.EXTERNAL_JWKS_URL,
      env.EXTERNAL_ISSUER,
      env.EXTERNAL_AUDIENCE,
      env.EXTERNAL_TEAMS,
      env.EXTERNAL_SCOPES,
      env.EXTERNAL_TOKEN_TYPES,
      env.HS_TEAMS,
      env.HS_SCOPES,
      env.MAX_TOKEN_LIFETIME_SECONDS,
    ].map((v) => v ?? ''),
  );
  if (cached?.key !== key) cached = { key, result: build(env) };
  return cached.result;
}

/** The public half of a signing key var, or why it is not one (`needPrivate`: the current key signs, so it needs `d`). */
async function signingPublicKey(name: string, value: string, needPrivate: boolean): Promise<JWK | string> {
  let jwk: JWK;
  try {
    jwk = JSON.parse(value);
  } catch {
    return `${name} is not valid JSON: it must be a${needPrivate ? ' private' : 'n'} ES256 JWK (npx gatehouse key generate)`;
  }
  if (!jwk || typeof jwk !== 'object' || jwk.kty !== 'EC' || jwk.crv !== 'P-256' || (needPrivate && typeof jwk.d !== 'string')) {
    return `${name} must be a${needPrivate ? ' private' : 'n'} EC P-256 JWK (kty "EC", crv "P-256"${needPrivate ? ', with "d"' : ''}) for ES256`;
  }
  try {
    await importJWK(jwk, SIGNING_ALG);
  } catch (e) {
    return `${name} cannot be imported as an ES256 key: ${(e as Error).message}`;
  }
  return { ...publicJwk(jwk), alg: SIGNING_ALG, use: 'sig' };
}

/**
 * The signing key and, during a rotation, the verify-only key: first the next key (every instance
 * trusts it before any signs with it), then the previous one (its tokens live on). Tokens name theirs by `kid`.
 */
async function signingKeys(env: Env): Promise<JWK[] | string> {
  if (blank(env.GATEHOUSE_SIGNING_KEY)) {
    return blank(env.GATEHOUSE_VERIFY_KEY) ? [] : 'GATEHOUSE_VERIFY_KEY is set without GATEHOUSE_SIGNING_KEY: set the current key too';
  }
  const current = await signingPublicKey('GATEHOUSE_SIGNING_KEY', env.GATEHOUSE_SIGNING_KEY, true);
  if (typeof current === 'string' || blank(env.GATEHOUSE_VERIFY_KEY)) return typeof current === 'string' ? current : [current];
  const other = await signingPublicKey('GATEHOUSE_VERIFY_KEY', env.GATEHOUSE_VERIFY_KEY, false);
  if (typeof other === 'string') return other;
  // The same key twice is one key.
  if (other.x === current.x && other.y === current.y) return [current];
  if (!current.kid || !other.kid || current.kid === other.kid) {
    return 'GATEHOUSE_SIGNING_KEY and GATEHOUSE_VERIFY_KEY need different "kid"s: a token names its key by kid (npx gatehouse key rotate makes one)';
  }
  return [current, other];
}

async function build(env: Env): Promise<ConfigResult> {
  const publicKeys = await signingKeys(env);
  if (typeof publicKeys === 'string') return { ok: false, message: publicKeys };
  const localKeys: JWTVerifyGetKey | null = publicKeys.length ? createLocalJWKSet({ keys: publicKeys }) : null;
  let hsKey: Uint8Array | null = null;
  let hsTrust: IssuerTrust = { teams: [], scopes: [], types: null };
  if (!blank(env.GATEHOUSE_HS_SECRET)) {
    hsKey = new TextEncoder().encode(env.GATEHOUSE_HS_SECRET);
    if (hsKey.byteLength < HS_MIN_BYTES) {
      return {
        ok: false,
        message: `GATEHOUSE_HS_SECRET is ${hsKey.byteLength} bytes; HS256 needs at least ${HS_MIN_BYTES} bytes. Set a longer secret or unset it`,
      };
    }
    const t = parseTrust('HS', env.HS_TEAMS, env.HS_SCOPES, null);
    if (typeof t === 'string') return { ok: false, message: `GATEHOUSE_HS_SECRET is set, but ${t}` };
    hsTrust = t;
  }
  let maxLifetimeS = DEFAULT_MAX_TOKEN_LIFETIME_S;
  if (!blank(env.MAX_TOKEN_LIFETIME_SECONDS)) {
    maxLifetimeS = Number(env.MAX_TOKEN_LIFETIME_SECONDS);
    if (!Number.isInteger(maxLifetimeS) || maxLifetimeS < 60) {
      return { ok: false, message: `MAX_TOKEN_LIFETIME_SECONDS must be an integer of at least 60, got "${env.MAX_TOKEN_LIFETIME_SECONDS}"` };
    }
  }
  let external: TrustConfig['external'] = null;
  const hasUrl = !blank(env.EXTERNAL_JWKS_URL);
  const hasIss = !blank(env.EXTERNAL_ISSUER);
  if (hasUrl !== hasIss) {
    return { ok: false, message: 'EXTERNAL_JWKS_URL and EXTERNAL_ISSUER must be set together (external issuer trust)' };
  }
  if (hasUrl && hasIss) {
    let url: URL;
    try {
      url = new URL(env.EXTERNAL_JWKS_URL!);
    } catch {
      return { ok: false, message: `EXTERNAL_JWKS_URL "${env.EXTERNAL_JWKS_URL}" is not a URL` };
    }
    const types = blank(env.EXTERNAL_TOKEN_TYPES) ? DEFAULT_EXTERNAL_TYPES : env.EXTERNAL_TOKEN_TYPES.split(',').map(normaliseTyp).filter(Boolean);
    const trust = parseTrust('EXTERNAL', env.EXTERNAL_TEAMS, env.EXTERNAL_SCOPES, types);
    if (typeof trust === 'string') return { ok: false, message: `EXTERNAL_ISSUER is set, but ${trust}` };
    external = {
      trust,
      issuer: env.EXTERNAL_ISSUER!,
      audience: blank(env.EXTERNAL_AUDIENCE) ? null : env.EXTERNAL_AUDIENCE,
      keys: createRemoteJWKSet(url, { timeoutDuration: 5000, cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000 }),
      jwksUrl: url.href,
    };
  }
  return { ok: true, value: { publicKeys, localKeys, hsKey, hsTrust, external, maxLifetimeS } };
}

/** Loopback hosts: the only ones a development gateway (no configured issuer/audience) answers on. */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h.endsWith('.localhost') || h === '::1' || /^127(?:\.\d{1,3}){3}$/.test(h);
}

/**
 * A development gateway: no audience configured (then hostCheck serves loopback names only), or a
 * configured audience on a loopback host (`npm start`). Either way only this machine reaches it, so
 * every loopback host and origin is its own.
 */
export function isDevelopmentGateway(env: Env): boolean {
  if (blank(env.GATEHOUSE_AUDIENCE)) return true;
  try {
    return isLoopbackHost(new URL(env.GATEHOUSE_AUDIENCE).hostname);
  } catch {
    return false;
  }
}

/**
 * `iss` when it is a loopback origin a development gateway without a configured issuer may have minted
 * under (the request's origin at the time), else null.
 */
export function developmentOrigin(iss: string, req: Request, env: Env): string | null {
  if (!blank(env.GATEHOUSE_ISSUER) || !blank(env.GATEHOUSE_AUDIENCE) || !isLoopbackHost(new URL(req.url).hostname)) return null;
  try {
    const u = new URL(iss);
    return (u.protocol === 'http:' || u.protocol === 'https:') && isLoopbackHost(u.hostname) && u.origin === iss ? iss : null;
  } catch {
    return null;
  }
}

/**
 * In production (any non-loopback host) the issuer and audience must be configured: deriving
 * them from the request would let whoever picks the Host header pick what tokens must say.
 */
export function productionConfigProblem(req: Request, env: Env): string | null {
  if (isLoopbackHost(new URL(req.url).hostname)) return null;
  const missing = [blank(env.GATEHOUSE_ISSUER) ? 'GATEHOUSE_ISSUER' : null, blank(env.GATEHOUSE_AUDIENCE) ? 'GATEHOUSE_AUDIENCE' : null].filter(Boolean);
  return missing.length
    ? `${missing.join(' and ')} must be set when serving a non-loopback host (e.g. GATEHOUSE_ISSUER="https://gw.example.com", GATEHOUSE_AUDIENCE="https://gw.example.com/mcp")`
    : null;
}

/**
 * The gateway's public origin: the configured audience's, else (development, loopback only,
 * after hostCheck) the request's. Metadata, challenges and links are built from this.
 */
export function publicOrigin(req: Request, env: Env): string {
  return blank(env.GATEHOUSE_AUDIENCE) ? new URL(req.url).origin : new URL(env.GATEHOUSE_AUDIENCE).origin;
}

/**
 * An issuer or audience as compared and minted: trimmed, without trailing slashes. `https://gw/` and
 * `https://gw` name the same gateway; tokens minted with either are accepted (see `sameUrlForms`).
 */
export const withoutTrailingSlash = (url: string): string => url.trim().replace(/\/+$/, '');

/** The spellings of one issuer or audience a token may carry: without and with a trailing slash. */
export const sameUrlForms = (url: string): string[] => [url, `${url}/`];

/** Issuer of Gatehouse-minted tokens: GATEHOUSE_ISSUER, else the (loopback) request origin. */
export function gatehouseIssuer(req: Request, env: Env): string {
  return blank(env.GATEHOUSE_ISSUER) ? new URL(req.url).origin : withoutTrailingSlash(env.GATEHOUSE_ISSUER);
}

/** The canonical MCP URL (the `aud` of Gatehouse tokens): GATEHOUSE_AUDIENCE, else origin + '/mcp'. */
export function canonicalMcpUrl(req: Request, env: Env): string {
  return blank(env.GATEHOUSE_AUDIENCE) ? `${new URL(req.url).origin}/mcp` : withoutTrailingSlash(env.GATEHOUSE_AUDIENCE);
}

/**
 * RFC 9728 §3.1: the metadata of a resource whose identifier has a path lives at the well-known name with that path
 * appended (`https://gw.example/mcp` → `/.well-known/oauth-protected-resource/mcp`); the 401 names exactly this URL.
 */
export function resourceMetadataUrl(req: Request, env: Env): string {
  return `${publicOrigin(req, env)}${RESOURCE_METADATA_PATH}${resourcePath(req, env)}`;
}

export const RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource';

/** The path of the canonical MCP URL without a trailing slash ('' for a resource at the origin's root). */
export function resourcePath(req: Request, env: Env): string {
  return new URL(canonicalMcpUrl(req, env)).pathname.replace(/\/+$/, '');
}
