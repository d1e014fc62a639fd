/**
 * Sign-in with a real OpenID Connect provider (oidc-provider on 127.0.0.1) through the real gateway:
 * authorization code + PKCE, discovery, state and nonce, the session cookie, CSRF, sign-out, an
 * invitation taken after signing in, OAuth consent by a signed-in member, a person's own page
 * (/dashboard/me), and the attacks — a tampered state, a code from another sign-in, an ID token minted
 * for another nonce, an authorization response from another issuer, a replayed callback,
 * forged/expired/foreign-key session cookies, missing CSRF tokens on invite/role/remove, another
 * team's data, a member on every admin route, a removed or demoted member's session and grants,
 * a forged team in the consent form.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { execSql } from '../admin/seed.ts';
import { startOidcIdp, type OidcAccount, type OidcIdp } from '../support/oidc-idp.ts';
import { generateSigningKey } from '../../src/auth/mint.ts';
import { SESSION_COOKIE, seal } from '../../src/members/session.ts';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { TestOAuthProvider } from '../support/oauth-provider.ts';
import { Browser, browserApi, signInAs } from '../support/oidc-browser.ts';

let gw: Gateway;
let idp: OidcIdp;
/** A second, real provider: its answers must never sign anyone in here. */
let otherIdp: OidcIdp;
const alice: OidcAccount = { sub: 'alice', email: 'alice@acme.example', name: 'Alice' };
const carol: OidcAccount = { sub: 'carol', email: 'carol@acme.example' };
const dora: OidcAccount = { sub: 'dora', email: 'dora@acme.example' };
/** In two teams: a member of acme, an admin of globex. */
const erin: OidcAccount = { sub: 'erin', email: 'erin@both.example' };
const fay: OidcAccount = { sub: 'fay', email: 'fay@acme.example' };

beforeAll(async () => {
  idp = await startOidcIdp();
  otherIdp = await startOidcIdp();
  const member = (id: string, team: string, sub: string, email: string, role: string) =>
    `INSERT INTO members (member_id, team, issuer, subject, email, name, role, created_at, added_by) VALUES ('${id}', '${team}', '${idp.issuer}', '${sub}', '${email}', NULL, '${role}', ${Date.now() - 60_000}, 'seed');`;
  gw = await startGateway({
    vars: { OIDC_ISSUER: idp.issuer, OIDC_CLIENT_ID: idp.clientId, OIDC_CLIENT_SECRET: idp.clientSecret },
    beforeStart: async (persist) =>
      execSql(
        persist,
        [
          member('mem_alice', 'acme', 'alice', alice.email, 'owner'),
          member('mem_carol', 'acme', 'carol', carol.email, 'member'),
          member('mem_dora', 'acme', 'dora', dora.email, 'admin'),
          member('mem_erin_acme', 'acme', 'erin', erin.email, 'member'),
          member('mem_fay', 'acme', 'fay', fay.email, 'member'),
          member('mem_bob_globex', 'globex', 'bob', 'bob@globex.example', 'owner'),
          member('mem_erin_globex', 'globex', 'erin', erin.email, 'admin'),
          member('mem_ivan_initech', 'initech', 'ivan', 'ivan@initech.example', 'owner'),
        ].join('\n'),
      ),
  });
  idp.allowRedirect(`${gw.url}/dashboard/auth/callback`);
  otherIdp.allowRedirect(`${gw.url}/dashboard/auth/callback`);
});
afterAll(async () => {
  await gw?.stop();
  await idp?.close();
  await otherIdp?.close();
});

const isCallback = (u: string) => u.startsWith(`${gw.url}/dashboard/auth/callback`);

const signIn = (a: OidcAccount, next = '/dashboard'): Promise<Browser> => signInAs(gw, idp, a, next);

const api = (b: Browser, method: string, path: string, o: { body?: unknown; csrf?: string | null; origin?: string | null } = {}) =>
  browserApi(gw, b, method, path, o);

const session = async (b: Browser) => (await api(b, 'GET', '/dashboard/auth/session')).json;

async function adminApi(method: string, path: string, body?: unknown) {
  const token = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'admin-tok' });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as any };
}

