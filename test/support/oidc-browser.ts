/** A browser's side of member sign-in, without a browser: its cookie jar, redirects, and the signed-in admin API calls. */
import { expect } from 'vitest';
import type { Gateway } from '../e2e/harness.ts';
import type { OidcAccount, OidcIdp } from './oidc-idp.ts';

/** A browser's cookie jar over 127.0.0.1 (cookies ignore ports, as browsers do) and its redirects. */
export class Browser {
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

/** Signs `a` in through the gateway's OpenID Connect login and lands on `next`. */
export async function signInAs(gw: Gateway, idp: OidcIdp, a: OidcAccount, next = '/dashboard'): Promise<Browser> {
  const b = new Browser();
  idp.nextLogin(a);
  const r = await b.follow(`${gw.url}/dashboard/auth/login?next=${encodeURIComponent(next)}`);
  expect(r.url, await r.res!.clone().text()).toBe(`${gw.url}${next}`);
  expect(r.res!.status).toBe(200);
  return b;
}

/** A JSON call as the signed-in browser: from the gateway's own origin unless `origin` says otherwise, with `csrf` when given. */
export async function browserApi(
  gw: Gateway,
  b: Browser,
  method: string,
  path: string,
  o: { body?: unknown; csrf?: string | null; origin?: string | null } = {},
) {
  const headers: Record<string, string> = {};
  if (o.origin !== null) headers.Origin = o.origin ?? gw.url;
  if (o.csrf) headers['X-Gatehouse-CSRF'] = o.csrf;
  if (o.body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await b.fetch(`${gw.url}${path}`, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) });
  return { status: r.status, json: (await r.json()) as any };
}
