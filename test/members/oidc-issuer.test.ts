/**
 * The sign-in's callback (src/dashboard/auth.ts, src/members/oidc.ts) against a real OpenID provider
 * (oidc-provider on 127.0.0.1), in process: an ID token that names another issuer than the one the
 * gateway trusts is refused, even when everything else about the response is right. The "lying"
 * provider is the real one behind a discovery document that claims another issuer; its ID tokens
 * are real, signed, for this client and nonce — only their `iss` is not the configured one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { Hono } from 'hono';
import type { AppEnv, Env } from '../../src/env.ts';
import { authRoutes } from '../../src/dashboard/auth.ts';
import { SESSION_COOKIE } from '../../src/members/session.ts';
import { generateSigningKey } from '../../src/auth/mint.ts';
import { startOidcIdp, type OidcIdp } from '../support/oidc-idp.ts';

/** The gateway's origin as the provider sees it: nothing listens there, the test carries the callback in. */
const GATEWAY = 'http://127.0.0.1:9';
const CALLBACK = `${GATEWAY}/dashboard/auth/callback`;

let idp: OidcIdp;
let claimed: Server;
let claimedIssuer = '';
let signingKey = '';
const app = new Hono<AppEnv>();
app.route('/dashboard/auth', authRoutes);

beforeAll(async () => {
  idp = await startOidcIdp();
  idp.allowRedirect(CALLBACK);
  signingKey = await generateSigningKey();
  // The real provider's discovery document, claiming another issuer: every endpoint is still the real provider's.
  claimed = createServer(async (req, res) => {
    if (req.url !== '/.well-known/openid-configuration') return void res.writeHead(404).end();
    const doc = (await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ ...doc, issuer: claimedIssuer }));
  });
  await new Promise<void>((r) => claimed.listen(0, '127.0.0.1', () => r()));
  claimedIssuer = `http://127.0.0.1:${(claimed.address() as { port: number }).port}`;
});
afterAll(async () => {
  claimed?.close();
  await idp?.close();
});

const envFor = (issuer: string) =>
  ({ OIDC_ISSUER: issuer, OIDC_CLIENT_ID: idp.clientId, OIDC_CLIENT_SECRET: idp.clientSecret, GATEHOUSE_SIGNING_KEY: signingKey }) as unknown as Env;

/** Starts a sign-in at the gateway, signs in at the provider, and returns the callback URL with the sign-in's cookie. */
async function toCallback(env: Env): Promise<{ callback: URL; cookie: string }> {
  const login = await app.request(`${GATEWAY}/dashboard/auth/login`, {}, env);
  expect(login.status).toBe(302);
  const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0])[0];
  const jar = new Map<string, string>();
  let url = login.headers.get('Location')!;
  idp.nextLogin({ sub: 'alice', email: 'alice@acme.example' });
  for (let hop = 0; hop < 10 && !url.startsWith(CALLBACK); hop++) {
    const r = await fetch(url, { redirect: 'manual', headers: { Cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
    for (const sc of r.headers.getSetCookie()) {
      const [name, ...v] = sc.split(';')[0].split('=');
      jar.set(name, v.join('='));
    }
    await r.arrayBuffer();
    url = new URL(r.headers.get('Location')!, url).href;
  }
  return { callback: new URL(url), cookie };
}

describe('the ID token issuer', () => {
  it('signs in when the provider is the issuer it says it is (the control)', async () => {
    const env = envFor(idp.issuer);
    const { callback, cookie } = await toCallback(env);
    const r = await app.request(callback.href, { headers: { Cookie: cookie } }, env);
    expect(r.status, await r.clone().text()).toBe(302);
    expect(r.headers.get('Location')).toBe('/dashboard');
    expect(r.headers.getSetCookie().some((c) => c.startsWith(`${SESSION_COOKIE}=`))).toBe(true);
  });

  it('refuses an ID token from another issuer than the configured one, and starts no session', async () => {
    const env = envFor(claimedIssuer);
    const { callback, cookie } = await toCallback(env);
    expect(callback.searchParams.get('iss')).toBe(idp.issuer);
    // The response parameter is relabelled so that only the ID token's own `iss` is left to tell.
    callback.searchParams.set('iss', claimedIssuer);
    const r = await app.request(callback.href, { headers: { Cookie: cookie } }, env);
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe(
      'the sign-in response is not valid: unexpected JWT "iss" (issuer) claim value',
    );
    expect(r.headers.getSetCookie().some((c) => c.startsWith(`${SESSION_COOKIE}=`))).toBe(false);
  });
});