/** An MCP client's first contact: refused, it registers and has the consent page's URL. */
async function newClient(name: string): Promise<{ provider: TestOAuthProvider; authUrl: string }> {
  const provider = new TestOAuthProvider(name, 'http://127.0.0.1:9/callback');
  const probe = new Client({ name: 'oidc-consent', version: '1.0.0' });
  await expect(probe.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
  return { provider, authUrl: provider.authorizationUrl!.href };
}

const consentPost = (b: Browser, authUrl: string, form: Record<string, string>, origin = gw.url) =>
  b.fetch(authUrl, {
    method: 'POST',
    headers: { Origin: origin, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });

const csrfOfPage = (page: string) => /<input type="hidden" name="csrf" value="([^"]+)">/.exec(page)?.[1] ?? '';

/** Connects an MCP client as the person signed in in `b`, granting `execute` in `team` on the consent page. */
async function connectClient(b: Browser, team: string, name: string): Promise<TestOAuthProvider> {
  const { provider, authUrl } = await newClient(name);
  const page = await (await b.fetch(authUrl)).text();
  const r = await consentPost(b, authUrl, { as: 'member', csrf: csrfOfPage(page), team, scope: 'execute', decision: 'approve' });
  expect(r.status, await r.clone().text()).toBe(302);
  const code = new URL(r.headers.get('Location')!).searchParams.get('code')!;
  await new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }).finishAuth(code);
  return provider;
}

/** The HTTP status of one MCP tool call with the client's access token. */
async function mcpStatus(p: TestOAuthProvider): Promise<number> {
  const r = await fetch(gw.mcpUrl, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${p.saved!.access_token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2025-11-25',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'policy_check', arguments: { command: 'git', args: ['status'] } } }),
  });
  await r.arrayBuffer();
  return r.status;
}

const ROLE_REFUSAL = 'your role in team "acme" is member; this needs the owner or admin role (a member connects clients and runs what the policy allows)';

