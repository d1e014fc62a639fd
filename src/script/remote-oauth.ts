/**
 * Connecting the team to a remote MCP server that requires OAuth, in two steps with the MCP SDK's `auth()`:
 * `beginConnect` (an admin asks: discovery, client registration, PKCE; answers the authorization URL) and
 * `finishConnect` (the server's authorization server sends the admin's browser back to OAUTH_CALLBACK_PATH:
 * the code is exchanged for tokens). Between them, the PKCE verifier and the registered client wait sealed in
 * the team's object under a one-time nonce; the `state` parameter is sealed too, naming the team and server
 * that started it, so a callback binds its tokens to exactly that team and server, once, before the TTL.
 */
import { auth, OAuthError, OAuthErrorCode, type OAuthDiscoveryState, type StoredOAuthClientInformation } from '@modelcontextprotocol/client';
import type { Env } from '../env.ts';
import type { StoredRemoteServer } from '../contracts/mcp-servers.ts';
import {
  OAUTH_CALLBACK_PATH,
  OAUTH_PENDING_TTL_MS,
  OAUTH_STATE_AAD,
  OAuthPendingSecret,
  OAuthState,
  type ServerConnectInput,
  oauthConnectionAad,
  oauthPendingAad,
  type OAuthConnectionSecret,
} from '../contracts/remote-oauth.ts';
import { openSecret, sealSecret, secretsKey } from '../platform/secret-box.ts';
import { beginOAuth, oauthConnection, saveOAuthConnection, takeOAuth } from '../dispatch/remote-oauth-client.ts';
import { remoteServerRow } from '../dispatch/remote-servers-client.ts';
import { GatewayOAuthProvider, oauthFetch } from './oauth-client-provider.ts';
import { describe } from './remote-server.ts';
import { openConnection } from './remote-oauth-call.ts';

type Failure = { ok: false; code: 'config_error' | 'upstream_error' | 'oauth_state_invalid' | 'not_found' | 'conflict'; message: string };

const STATE_REFUSED = 'this authorization is unknown, already used, expired, or for another team or server; start again with gatehouse servers connect <id>';

/** Starts an authorization for `row`: the URL to open in a browser, and until when it can be finished. */
export async function beginConnect(
  env: Env,
  origin: string,
  team: string,
  row: StoredRemoteServer,
  who: { subject: string; tokenId: string | null },
  o: ServerConnectInput = {},
): Promise<{ ok: true; authorizationUrl: string; expiresAt: number; client: 'reused' | 'registered' } | Failure> {
  const key = await secretsKey(env);
  if (!key.ok) return { ok: false, code: 'config_error', message: key.error.message };
  const nonce = randomToken();
  const state = await sealSecret(key.value, JSON.stringify({ team, server: row.id, nonce } satisfies OAuthState), OAUTH_STATE_AAD);
  const redirectUrl = `${origin}${OAUTH_CALLBACK_PATH}`;
  const previous = o.newClient ? undefined : await previousClient(env, key.value, team, row, redirectUrl);
  const provider = new GatewayOAuthProvider(redirectUrl, state, previous ? { clientInformation: previous } : {});
  try {
    const r = await auth(provider, { serverUrl: row.url, ...(row.scope ? { scope: row.scope } : {}), fetchFn: oauthFetch });
    if (r !== 'REDIRECT' || !provider.authorizationUrl) throw new Error('the authorization server issued tokens without a person signing in');
  } catch (e) {
    const clientSecret = (provider.clientInformation() as { client_secret?: string } | undefined)?.client_secret;
    return {
      ok: false,
      code: 'upstream_error',
      message: `servers.${row.id}: could not start OAuth with ${new URL(row.url).origin}: ${describe(e, [clientSecret])}`,
    };
  }
  const pending: OAuthPendingSecret = {
    codeVerifier: provider.codeVerifier(),
    clientInformation: provider.clientInformation() as OAuthPendingSecret['clientInformation'],
    discoveryState: provider.discoveryState() as OAuthPendingSecret['discoveryState'],
    subject: who.subject,
    tokenId: who.tokenId,
  };
  const expiresAt = Date.now() + OAUTH_PENDING_TTL_MS;
  await beginOAuth(env, team, {
    serverId: row.id,
    nonceSha256: await sha256(nonce),
    sealed: await sealSecret(key.value, JSON.stringify(pending), oauthPendingAad(team, row.id)),
    expiresAt,
  });
  // The SDK drops a stored client of another authorization server (its `issuer` stamp) and registers anew.
  const client = previous && provider.clientInformation()?.client_id === previous.client_id ? 'reused' : 'registered';
  return { ok: true, authorizationUrl: provider.authorizationUrl.href, expiresAt, client };
}

/**
 * The client this gateway registered at the authorization server for the team's last connection to `row`, when a new
 * authorization can use it again: registered for this callback URL, its secret (if it has one) not about to expire.
 * Each reconnect registering another client would leave the authorization server one more client per reconnect, and
 * some have an administrator approve each. `servers connect --new-client` registers anew all the same.
 */
