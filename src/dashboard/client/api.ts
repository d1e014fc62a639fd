/**
 * The signed-in session and the admin API client every page calls. An admin token lives in sessionStorage only
 * (gone when the tab closes, never in a URL or a cookie); a person signed in with the identity provider holds
 * only the session's CSRF token and the team it acts in, and the HttpOnly session cookie goes along.
 */
import { visible } from '../../contracts/visible-text.ts';

const TOKEN_KEY = 'gatehouse.adminToken';

/** A person signed in with the identity provider, in the team they act in. */
export interface Person {
  csrf: string;
  team: string;
  role: string;
  email: string;
}

export const session = {
  token(): string | null {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  set(t: string): void {
    sessionStorage.setItem(TOKEN_KEY, t);
  },
  clear(): void {
    sessionStorage.removeItem(TOKEN_KEY);
    session.person = null;
  },
  person: null as Person | null,
};

/** A refused or failed call: the gateway's error code and its message (status 0: the gateway did not answer). */
export class ApiError extends Error {
  status: number;
  code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const listeners = { unauthenticated: [] as ((message: string) => void)[] };
export function onUnauthenticated(fn: (message: string) => void): void {
  listeners.unauthenticated.push(fn);
}

export interface ApiOptions {
  /** Sign in with this token instead of the session's (a 401 then does not sign the page out). */
  token?: string;
  /** The response itself (a download), not its JSON. */
  raw?: boolean;
}

/** Calls the admin API with the session's token as Bearer; errors become ApiError(code, message). */
export async function api<T>(method: string, path: string, body?: unknown, opts?: ApiOptions & { raw?: false }): Promise<T>;
export async function api(method: string, path: string, body: unknown, opts: ApiOptions & { raw: true }): Promise<Response>;
export async function api(method: string, path: string, body?: unknown, opts?: ApiOptions): Promise<unknown> {
  const token = opts?.token || session.token();
  const headers: Record<string, string> = { Accept: 'application/json' };
  const init: RequestInit = { method: method, headers: headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' };
  let base = '/admin/v1';
  if (token || !session.person) headers.Authorization = 'Bearer ' + token;
  else {
    base = '/dashboard/api/v1/teams/' + encodeURIComponent(session.person.team);
    headers['X-Gatehouse-CSRF'] = session.person.csrf;
    init.credentials = 'same-origin';
  }
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let r: Response;
  try {
    r = await fetch(base + path, init);
  } catch (e) {
    throw new ApiError(0, 'network', 'the gateway did not answer (' + (e as Error).message + ')');
  }
  if (opts?.raw) {
    if (!r.ok) await failure(r, opts);
    return r;
  }
  if (!r.ok) await failure(r, opts);
  const text = await r.text();
  return text ? JSON.parse(text) : null;
}

async function failure(r: Response, opts: ApiOptions | undefined): Promise<never> {
  let code = 'http_' + r.status;
  let message = 'the gateway answered HTTP ' + r.status;
  try {
    const data = JSON.parse(await r.text());
    if (data?.error) {
      code = data.error.code || code;
      message = data.error.message || message;
    }
  } catch {
    /* not JSON */
  }
  if (r.status === 401 && !opts?.token) for (const fn of listeners.unauthenticated) fn(message);
  throw new ApiError(r.status, code, message);
}

/** A route the gateway does not have yet (older deployment): the admin API answers 404 "no admin route". */
export function isMissingRoute(e: unknown): boolean {
  return e instanceof ApiError && e.status === 404 && /^no admin route/.test(e.message);
}

/** An error for the page: the gateway's message can quote what a caller sent, so it is shown visible (its line breaks kept). */
export function describe(e: unknown): string {
  const text = e instanceof ApiError ? e.message + ' (' + e.code + ')' : (e as Error | null)?.message || String(e);
  return visible(text, false, true);
}