describe('sign-in with an OpenID Connect provider', () => {
  it('signs in with code + PKCE, sets a short-lived HttpOnly Lax cookie on /dashboard, and gives an owner the admin API', async () => {
    const b = await signIn(alice);
    const cookie = b.setCookies.find((c) => c.startsWith(`${SESSION_COOKIE}=`))!;
    expect(cookie).toMatch(/; Max-Age=28800/);
    expect(cookie).toMatch(/; Path=\/dashboard/);
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Lax/);
    // A loopback development gateway over http: no Secure (the browser would never send it back).
    expect(cookie).not.toMatch(/; Secure/);
    const s = await session(b);
    expect(s).toMatchObject({
      signedIn: true,
      issuer: idp.issuer,
      subject: 'alice',
      email: 'alice@acme.example',
      name: 'Alice',
      teams: [{ team: 'acme', role: 'owner', memberId: 'mem_alice' }],
    });
    const m = await api(b, 'GET', '/dashboard/api/v1/members');
    expect(m.status).toBe(200);
    expect(m.json.members.map((x: any) => x.memberId)).toEqual(['mem_alice', 'mem_carol', 'mem_dora', 'mem_erin_acme', 'mem_fay']);
    // Only the dashboard's paths take the session (the cookie's path), even from a client that sends it to /admin/v1.
    expect((await b.fetch(`${gw.url}/admin/v1/members`)).status).toBe(401);
  });

  it('refuses a callback whose state was tampered with, and sets no session', async () => {
    const b = new Browser();
    idp.nextLogin(alice);
    const { stoppedAt } = await b.follow(`${gw.url}/dashboard/auth/login`, isCallback);
    const u = new URL(stoppedAt!);
    u.searchParams.set('state', 'attacker-state');
    const r = await b.fetch(u.href);
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.message).toMatch(/^the sign-in response is not valid: unexpected "state" response parameter value/);
    expect(b.jar.has(SESSION_COOKIE)).toBe(false);
  });

  it("refuses a code from another sign-in of the same browser (its PKCE verifier and nonce are that sign-in's)", async () => {
    const b = new Browser();
    idp.nextLogin(alice);
    const first = (await b.follow(`${gw.url}/dashboard/auth/login`, isCallback)).stoppedAt!;
    // A second sign-in in the same browser replaces the pending one (its state, nonce and verifier).
    const second = await b.fetch(`${gw.url}/dashboard/auth/login`);
    const secondState = new URL(second.headers.get('Location')!).searchParams.get('state')!;
    const u = new URL(first);
    u.searchParams.set('state', secondState);
    const r = await b.fetch(u.href);
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.message).toBe('the identity provider refused the code: invalid_grant (grant request is invalid)');
    expect(b.jar.has(SESSION_COOKIE)).toBe(false);
  });

  it('refuses a replayed callback', async () => {
    const b = new Browser();
    idp.nextLogin(alice);
    const cb = (await b.follow(`${gw.url}/dashboard/auth/login`, isCallback)).stoppedAt!;
    expect((await b.follow(cb)).res!.status).toBe(200);
    const again = await b.fetch(cb);
    expect(again.status).toBe(400);
    expect(((await again.json()) as any).error.message).toContain('this sign-in has no pending request in this browser');
  });

  it('refuses forged, expired and foreign-key session cookies', async () => {
    const idn = { issuer: idp.issuer, subject: 'alice', email: alice.email, emailVerified: true, name: null };
    const now = Math.floor(Date.now() / 1000);
    const cases: [string, string][] = [
      ['garbage', 'eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..AAAA.BBBB.CCCC'],
      ['expired', await seal(gw.signingKey, 'session', { idn, csrf: 'x' }, 3600, now - 7200)],
      ['another gateway', await seal(await generateSigningKey(), 'session', { idn, csrf: 'x' }, 3600)],
      ['a sign-in transaction, not a session', await seal(gw.signingKey, 'signin', { idn, csrf: 'x' }, 3600)],
    ];
    for (const [what, value] of cases) {
      const b = new Browser();
      b.jar.set(SESSION_COOKIE, value);
      expect(await session(b), what).toMatchObject({ signedIn: false });
      expect((await api(b, 'GET', '/dashboard/api/v1/members')).status, what).toBe(401);
    }
    // The same sealing with this gateway's key and a future expiry is accepted: the cases above fail for their reason.
    const ok = new Browser();
    ok.jar.set(SESSION_COOKIE, await seal(gw.signingKey, 'session', { idn, csrf: 'x' }, 3600));
    expect((await api(ok, 'GET', '/dashboard/api/v1/members')).status).toBe(200);
  });

  it('needs the CSRF token and this origin for every change', async () => {
    const b = await signIn(alice);
    const { csrf } = await session(b);
    const missing = await api(b, 'PATCH', '/dashboard/api/v1/members/mem_carol', { body: { role: 'admin' } });
    expect(missing.status).toBe(403);
    expect(missing.json.error.message).toMatch(/^missing CSRF token: a signed-in change carries the session's token \(header X-Gatehouse-CSRF/);
    expect((await api(b, 'PATCH', '/dashboard/api/v1/members/mem_carol', { body: { role: 'admin' }, csrf: 'guess' })).json.error.message).toMatch(
      /^wrong CSRF token/,
    );
    expect((await api(b, 'PATCH', '/dashboard/api/v1/members/mem_carol', { body: { role: 'admin' }, csrf, origin: 'https://evil.example' })).status).toBe(403);
    const ok = await api(b, 'PATCH', '/dashboard/api/v1/members/mem_carol', { body: { role: 'admin' }, csrf });
    expect(ok.json.member.role).toBe('admin');
    expect((await api(b, 'PATCH', '/dashboard/api/v1/members/mem_carol', { body: { role: 'member' }, csrf })).json.member.role).toBe('member');
  });

  it("refuses a member on admin routes and anyone on another team's", async () => {
    const c = await signIn(carol);
    const r = await api(c, 'GET', '/dashboard/api/v1/tokens');
    expect(r.status).toBe(403);
    expect(r.json.error.message).toBe(
      'your role in team "acme" is member; this needs the owner or admin role (a member connects clients and runs what the policy allows)',
    );
    const a = await signIn(alice);
    const other = await api(a, 'GET', '/dashboard/api/v1/teams/globex/members');
    expect(other.status).toBe(404);
  });

  it('signs out with the CSRF token; the cookie is gone', async () => {
    const b = await signIn(alice);
    const { csrf } = await session(b);
    expect((await api(b, 'POST', '/dashboard/auth/logout')).status).toBe(403);
    expect((await api(b, 'POST', '/dashboard/auth/logout', { csrf })).json).toEqual({ signedIn: false });
    expect(b.jar.has(SESSION_COOKIE)).toBe(false);
    expect(await session(b)).toMatchObject({ signedIn: false });
  });
});

