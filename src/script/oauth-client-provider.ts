/**
 * The gateway as an OAuth client of one remote MCP server, in the shape the MCP SDK's `auth()` drives
 * (`OAuthClientProvider`): discovery, dynamic client registration, PKCE and the token exchange are the
 * SDK's; this object only holds what the SDK hands it for the length of one step, and the caller seals it
 * for the team's object (src/script/remote-oauth.ts). Nothing here persists by itself.
 */
import type {
  FetchLike,
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from '@modelcontextprotocol/client';

export interface ProviderSeed {
  clientInformation?: StoredOAuthClientInformation;
  discoveryState?: OAuthDiscoveryState;
  codeVerifier?: string;
}

export class GatewayOAuthProvider implements OAuthClientProvider {
  readonly #redirectUrl: string;
  readonly #state: string | undefined;
  #client: StoredOAuthClientInformation | undefined;
  #discovery: OAuthDiscoveryState | undefined;
  #verifier: string | undefined;
  #tokens: StoredOAuthTokens | undefined;
  #resource: string | undefined;
  /** Where the SDK would send the admin's browser: the connect step answers it. */
  authorizationUrl: URL | undefined;

  constructor(redirectUrl: string, state?: string, seed: ProviderSeed = {}) {
    this.#redirectUrl = redirectUrl;
    this.#state = state;
    this.#client = seed.clientInformation;
    this.#discovery = seed.discoveryState;
    this.#verifier = seed.codeVerifier;
  }

  get redirectUrl(): string {
    return this.#redirectUrl;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Gatehouse',
      redirect_uris: [this.#redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      // A public client with PKCE: no client secret to keep, and nothing an authorization server must trust us to hide.
      token_endpoint_auth_method: 'none',
    };
  }

  state(): string {
    if (!this.#state) throw new Error('no OAuth state for this step');
    return this.#state;
  }

  clientInformation(): StoredOAuthClientInformation | undefined {
    return this.#client;
  }

  saveClientInformation(info: StoredOAuthClientInformation): void {
    this.#client = info;
  }

  tokens(): StoredOAuthTokens | undefined {
    return this.#tokens;
  }

  saveTokens(tokens: StoredOAuthTokens): void {
    this.#tokens = tokens;
  }

  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }

  saveCodeVerifier(v: string): void {
    this.#verifier = v;
  }

  codeVerifier(): string {
    if (!this.#verifier) throw new Error('no PKCE verifier for this authorization');
    return this.#verifier;
  }

  saveDiscoveryState(s: OAuthDiscoveryState): void {
    this.#discovery = s;
  }

  discoveryState(): OAuthDiscoveryState | undefined {
    return this.#discovery;
  }

  saveResourceUrl(url: string): void {
    this.#resource = url;
  }

  resourceUrl(): string | undefined {
    return this.#resource;
  }
}

/**
 * `fetch` for every OAuth request the gateway makes (discovery, registration, token exchange, refresh): a
 * redirect is never followed. A token request answered with a redirect to another origin would otherwise carry
 * its code or refresh token there (a 307 keeps the body); refusing them all is simpler than judging each.
 */
export const oauthFetch: FetchLike = async (url, init) => {
  const res = await fetch(url, { ...init, redirect: 'manual' });
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel();
    const to = res.headers.get('location');
    let where = 'elsewhere';
    try {
      where = to ? new URL(to, url).origin : where;
    } catch {
      // An unreadable Location names no origin.
    }
    throw new RedirectRefused(`${new URL(String(url)).origin} answered an OAuth request with a redirect (${res.status}) to ${where}; not followed`);
  }
  return res;
};

/**
 * A refused redirect, thrown as the network failure it stands for: the SDK's discovery treats any other error
 * in the protected-resource metadata step as "no metadata" and carries on with the MCP server's own origin as the
 * authorization server, so the admin would read about a failed registration there instead of about the redirect.
 * A TypeError (what `fetch` throws when it cannot reach a server) stops the flow with this message.
 */
class RedirectRefused extends TypeError {}
