/**
 * Trust configuration derived from Env: the Gatehouse signing key (ES256), the optional HS256
 * secret and the optional external issuer. Parsed once per distinct configuration (module cache),
 * so a bad secret is reported on every request by configGuard rather than half-working.
 */
import { createLocalJWKSet, createRemoteJWKSet, importJWK, type JWK, type JWTVerifyGetKey } from 'jose';
import type { Env } from '../env.ts';
import { SIGNING_ALG, publicJwk } from './mint.ts';

export const HS_MIN_BYTES = 32;
/** Algorithms accepted from an external issuer: asymmetric only (a JWKS never carries shared secrets we'd trust). */
export const EXTERNAL_ALGS = ['ES256', 'ES384', 'ES512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'EdDSA', 'Ed25519'];

export interface TrustConfig {
  /** Public JWK of the Gatehouse signing key, or null when none is configured. */
  publicKey: JWK | null;
  /** Local JWKS resolving the signing key by `kid` (null when no key). */
  localKeys: JWTVerifyGetKey | null;
  hsKey: Uint8Array | null;
  external: { issuer: string; audience: string | null; keys: JWTVerifyGetKey; jwksUrl: string } | null;
}

export type ConfigResult = { ok: true; value: TrustConfig } | { ok: false; message: string };

const blank = (s: string | undefined): s is undefined => s === undefined || s.trim() === '';

let cached: { key: string; result: Promise<ConfigResult> } | null = null;

/** The trust configuration for this Env (cached while the relevant env values stay the same). */
export function trustConfig(env: Env): Promise<ConfigResult> {
  const key = JSON.stringify([env.GATEHOUSE_SIGNING_KEY ?? '', env.GATEHOUSE_HS_SECRET ?? '', env.EXTERNAL_JWKS_URL ?? '', env.EXTERNAL_ISSUER ?? '', env.EXTERNAL_AUDIENCE ?? '']);
  if (cached?.key !== key) cached = { key, result: build(env) };
  return cached.result;
}

async function build(env: Env): Promise<ConfigResult> {
  let publicKey: JWK | null = null;
  let localKeys: JWTVerifyGetKey | null = null;
  if (!blank(env.GATEHOUSE_SIGNING_KEY)) {
    let jwk: JWK;
    try {
      jwk = JSON.parse(env.GATEHOUSE_SIGNING_KEY);
    } catch {
      return { ok: false, message: 'GATEHOUSE_SIGNING_KEY is not valid JSON: it must be a private ES256 JWK (generate one with generateSigningKey in src/auth/mint.ts)' };
    }
    if (!jwk || typeof jwk !== 'object' || jwk.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.d !== 'string') {
      return { ok: false, message: 'GATEHOUSE_SIGNING_KEY must be a private EC P-256 JWK (kty "EC", crv "P-256", with "d") for ES256' };
    }
    try {
      await importJWK(jwk, SIGNING_ALG);
    } catch (e) {
      return { ok: false, message: `GATEHOUSE_SIGNING_KEY cannot be imported as an ES256 key: ${(e as Error).message}` };
    }
    publicKey = { ...publicJwk(jwk), alg: SIGNING_ALG, use: 'sig' };
    localKeys = createLocalJWKSet({ keys: [publicKey] });
  }
  let hsKey: Uint8Array | null = null;
  if (!blank(env.GATEHOUSE_HS_SECRET)) {
    hsKey = new TextEncoder().encode(env.GATEHOUSE_HS_SECRET);
    if (hsKey.byteLength < HS_MIN_BYTES) {
      return { ok: false, message: `GATEHOUSE_HS_SECRET is ${hsKey.byteLength} bytes; HS256 needs at least ${HS_MIN_BYTES} bytes. Set a longer secret or unset it` };
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
    external = {
      issuer: env.EXTERNAL_ISSUER!,
      audience: blank(env.EXTERNAL_AUDIENCE) ? null : env.EXTERNAL_AUDIENCE,
      keys: createRemoteJWKSet(url, { timeoutDuration: 5000, cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000 }),
      jwksUrl: url.href,
    };
  }
  return { ok: true, value: { publicKey, localKeys, hsKey, external } };
}

/** Issuer of Gatehouse-minted tokens: GATEHOUSE_ISSUER, else the request origin. */
export function gatehouseIssuer(req: Request, env: Env): string {
  return blank(env.GATEHOUSE_ISSUER) ? new URL(req.url).origin : env.GATEHOUSE_ISSUER;
}

/** The canonical MCP URL (the `aud` of Gatehouse tokens): GATEHOUSE_AUDIENCE, else origin + '/mcp'. */
export function canonicalMcpUrl(req: Request, env: Env): string {
  return blank(env.GATEHOUSE_AUDIENCE) ? `${new URL(req.url).origin}/mcp` : env.GATEHOUSE_AUDIENCE;
}

export function resourceMetadataUrl(req: Request): string {
  return `${new URL(req.url).origin}/.well-known/oauth-protected-resource`;
}