describe('an invitation taken after signing in with the provider', () => {
  it('sends a signed-out person to sign in and back, then joins with the form (CSRF token inside); the link then is used up', async () => {
    const token = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'admin-tok' });
    const inv = await fetch(`${gw.url}/admin/v1/members/invitations`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'dave@acme.example', role: 'admin' }),
    });
    const link = ((await inv.json()) as any).url as string;
    const b = new Browser();
    const first = await b.fetch(link);
    expect(first.status).toBe(401);
    const signInHref = /<a href="([^"]+)">Sign in/.exec(await first.text())![1].replace(/&#38;/g, '&');
    idp.nextLogin({ sub: 'dave', email: 'dave@acme.example', name: 'Dave' });
    const back = await b.follow(new URL(signInHref, gw.url).href);
    expect(back.url).toBe(link);
    const page = await back.res!.text();
    expect(page).toContain('a <strong data-role>admin</strong> of team <strong data-team>acme</strong>');
    const form = new URLSearchParams([...page.matchAll(/<input type="hidden" name="(\w+)" value="([^"]*)">/g)].map((m) => [m[1], m[2]]));
    expect([...form.keys()]).toEqual(['invitation', 'csrf']);
    const post = (f: URLSearchParams) =>
      b.fetch(`${gw.url}/dashboard/join`, {
        method: 'POST',
        headers: { Origin: gw.url, 'Content-Type': 'application/x-www-form-urlencoded' },
        body: f.toString(),
      });
    const noToken = new URLSearchParams(form);
    noToken.delete('csrf');
    expect((await post(noToken)).status).toBe(403);
    const joined = await post(form);
    expect(await joined.text()).toContain('You joined team acme as admin.');
    expect((await session(b)).teams).toEqual([{ team: 'acme', role: 'admin', memberId: expect.stringMatching(/^mem_/) }]);
    expect((await post(form)).status).toBe(403);
  });

  it('does not let an address the provider has not verified take an invitation', async () => {
    const token = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'admin-tok' });
    const inv = await fetch(`${gw.url}/admin/v1/members/invitations`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'mallory@acme.example' }),
    });
    const link = ((await inv.json()) as any).url as string;
    const b = await signIn({ sub: 'mallory', email: 'mallory@acme.example', emailVerified: false });
    const page = await (await b.fetch(link)).text();
    const form = new URLSearchParams([...page.matchAll(/<input type="hidden" name="(\w+)" value="([^"]*)">/g)].map((m) => [m[1], m[2]]));
    const r = await b.fetch(`${gw.url}/dashboard/join`, {
      method: 'POST',
      headers: { Origin: gw.url, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    expect(r.status).toBe(403);
    expect(await r.text()).toContain('(not verified by your identity provider)');
  });
});

describe('attacks on the sign-in', () => {
  it('refuses an ID token the provider minted for another nonce (same state, PKCE and client)', async () => {
    const b = new Browser();
    idp.nextLogin(alice);
    const login = await b.fetch(`${gw.url}/dashboard/auth/login`);
    const toIdp = new URL(login.headers.get('Location')!);
    expect(toIdp.searchParams.get('nonce')!.length).toBeGreaterThanOrEqual(32);
    toIdp.searchParams.set('nonce', 'the-nonce-of-another-sign-in');
    const { stoppedAt } = await b.follow(toIdp.href, isCallback);
    const r = await b.fetch(stoppedAt!);
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.message).toBe('the sign-in response is not valid: unexpected ID Token "nonce" claim value');
    expect(b.jar.has(SESSION_COOKIE)).toBe(false);
  });

  it('refuses an authorization response from another issuer: with its iss, without it, or relabelled as ours', async () => {
    const cases: [string, (u: URL) => void, RegExp][] = [
      ['as the other provider sent it', () => undefined, /^the sign-in response is not valid: unexpected "iss" \(issuer\) response parameter value$/],
      ['iss removed', (u) => u.searchParams.delete('iss'), /^the sign-in response is not valid: response parameter "iss" \(issuer\) missing$/],
      // Relabelled, the other provider's code reaches our provider's token endpoint, which knows nothing of it.
      ['iss set to ours', (u) => u.searchParams.set('iss', idp.issuer), /^the identity provider refused the code: invalid_grant/],
    ];
    for (const [what, tamper, message] of cases) {
      const b = new Browser();
      const login = await b.fetch(`${gw.url}/dashboard/auth/login`);
      const toIdp = new URL(login.headers.get('Location')!);
      // The same request (client id, redirect URI, state, nonce, PKCE) sent to another real provider.
      otherIdp.nextLogin(alice);
      const cb = new URL((await b.follow(new URL(toIdp.pathname + toIdp.search, otherIdp.issuer).href, isCallback)).stoppedAt!);
      expect(cb.searchParams.get('iss'), what).toBe(otherIdp.issuer);
      tamper(cb);
      const r = await b.fetch(cb.href);
      expect(r.status, what).toBe(400);
      expect(((await r.json()) as any).error.message, what).toMatch(message);
      expect(b.jar.has(SESSION_COOKIE), what).toBe(false);
    }
  });
});

