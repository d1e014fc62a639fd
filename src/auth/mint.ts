/**
 * Minting Gatehouse tokens (ES256). Used by the admin API, by the CLI for the offline bootstrap
 * admin token, and by tests. Runs in workerd and in Node (WebCrypto only).
 */
import { SignJWT, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import { AGENT_GRANT_CLAIM, type AgentGrant } from '../contracts/agent-grant.ts';
import { MINTER_CLAIM, type Minter } from './minter.ts';

export const SIGNING_ALG = 'ES256';

export interface MintOptions {
  /** Private JWK (object or JSON string), as stored in GATEHOUSE_SIGNING_KEY. */
  privateJwk: JWK | string;
  issuer: string;
  audience: string;
  team: string;
  subject: string;
  scopes: string[];
  ttlSeconds: number;
  /** An agent token's grant: the sandboxes, labels and agent id its agents may claim (src/contracts/agent-grant.ts). */
  agentGrant?: AgentGrant;
  /**
   * Who mints it (src/auth/minter.ts): a member, or `bootstrap` (offline, with the signing key). null:
   * no minter claim, as tokens minted before minters were recorded (capped at admin).
   */
  minter: Minter | null;
  jti?: string;
  now?: number;
}

export interface MintedToken {
  token: string;
  jti: string;
  expiresAt: number;
  /** The signing key's id (the token's `kid` header). */
  kid: string | null;
}

export async function mintToken(o: MintOptions): Promise<MintedToken> {
  const jwk: JWK = typeof o.privateJwk === 'string' ? JSON.parse(o.privateJwk) : o.privateJwk;
  const key = await importJWK(jwk, SIGNING_ALG);
  const jti = o.jti ?? crypto.randomUUID();
  const now = o.now ?? Math.floor(Date.now() / 1000);
  const expiresAt = now + o.ttlSeconds;
  const claims = {
    team: o.team,
    scope: o.scopes.join(' '),
    ...(o.agentGrant ? { [AGENT_GRANT_CLAIM]: o.agentGrant } : {}),
    ...(o.minter ? { [MINTER_CLAIM]: o.minter } : {}),
  };
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: SIGNING_ALG, kid: jwk.kid, typ: 'JWT' })
    .setIssuer(o.issuer)
    .setAudience(o.audience)
    .setSubject(o.subject)
    .setIssuedAt(now)
    .setExpirationTime(expiresAt)
    .setJti(jti)
    .sign(key);
  return { token, jti, expiresAt, kid: jwk.kid ?? null };
}

/** A new ES256 private JWK with a kid, as a JSON string (the GATEHOUSE_SIGNING_KEY secret). */
export async function generateSigningKey(): Promise<string> {
  const { privateKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
  const jwk = await exportJWK(privateKey);
  jwk.kid = crypto.randomUUID().slice(0, 8);
  jwk.alg = SIGNING_ALG;
  jwk.use = 'sig';
  return JSON.stringify(jwk);
}

/** The public half of a private JWK, for /.well-known/jwks.json. */
export function publicJwk(privateJwk: JWK | string): JWK {
  const jwk: JWK = typeof privateJwk === 'string' ? JSON.parse(privateJwk) : privateJwk;
  const { d: _d, ...pub } = jwk;
  return pub;
}