async function previousClient(
  env: Env,
  key: CryptoKey,
  team: string,
  row: StoredRemoteServer,
  redirectUrl: string,
): Promise<StoredOAuthClientInformation | undefined> {
  const stored = await oauthConnection(env, team, row.id).catch(() => null);
  const connection = stored ? await openConnection(key, stored.sealed, team, row) : null;
  const info = connection?.clientInformation as { redirect_uris?: unknown; client_secret_expires_at?: unknown } | undefined;
  if (!info || !Array.isArray(info.redirect_uris) || !info.redirect_uris.includes(redirectUrl)) return undefined;
  const secretExpires = info.client_secret_expires_at;
  if (typeof secretExpires === 'number' && secretExpires > 0 && secretExpires * 1000 < Date.now() + OAUTH_PENDING_TTL_MS) return undefined;
  return connection!.clientInformation as StoredOAuthClientInformation;
}

export interface CallbackParams {
  state: string | undefined;
  code: string | undefined;
  iss: string | undefined;
  error: string | undefined;
}

/** Finishes an authorization from the callback's query: the tokens, sealed, become the server's connection. */
export async function finishConnect(
  env: Env,
  origin: string,
  q: CallbackParams,
): Promise<{ ok: true; team: string; server: string; subject: string; tokenId: string | null; scope: string | null } | Failure> {
  const key = await secretsKey(env);
  if (!key.ok) return { ok: false, code: 'config_error', message: key.error.message };
  const opened = q.state ? await openSecret(key.value, q.state, OAUTH_STATE_AAD) : null;
  const st = opened?.ok ? OAuthState.safeParse(safeJson(opened.value)) : null;
  if (!st?.success) return { ok: false, code: 'oauth_state_invalid', message: STATE_REFUSED };
  const { team, server } = st.data;
  // Taken (deleted) before anything else can fail: a state works once, whatever happens next.
  const pending = await takeOAuth(env, team, await sha256(st.data.nonce));
  if (!pending || pending.serverId !== server) return { ok: false, code: 'oauth_state_invalid', message: STATE_REFUSED };
  if (q.error) return { ok: false, code: 'upstream_error', message: `servers.${server}: the authorization server refused: ${q.error.slice(0, 200)}` };
  if (!q.code) return { ok: false, code: 'oauth_state_invalid', message: 'the callback carries no authorization code' };
  const row = await remoteServerRow(env, team, server);
  if (!row) return { ok: false, code: 'not_found', message: `servers.${server} was removed while it was being connected` };
  if (row.auth !== 'oauth') return { ok: false, code: 'conflict', message: `servers.${server} is no longer registered with auth "oauth"` };
  const p = await openSecret(key.value, pending.sealed, oauthPendingAad(team, server));
  const seed = p.ok ? OAuthPendingSecret.safeParse(safeJson(p.value)) : null;
  if (!seed?.success) return { ok: false, code: 'config_error', message: 'the started authorization does not open with GATEHOUSE_SECRETS_KEY; start again' };
  const provider = new GatewayOAuthProvider(`${origin}${OAUTH_CALLBACK_PATH}`, undefined, {
    clientInformation: seed.data.clientInformation as StoredOAuthClientInformation,
    discoveryState: seed.data.discoveryState as OAuthDiscoveryState,
    codeVerifier: seed.data.codeVerifier,
  });
  try {
    await auth(provider, { serverUrl: row.url, authorizationCode: q.code, ...(q.iss ? { iss: q.iss } : {}), fetchFn: oauthFetch });
  } catch (e) {
    // The token endpoint may repeat the request in its error: the code, the verifier and the client secret are cut out.
    const sent = [q.code, seed.data.codeVerifier, (seed.data.clientInformation as { client_secret?: string }).client_secret];
    const again =
      e instanceof OAuthError && (e.code === OAuthErrorCode.InvalidClient || e.code === OAuthErrorCode.UnauthorizedClient)
        ? `; if the authorization server no longer knows the client registered before, connect again with gatehouse servers connect ${server} --new-client`
        : '';
    return { ok: false, code: 'upstream_error', message: `servers.${server}: the token exchange failed: ${describe(e, sent)}${again}` };
  }
  const tokens = provider.tokens();
  if (!tokens) return { ok: false, code: 'upstream_error', message: `servers.${server}: the authorization server answered no tokens` };
  const connection: OAuthConnectionSecret = {
    tokens,
    clientInformation: seed.data.clientInformation,
    discoveryState: seed.data.discoveryState,
    ...(provider.resourceUrl() ? { resource: provider.resourceUrl() } : {}),
  };
  const scope = typeof tokens.scope === 'string' && tokens.scope ? tokens.scope : (row.scope ?? null);
  await saveOAuthConnection(env, team, {
    serverId: server,
    sealed: await sealSecret(key.value, JSON.stringify(connection), oauthConnectionAad(team, server, row.url)),
    expiresAt: expiresAtOf(tokens),
    scope,
    by: seed.data.subject,
  });
  return { ok: true, team, server, subject: seed.data.subject, tokenId: seed.data.tokenId, scope };
}

/** When an access token expires, from the `expires_in` the authorization server gave with it (null: it did not say). */
function expiresAtOf(tokens: { expires_in?: number | undefined }): number | null {
  return typeof tokens.expires_in === 'number' && Number.isFinite(tokens.expires_in) ? Date.now() + tokens.expires_in * 1000 : null;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function randomToken(): string {
  const b = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...b))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
}

async function sha256(text: string): Promise<string> {
  const d = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, '0')).join('');
}