describe('a member (role member) signed in with the provider', () => {
  it('is refused on every admin route, with and without the CSRF token, and changes nothing', async () => {
    const c = await signIn(carol);
    const { csrf } = await session(c);
    const before = { policy: await adminApi('GET', '/policy'), members: await adminApi('GET', '/members'), tokens: await adminApi('GET', '/tokens') };
    const routes: [string, string, unknown?][] = [
      ['GET', '/whoami'],
      ['GET', '/overview'],
      ['GET', '/policy'],
      ['PUT', '/policy', { version: 1, runtimes: {} }],
      ['POST', '/policy/check', { command: 'ls' }],
      ['GET', '/policy/history'],
      ['PUT', '/policy/presets/read-only', {}],
      ['GET', '/tokens'],
      ['POST', '/tokens', { scopes: ['admin'], subject: 'carol-escalates' }],
      ['DELETE', '/tokens/some-jti'],
      ['GET', '/members'],
      ['POST', '/members/invitations', { email: 'carol2@acme.example', role: 'owner' }],
      ['PATCH', '/members/mem_carol', { role: 'owner' }],
      ['DELETE', '/members/mem_alice'],
      ['DELETE', '/members/invitations/inv_x'],
      ['GET', '/approvals'],
      ['POST', '/approvals/apr_x/approve', {}],
      ['POST', '/approvals/apr_x/deny', {}],
      ['GET', '/audit'],
      ['GET', '/jobs'],
      ['GET', '/agents'],
      ['GET', '/oauth/grants'],
      ['DELETE', '/oauth/grants/g1'],
      ['DELETE', '/oauth/clients/c1'],
    ];
    for (const base of ['/dashboard/api/v1', '/dashboard/api/v1/teams/acme']) {
      for (const [method, path, body] of routes) {
        for (const withCsrf of [true, false]) {
          const what = `${method} ${base}${path} ${withCsrf ? 'with' : 'without'} the CSRF token`;
          const r = await api(c, method, base + path, { body, csrf: withCsrf ? csrf : null });
          expect(r.status, what).toBe(403);
          // A change without the token is refused before the role is even looked at.
          expect(r.json.error.message, what).toMatch(method === 'GET' || withCsrf ? ROLE_REFUSAL : /^missing CSRF token/);
        }
      }
    }
    // /admin/v1 never takes the session, whatever the client sends it.
    for (const [method, path, body] of routes)
      expect((await api(c, method, `/admin/v1${path}`, { body, csrf })).status, `${method} /admin/v1${path}`).toBe(401);
    expect({ policy: await adminApi('GET', '/policy'), members: await adminApi('GET', '/members'), tokens: await adminApi('GET', '/tokens') }).toEqual(before);
  });
});

