/**
 * A script's calls to an OAuth server: the transport asks this object for the access token before each
 * request (`token()`, refreshed first when it is about to expire) and tells it of a 401 (`onUnauthorized()`,
 * refreshed, then the transport retries once). A refresh uses the SDK's `refreshAuthorization` against the
 * authorization server discovered when an admin connected; the new tokens are sealed back into the team's
 * object. A refused refresh marks the connection expired: every call then fails with the reconnect message.
 *
 * Requests of one connection go out together (`notifications/initialized` and the event-stream GET): they
 * share one refresh, since a second one would spend the refresh token the first already rotated, and be
 * refused. Another script refreshing the same connection at the same time is the team's object's concern:
 * tokens are saved, and a connection expired, only if it still holds the tokens the refresh started from
 * (src/dispatch/remote-oauth.ts); the loser of that race takes the winner's tokens.
 */
import { OAuthError, OAuthErrorCode, refreshAuthorization, type AuthProvider, type AuthorizationServerMetadata } from '@modelcontextprotocol/client';
import type { Env } from '../env.ts';
import type { StoredRemoteServer } from '../contracts/mcp-servers.ts';
import { OAUTH_REFRESH_MARGIN_MS, OAuthConnectionSecret, oauthConnectionAad, oauthReconnectMessage } from '../contracts/remote-oauth.ts';
import { openSecret, sealSecret, secretsKey } from '../platform/secret-box.ts';
import { expireOAuth, oauthConnection, saveRefreshedOAuth } from '../dispatch/remote-oauth-client.ts';
import { oauthFetch } from './oauth-client-provider.ts';
import { redactSecrets } from './redact.ts';

export type OAuthCallFailure = { code: 'oauth_not_connected' | 'oauth_expired' | 'config_error' | 'upstream_error'; message: string };

/** How long a refused refresh waits for a concurrent one's tokens before it tells the script the connection expired. */
const RACE_GRACE_MS = 1000;

/**
 * Subrequests an OAuth server adds to a connection: reading the connection, and a refresh: the token request, then
 * saving the tokens, or (refused) reading the connection again, expiring it and reading it once more.
 */
export const OAUTH_CONNECT_SUBREQUESTS = 5;

export class OAuthCallAuth implements AuthProvider {
  readonly #env: Env;
  readonly #team: string;
  readonly #row: StoredRemoteServer;
  readonly #key: CryptoKey;
  #sealed: string;
  #conn: OAuthConnectionSecret;
  #expiresAt: number | null;
  /** The refresh under way, which every request of the connection waits for. */
  #refreshing: Promise<void> | undefined;
  /** Every credential this connection has held (a refresh replaces them, a server may still echo an old one). */
  readonly #held = new Set<string>();
  /** Why the connection cannot be used; set once a refresh is refused, then every use fails with it. */
  failure: OAuthCallFailure | undefined;

  private constructor(env: Env, team: string, row: StoredRemoteServer, key: CryptoKey, sealed: string, conn: OAuthConnectionSecret, expiresAt: number | null) {
    this.#env = env;
    this.#team = team;
    this.#row = row;
    this.#key = key;
    this.#sealed = sealed;
    this.#conn = conn;
    this.#expiresAt = expiresAt;
    this.hold(conn);
  }

  /** The server's connection, opened; a failure carries the message a script sees. */
  static async open(env: Env, team: string, row: StoredRemoteServer): Promise<{ ok: true; auth: OAuthCallAuth } | ({ ok: false } & OAuthCallFailure)> {
    const stored = await oauthConnection(env, team, row.id);
    if (!stored) return { ok: false, code: 'oauth_not_connected', message: oauthReconnectMessage(row.id, 'not_connected') };
    if (stored.state === 'expired') return { ok: false, code: 'oauth_expired', message: oauthReconnectMessage(row.id, 'expired') };
    const key = await secretsKey(env);
    if (!key.ok) return { ok: false, code: 'config_error', message: key.error.message };
    const conn = await openConnection(key.value, stored.sealed, team, row);
    if (!conn)
      return {
        ok: false,
        code: 'config_error',
        message: `its OAuth connection does not open with GATEHOUSE_SECRETS_KEY; an admin reconnects with gatehouse servers connect ${row.id}`,
      };
    return { ok: true, auth: new OAuthCallAuth(env, team, row, key.value, stored.sealed, conn, stored.expiresAt) };
  }

