/**
 * A stand-in for a Cloudflare Access team domain on 127.0.0.1: serves the team's signing keys at
 * `/cdn-cgi/access/certs` (where Access publishes them) and signs assertions shaped like the ones
 * Access puts in `Cf-Access-Jwt-Assertion` (RS256, kid, aud = the application's tag, email, sub).
 */
import { createServer, type Server } from 'node:http';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';

export interface AccessIdp {
  /** The team domain (also the assertions' `iss`), e.g. http://127.0.0.1:40123 */
  teamDomain: string;
  aud: string;
  /** An assertion for a person; `claims` override the defaults (exp +10 min). */
  assertion(person: { sub: string; email: string; name?: string }, claims?: Record<string, unknown>, o?: { forge?: boolean }): Promise<string>;
  close(): Promise<void>;
}

export async function startAccessIdp(aud = `aud-${crypto.randomUUID().slice(0, 8)}`): Promise<AccessIdp> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  // Same kid, different key: what a forger would try.
  const forger = await generateKeyPair('RS256', { extractable: true });
  const kid = `access-${crypto.randomUUID().slice(0, 8)}`;
  const pub: JWK = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  const server: Server = createServer((req, res) => {
    if (req.url === '/cdn-cgi/access/certs') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ keys: [pub], public_cert: { kid }, public_certs: [{ kid }] }));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const teamDomain = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    teamDomain,
    aud,
    async assertion(person, claims = {}, o = {}) {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({
        aud: [aud],
        email: person.email,
        ...(person.name ? { name: person.name } : {}),
        sub: person.sub,
        iss: teamDomain,
        iat: now,
        nbf: now,
        exp: now + 600,
        type: 'app',
        identity_nonce: crypto.randomUUID(),
        country: 'CH',
        ...claims,
      })
        .setProtectedHeader({ alg: 'RS256', kid })
        .sign((o.forge ? forger.privateKey : privateKey) as CryptoKey);
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
}