describe('CSRF on invite, role change and removal', () => {
  it("refuses each without the session's token, with a guessed one, with another person's, or from another origin; nothing changes", async () => {
    const a = await signIn(alice);
    const { csrf } = await session(a);
    const carolsToken = (await session(await signIn(carol))).csrf as string;
    const changes: [string, string, unknown?][] = [
      ['POST', '/dashboard/api/v1/members/invitations', { email: 'csrf@acme.example' }],
      ['PATCH', '/dashboard/api/v1/members/mem_fay', { role: 'admin' }],
      ['DELETE', '/dashboard/api/v1/members/mem_fay'],
    ];
    for (const [method, path, body] of changes) {
      const what = `${method} ${path}`;
      expect((await api(a, method, path, { body })).json.error.message, what).toMatch(/^missing CSRF token/);
      expect((await api(a, method, path, { body, csrf: 'guessed' })).json.error.message, what).toMatch(/^wrong CSRF token/);
      expect((await api(a, method, path, { body, csrf: carolsToken })).json.error.message, what).toMatch(/^wrong CSRF token/);
      const foreign = await api(a, method, path, { body, csrf, origin: 'https://evil.example' });
      expect(foreign.status, what).toBe(403);
      expect(foreign.json.error.message, what).toContain("must come from this gateway's pages");
      expect((await api(a, method, path, { body, csrf, origin: null })).status, what).toBe(403);
    }
    const list = (await adminApi('GET', '/members')).json;
    expect(list.invitations.map((i: any) => i.email)).not.toContain('csrf@acme.example');
    expect(list.members.find((m: any) => m.memberId === 'mem_fay').role).toBe('member');
  });
});

describe('lowering a role or removing a member ends their sessions and OAuth grants at once', () => {
  it('an admin lowered to member is signed out and their client cut off; signed in again they are a member', async () => {
    const d = await signIn(dora);
    expect((await api(d, 'GET', '/dashboard/api/v1/members')).status).toBe(200);
    const client = await connectClient(d, 'acme', "Dora's editor");
    expect(await mcpStatus(client)).toBe(200);
    const [grant] = (await api(d, 'GET', '/dashboard/me/teams/acme/grants')).json.grants;
    expect(grant).toMatchObject({ consentTokenId: 'member:mem_dora', clientName: "Dora's editor", revokedAt: null });

    const a = await signIn(alice);
    const { csrf } = await session(a);
    const r = await api(a, 'PATCH', '/dashboard/api/v1/members/mem_dora', { body: { role: 'member' }, csrf });
    expect(r.json).toMatchObject({ member: { role: 'member' }, previousRole: 'admin', oauthGrantsEnded: [grant.grantId], sessionsEnded: true });
    expect(await session(d)).toMatchObject({ signedIn: false });
    expect((await api(d, 'GET', '/dashboard/api/v1/members')).status).toBe(401);
    expect(await mcpStatus(client)).toBe(401);
    // Only Dora's sessions end: the owner who lowered the role stays signed in.
    expect((await session(a)).signedIn).toBe(true);
    const audit = (await adminApi('GET', '/audit?tool=admin.member_role')).json.entries[0];
    expect(audit).toMatchObject({
      subject: 'member:mem_alice',
      command: { memberId: 'mem_dora', from: 'admin', to: 'member', oauthGrantsEnded: [grant.grantId] },
    });

    const again = await signIn(dora);
    expect((await session(again)).teams).toEqual([{ team: 'acme', role: 'member', memberId: 'mem_dora' }]);
    expect((await api(again, 'GET', '/dashboard/api/v1/members')).json.error.message).toBe(ROLE_REFUSAL);
    expect((await api(again, 'GET', '/dashboard/me/teams/acme/grants')).json.grants[0]).toMatchObject({
      grantId: grant.grantId,
      revokedReason: 'the role of dora@acme.example (member mem_dora) was lowered from admin to member',
    });
    // Raising a role ends nothing.
    const up = await api(a, 'PATCH', '/dashboard/api/v1/members/mem_dora', { body: { role: 'admin' }, csrf });
    expect(up.json).toMatchObject({ member: { role: 'admin' }, oauthGrantsEnded: [], sessionsEnded: false });
    expect((await session(again)).signedIn).toBe(true);
  });

  it('a removed member is signed out, their client cut off, and they reach no team', async () => {
    const f = await signIn(fay);
    const client = await connectClient(f, 'acme', "Fay's editor");
    expect(await mcpStatus(client)).toBe(200);
    const rm = await adminApi('DELETE', '/members/mem_fay');
    expect(rm.json.oauthGrantsEnded).toHaveLength(1);
    expect(await session(f)).toMatchObject({ signedIn: false });
    expect((await api(f, 'GET', '/dashboard/me/teams/acme/jobs')).status).toBe(401);
    expect(await mcpStatus(client)).toBe(401);
    const again = await signIn(fay);
    expect((await session(again)).teams).toEqual([]);
    const mine = await api(again, 'GET', '/dashboard/me/teams/acme/grants');
    expect(mine.status).toBe(404);
    expect(mine.json.error.message).toBe('team "acme" not found among fay@acme.example\'s teams (none)');
  });
});

