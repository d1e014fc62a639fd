/**
 * A stand-in external identity provider for tests: serves a JWKS on 127.0.0.1 (random port) and
 * signs tokens with the matching private key, so the gateway can be pointed at it through
 * EXTERNAL_JWKS_URL / EXTERNAL_ISSUER / EXTERNAL_AUDIENCE.
 */
import { createServer, type Server } from 'node:http';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK, type JWTPayload } from 'jose';

export interface JwksServer {
  /** e.g. http://127.0.0.1:40123 */
  url: string;
  jwksUrl: string;
  /** The `iss` this provider puts in tokens (configurable; defaults to `${url}/issuer`). */
  issuer: string;
  kid: string;
  /** How many times the JWKS was fetched. */
  fetches: () => number;
  /** Signs a token with the provider's key: defaults iss, iat, exp (+1h), jti; `claims` override. */
  /** `typ` defaults to `at+jwt` (an access token, RFC 9068); pass `JWT` to stand for an ID token. */
  sign(claims: JWTPayload & Record<string, unknown>, o?: { omit?: string[]; kid?: string; typ?: string }): Promise<string>;
  close(): Promise<void>;
}

export async function startJwksServer(o: { alg?: 'RS256' | 'ES256'; issuer?: string } = {}): Promise<JwksServer> {
  const alg = o.alg ?? 'RS256';
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `ext-${crypto.randomUUID().slice(0, 8)}`;
  const pub: JWK = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  let fetches = 0;
  const server: Server = createServer((req, res) => {
    if (req.url === '/jwks.json') {
      fetches++;
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ keys: [pub] }));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  const url = `http://127.0.0.1:${port}`;
  const issuer = o.issuer ?? `${url}/issuer`;
  return {
    url,
    jwksUrl: `${url}/jwks.json`,
    issuer,
    kid,
    fetches: () => fetches,
    async sign(claims, so = {}) {
      const now = Math.floor(Date.now() / 1000);
      const full: Record<string, unknown> = { iss: issuer, iat: now, exp: now + 3600, jti: crypto.randomUUID(), ...claims };
      for (const k of so.omit ?? []) delete full[k];
      return new SignJWT(full as JWTPayload).setProtectedHeader({ alg, kid: so.kid ?? kid, typ: so.typ ?? 'at+jwt' }).sign(privateKey as CryptoKey);
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
