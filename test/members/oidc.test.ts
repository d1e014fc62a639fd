/**
 * Sign-in with a real OpenID Connect provider (oidc-provider on 127.0.0.1) through the real gateway:
 * authorization code + PKCE, discovery, state and nonce, the session cookie, CSRF, sign-out, an
 * invitation taken after signing in, and the attacks — a tampered state, a nonce from another
 * sign-in, a replayed callback, forged/expired/foreign-key session cookies, a missing CSRF token,
 * another team's data, a member on admin routes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { execSql } from '../admin/seed.ts';
import { startOidcIdp, type OidcAccount, type OidcIdp } from '../support/oidc-idp.ts';
import { generateSigningKey } from '../../src/auth/mint.ts';
import { SESSION_COOKIE, seal } from '../../src/members/session.ts';

let gw: Gateway;
let idp: OidcIdp;
const alice: OidcAccount = { sub: 'alice', email: 'alice@acme.example', name: 'Alice' };
const carol: OidcAccount = { sub: 'carol', email: 'carol@acme.example' };

beforeAll(async () => {
  idp = await startOidcIdp();
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
          member('mem_bob_globex', 'globex', 'bob', 'bob@globex.example', 'owner'),
        ].join('\n'),
      ),
  });
  idp.allowRedirect(`${gw.url}/dashboard/auth/callback`);
});
afterAll(async () => {
  await gw?.stop();
  await idp?.close();
});

/** A browser's cookie jar over 127.0.0.1 (cookies ignore ports, as browsers do) and its redirects. */
class Browser {
  jar = new Map<string, string>();
  setCookies: string[] = [];
  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const r = await fetch(url, {
      ...init,
      redirect: 'manual',
      headers: { ...(init.headers as Record<string, string>), ...(cookie ? { Cookie: cookie } : {}) },
    });
    for (const sc of r.headers.getSetCookie()) {
      this.setCookies.push(sc);
      const [pair, ...attrs] = sc.split(';');
      const [name, ...v] = pair.split('=');
      const gone = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a) || /^\s*expires=Thu, 01 Jan 1970/i.test(a));
      if (gone) this.jar.delete(name.trim());
      else this.jar.set(name.trim(), v.join('='));
    }
    return r;
  }
  /** GETs `url` and follows redirects; stops before fetching a URL `stopAt` accepts (returns it as `stoppedAt`). */
  async follow(url: string, stopAt?: (u: string) => boolean): Promise<{ res: Response | null; url: string; stoppedAt?: string }> {
    for (let hop = 0; hop < 15; hop++) {
      if (stopAt?.(url)) return { res: null, url, stoppedAt: url };
      const res = await this.fetch(url);
      const loc = res.headers.get('Location');
      if (res.status < 300 || res.status >= 400 || !loc) return { res, url };
      await res.arrayBuffer();
      url = new URL(loc, url).href;
    }
    throw new Error(`too many redirects at ${url}`);
  }
}

const isCallback = (u: string) => u.startsWith(`${gw.url}/dashboard/auth/callback`);

async function signIn(a: OidcAccount, next = '/dashboard'): Promise<Browser> {
  const b = new Browser();
  idp.nextLogin(a);
  const r = await b.follow(`${gw.url}/dashboard/auth/login?next=${encodeURIComponent(next)}`);
  expect(r.url, await r.res!.clone().text()).toBe(`${gw.url}${next}`);
  expect(r.res!.status).toBe(200);
  return b;
}

async function api(b: Browser, method: string, path: string, o: { body?: unknown; csrf?: string | null; origin?: string | null } = {}) {
  const headers: Record<string, string> = {};
  if (o.origin !== null) headers.Origin = o.origin ?? gw.url;
  if (o.csrf) headers['X-Gatehouse-CSRF'] = o.csrf;
  if (o.body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await b.fetch(`${gw.url}${path}`, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) });
  return { status: r.status, json: (await r.json()) as any };
}

const session = async (b: Browser) => (await api(b, 'GET', '/dashboard/auth/session')).json;

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
    expect(m.json.members.map((x: any) => x.memberId)).toEqual(['mem_alice', 'mem_carol']);
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