describe('a person in two teams', () => {
  it('picks the team at consent; a team forged into the form is refused; each grant stays in its team', async () => {
    const e = await signIn(erin);
    expect((await session(e)).teams).toEqual([
      { team: 'acme', role: 'member', memberId: 'mem_erin_acme' },
      { team: 'globex', role: 'admin', memberId: 'mem_erin_globex' },
    ]);
    const { provider, authUrl } = await newClient("Erin's editor");
    const page = await (await e.fetch(authUrl)).text();
    expect(page).toContain('<option value="acme" >acme (member)</option>');
    expect(page).toContain('<option value="globex" >globex (admin)</option>');
    const form = { as: 'member', csrf: csrfOfPage(page), scope: 'execute', decision: 'approve' };
    // A team that exists, where Erin is not a member: refused, no code.
    const forged = await consentPost(e, authUrl, { ...form, team: 'initech' });
    expect(forged.status).toBe(400);
    expect(await forged.text()).toContain('team &quot;initech&quot; not found among erin@both.example&#39;s teams (acme, globex)');
    // The form without the session's CSRF token, or posted from another site: refused too.
    expect((await consentPost(e, authUrl, { ...form, team: 'globex', csrf: '' })).status).toBe(400);
    expect((await consentPost(e, authUrl, { ...form, team: 'globex' }, 'https://evil.example')).status).toBe(400);

    const granted = await consentPost(e, authUrl, { ...form, team: 'globex' });
    expect(granted.status).toBe(302);
    await new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }).finishAuth(
      new URL(granted.headers.get('Location')!).searchParams.get('code')!,
    );
    expect(await mcpStatus(provider)).toBe(200);
    const [grant] = (await api(e, 'GET', '/dashboard/me/teams/globex/grants')).json.grants;
    expect(grant).toMatchObject({ consentTokenId: 'member:mem_erin_globex', clientName: "Erin's editor" });
    expect((await api(e, 'GET', '/dashboard/me/teams/acme/grants')).json.grants).toEqual([]);
    expect((await adminApi('GET', '/oauth/grants')).json.grants.map((g: any) => g.grantId)).not.toContain(grant.grantId);
    // The admin API by the team in the path: admin in globex, member in acme, and no default between two.
    expect((await api(e, 'GET', '/dashboard/api/v1/teams/globex/members')).status).toBe(200);
    expect((await api(e, 'GET', '/dashboard/api/v1/teams/acme/members')).json.error.message).toBe(ROLE_REFUSAL);
    expect((await api(e, 'GET', '/dashboard/api/v1/members')).status).toBe(400);

    // Her globex grant cannot be ended through acme, nor by someone else; she ends it herself.
    const { csrf } = await session(e);
    expect((await api(e, 'DELETE', `/dashboard/me/teams/acme/grants/${grant.grantId}`, { csrf })).status).toBe(404);
    const c = await signIn(carol);
    expect((await api(c, 'DELETE', `/dashboard/me/teams/globex/grants/${grant.grantId}`, { csrf: (await session(c)).csrf })).status).toBe(404);
    expect((await api(e, 'DELETE', `/dashboard/me/teams/globex/grants/${grant.grantId}`)).json.error.message).toMatch(/^missing CSRF token/);
    expect(await mcpStatus(provider)).toBe(200);
    const revoked = await api(e, 'DELETE', `/dashboard/me/teams/globex/grants/${grant.grantId}`, { csrf });
    expect(revoked.status).toBe(200);
    expect(await mcpStatus(provider)).toBe(401);
  });

  it('answers /dashboard/me only to a signed-in person', async () => {
    const r = await fetch(`${gw.url}/dashboard/me/teams/acme/jobs`);
    expect(r.status).toBe(401);
    const token = await gw.token({ team: 'acme', scopes: ['admin'] });
    expect((await fetch(`${gw.url}/dashboard/me/teams/acme/grants`, { headers: { Authorization: `Bearer ${token}` } })).status).toBe(401);
  });
});
