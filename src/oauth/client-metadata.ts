/**
 * Outbound fetches of the OAuth provider: Client ID Metadata Documents (an HTTPS URL as `client_id`,
 * MCP authorization 2025-11-25) and a metadata-document client's `jwks_uri`. The provider itself
 * validates the client id URL (HTTPS, a path, no dot segments, no userinfo or fragment), bounds the
 * document (5 KiB, 10 s), checks that its `client_id` is its own URL and that every redirect URI is
 * listed, and caches it as its Cache-Control allows. It calls the global `fetch` and has no way to
 * pass another, so every call into the provider runs inside `withClientFetchGuard`, and only fetches
 * made inside it are checked here:
 * - the address must be public: a literal IP is classified by ipaddr.js (anything but `unicast` —
 *   loopback, private, link-local, CGNAT, unique-local, IPv4-mapped forms of those, … — is refused)
 *   and special-use names that never resolve on the Internet (`localhost`, `*.localhost`, `*.local`,
 *   `*.internal`, `*.home.arpa`, single-label names) are refused. On Cloudflare a name that resolves to
 *   a private address is refused by the platform (with `global_fetch_strictly_public`, fetch goes out
 *   as from the Internet); `wrangler dev` has no such check, so a development gateway relies on the
 *   literal rules above;
 * - redirects are not followed: a document must be served at its `client_id` URL itself.
 * The JWKS and OPA fetches of the gateway (loopback in development) run outside the guard, unchanged.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import ipaddr from 'ipaddr.js';

/** Why a client-supplied URL is refused before it is fetched. */
export type ClientUrlRefusal = { code: 'client_url_not_https' | 'client_url_not_public' | 'client_url_invalid'; message: string };

const SPECIAL_USE_SUFFIXES = ['.localhost', '.local', '.internal', '.home.arpa'];

/** null: the URL may be fetched; otherwise why not, for the person reading the consent or error page. */
export function refuseClientUrl(raw: string): ClientUrlRefusal | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { code: 'client_url_invalid', message: `${raw} is not a URL` };
  }
  if (url.protocol !== 'https:') {
    return { code: 'client_url_not_https', message: `${raw} is not an https URL: client metadata documents and their keys are fetched over HTTPS only` };
  }
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (ipaddr.isValid(host)) {
    const range = ipaddr.process(host).range();
    if (range !== 'unicast') {
      return { code: 'client_url_not_public', message: `${raw} points at a ${range} address (${host}); only public Internet addresses are fetched` };
    }
    return null;
  }
  const name = host.replace(/\.$/, '');
  if (name === 'localhost' || !name.includes('.') || SPECIAL_USE_SUFFIXES.some((s) => name.endsWith(s))) {
    return { code: 'client_url_not_public', message: `${raw} names a host that is not on the public Internet (${name}); only public host names are fetched` };
  }
  return null;
}

/** A fetch of a client-supplied URL: public HTTPS only, and a redirect is refused instead of followed. */
export async function checkedClientFetch(input: RequestInfo | URL, init: RequestInit | undefined, transport: typeof fetch): Promise<Response> {
  const request = new Request(input, init);
  const refusal = refuseClientUrl(request.url);
  if (refusal) throw new Error(refusal.message);
  const response = await transport(new Request(request, { redirect: 'manual' }));
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel().catch(() => undefined);
    const to = response.headers.get('Location');
    throw new Error(
      `${request.url} answered a redirect (HTTP ${response.status}${to ? ` to ${to}` : ''}); a client metadata document must be served at its client_id URL itself, redirects are not followed`,
    );
  }
  return response;
}

const scope = new AsyncLocalStorage<true>();
let installed = false;

/** Runs `fn` (calls into the OAuth provider) with every global fetch it makes checked by `checkedClientFetch`. */
export function withClientFetchGuard<T>(fn: () => Promise<T>): Promise<T> {
  if (!installed) {
    const original = globalThis.fetch.bind(globalThis);
    globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) =>
      scope.getStore() ? checkedClientFetch(input, init, original) : original(input, init)) as typeof fetch;
    installed = true;
  }
  return scope.run(true, fn);
}