  /** Every credential this connection has held, for cutting out of any error text. */
  secrets(): string[] {
    return [...this.#held];
  }

  async token(): Promise<string | undefined> {
    if (this.failure) throw new OAuthConnectionError(this.failure);
    if (this.#refreshing || this.dueForRefresh()) await this.refresh();
    return this.#conn.tokens.access_token;
  }

  async onUnauthorized(): Promise<void> {
    await this.refresh();
  }

  /**
   * Whether the access token is close enough to its expiry to be refreshed before it is sent: within
   * OAUTH_REFRESH_MARGIN_MS, or half its lifetime if that is shorter (a token good for 30 s is not stale the
   * moment it arrives, which would refresh it before every request).
   */
  private dueForRefresh(): boolean {
    if (this.#expiresAt === null) return false;
    const lifetime = this.#conn.tokens.expires_in;
    const margin = typeof lifetime === 'number' && lifetime > 0 ? Math.min(OAUTH_REFRESH_MARGIN_MS, (lifetime * 1000) / 2) : OAUTH_REFRESH_MARGIN_MS;
    return this.#expiresAt - margin <= Date.now();
  }

  /** The refresh under way, or a new one: concurrent requests share it. */
  private refresh(): Promise<void> {
    this.#refreshing ??= this.refreshOnce().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  private async refreshOnce(): Promise<void> {
    if (this.failure) throw new OAuthConnectionError(this.failure);
    const from = this.#sealed;
    const refreshToken = this.#conn.tokens.refresh_token;
    const d = this.#conn.discoveryState;
    let tokens: Awaited<ReturnType<typeof refreshAuthorization>>;
    try {
      if (!refreshToken) throw new RefusedRefresh('the authorization server gave no refresh token');
      tokens = await refreshAuthorization(d.authorizationServerUrl, {
        metadata: d.authorizationServerMetadata as AuthorizationServerMetadata | undefined,
        clientInformation: this.#conn.clientInformation,
        refreshToken,
        ...(this.#conn.resource ? { resource: this.#conn.resource } : {}),
        fetchFn: oauthFetch,
      });
    } catch (e) {
      // Another script may have refreshed (and rotated the refresh token) meanwhile: take its tokens if so.
      if (await this.adoptNewer()) return;
      const refused = e instanceof RefusedRefresh || isOAuthError(e);
      if (refused) {
        // Expired only if the row still holds the tokens this refresh started from. The refusal may be the rotation
        // of another script's refresh whose tokens are still being saved (which makes the row connected again): a
        // moment's wait, then its tokens are taken if they came.
        if (await expireOAuth(this.#env, this.#team, this.#row.id, from).catch(() => true)) await new Promise((r) => setTimeout(r, RACE_GRACE_MS));
        if (await this.adoptNewer()) return;
      }
      this.failure = refused
        ? { code: 'oauth_expired', message: oauthReconnectMessage(this.#row.id, 'expired') }
        : { code: 'upstream_error', message: `could not refresh its OAuth token: ${redact(e, this.secrets())}` };
      throw new OAuthConnectionError(this.failure);
    }
    const next: OAuthConnectionSecret = { ...this.#conn, tokens: { ...tokens, refresh_token: tokens.refresh_token ?? refreshToken } };
    this.hold(next);
    const sealed = await sealSecret(this.#key, JSON.stringify(next), oauthConnectionAad(this.#team, this.#row.id, this.#row.url));
    const expiresAt = typeof tokens.expires_in === 'number' ? Date.now() + tokens.expires_in * 1000 : null;
    // Not saved if an admin reconnected (or another script refreshed) meanwhile: these tokens still serve this script.
    await saveRefreshedOAuth(this.#env, this.#team, { serverId: this.#row.id, previous: from, sealed, expiresAt, scope: tokens.scope ?? null });
    this.#conn = next;
    this.#sealed = sealed;
    this.#expiresAt = expiresAt;
  }

  private async adoptNewer(): Promise<boolean> {
    const stored = await oauthConnection(this.#env, this.#team, this.#row.id).catch(() => null);
    if (stored?.state !== 'connected' || stored.sealed === this.#sealed) return false;
    const conn = await openConnection(this.#key, stored.sealed, this.#team, this.#row);
    if (!conn) return false;
    this.hold(conn);
    this.#conn = conn;
    this.#sealed = stored.sealed;
    this.#expiresAt = stored.expiresAt;
    return true;
  }

  private hold(c: OAuthConnectionSecret): void {
    for (const s of [c.tokens.access_token, c.tokens.refresh_token, (c.clientInformation as { client_secret?: unknown }).client_secret])
      if (typeof s === 'string' && s) this.#held.add(s);
  }
}

/** What the transport throws when a connection cannot be used: carries the code and the script's message. */
export class OAuthConnectionError extends Error {
  readonly failure: OAuthCallFailure;
  constructor(f: OAuthCallFailure) {
    super(f.message);
    this.failure = f;
  }
}

class RefusedRefresh extends Error {}

/** The team's sealed connection to `row`, opened and checked; null when it does not open (another key, another URL) or is malformed. */
export async function openConnection(key: CryptoKey, sealed: string, team: string, row: StoredRemoteServer): Promise<OAuthConnectionSecret | null> {
  const opened = await openSecret(key, sealed, oauthConnectionAad(team, row.id, row.url));
  if (!opened.ok) return null;
  try {
    const r = OAuthConnectionSecret.safeParse(JSON.parse(opened.value));
    return r.success ? r.data : null;
  } catch {
    return null;
  }
}

/** A refusal the authorization server answered (invalid_grant, invalid_client, …), as opposed to a failure that may pass. */
function isOAuthError(e: unknown): boolean {
  return e instanceof OAuthError && e.code !== OAuthErrorCode.ServerError;
}

function redact(e: unknown, secrets: string[]): string {
  return redactSecrets(e instanceof Error ? e.message : String(e), secrets).slice(0, 500);
}
