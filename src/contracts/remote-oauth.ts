/**
 * Remote MCP servers that require OAuth: the gateway is their OAuth client. An admin connects the team
 * once (`POST /admin/v1/servers/<id>/connect` → the authorization URL; the server's authorization server
 * sends the browser back to CALLBACK_PATH); the tokens are sealed (src/platform/secret-box.ts) and kept in
 * the team's object, refreshed by the gateway, and never shown to admins, scripts or the audit log.
 * The shapes both sides of that flow share are defined here.
 */
import { z } from 'zod';

/** Where the authorization server sends the admin's browser back: one path for every team and server. */
export const OAUTH_CALLBACK_PATH = '/oauth/servers/callback';

/** How long an authorization started by an admin can be finished: a person signs in and consents in this time. */
export const OAUTH_PENDING_TTL_MS = 10 * 60_000;

/** Authorizations a team may have open at once (each admin click starts one); the oldest give way. */
export const OAUTH_PENDING_MAX = 20;

/**
 * An access token this close to its expiry is refreshed before use rather than sent and refused: a call
 * that takes a while must not run out of token halfway.
 */
export const OAUTH_REFRESH_MARGIN_MS = 60_000;

/** A connection's state as admins see it. `expired`: the last refresh was refused; an admin reconnects. */
type OAuthConnectionState = 'not_connected' | 'connected' | 'expired';

/** What admins see of a server's OAuth connection: never a token, a client secret or a verifier. */
export interface OAuthConnectionView {
  state: OAuthConnectionState;
  /** When the current access token expires (ISO), if the authorization server said. */
  expiresAt: string | null;
  scopes: string[];
  connectedAt: string | null;
  connectedBy: string | null;
}

export const NOT_CONNECTED: OAuthConnectionView = { state: 'not_connected', expiresAt: null, scopes: [], connectedAt: null, connectedBy: null };

/** The SDK's token and client shapes, kept as they came: only their presence is checked here. */
const Json = z.record(z.string(), z.unknown());
const Tokens = z.object({ access_token: z.string().min(1), token_type: z.string().optional(), refresh_token: z.string().optional() }).passthrough();
const ClientInformation = z.object({ client_id: z.string().min(1) }).passthrough();
const DiscoveryState = z.object({ authorizationServerUrl: z.string().min(1) }).passthrough();

/** A live connection, sealed as one value: the tokens and what a refresh needs (the client, the discovered metadata). */
export const OAuthConnectionSecret = z.object({
  tokens: Tokens,
  clientInformation: ClientInformation,
  discoveryState: DiscoveryState,
  resource: z.string().optional(),
});
export type OAuthConnectionSecret = z.infer<typeof OAuthConnectionSecret>;

/** An authorization an admin started, sealed: finishing it needs the PKCE verifier and the registered client. */
export const OAuthPendingSecret = z.object({
  codeVerifier: z.string().min(1),
  clientInformation: ClientInformation,
  discoveryState: DiscoveryState,
  subject: z.string(),
  tokenId: z.string().nullable(),
  extra: Json.optional(),
});
export type OAuthPendingSecret = z.infer<typeof OAuthPendingSecret>;

/**
 * `POST /servers/:id/connect`'s body (optional): `newClient` registers a new OAuth client at the authorization server
 * instead of using again the one the team's last connection registered (one it no longer accepts, say).
 */
export const ServerConnectInput = z.object({ newClient: z.boolean().optional() }).strict();
export type ServerConnectInput = z.infer<typeof ServerConnectInput>;

/** The OAuth `state` parameter, sealed by the gateway: which team and server started it, and the one-time nonce. */
export const OAuthState = z.object({ team: z.string().min(1), server: z.string().min(1), nonce: z.string().min(16) });
export type OAuthState = z.infer<typeof OAuthState>;

/**
 * What seals a connection: the team, the server id and its URL. A row moved to another team or server, or a
 * server re-registered at another URL, does not open, so a token never reaches a server it was not issued for.
 */
export function oauthConnectionAad(team: string, id: string, url: string): string {
  return `gatehouse:remote-mcp-oauth:${team}:${id}:${url}`;
}

export function oauthPendingAad(team: string, id: string): string {
  return `gatehouse:remote-mcp-oauth-pending:${team}:${id}`;
}

export const OAUTH_STATE_AAD = 'gatehouse:remote-mcp-oauth-state';

/** The one message a script sees when a server's connection cannot be used (the wording). */
export function oauthReconnectMessage(id: string, state: 'not_connected' | 'expired'): string {
  return state === 'expired'
    ? `servers.${id}: OAuth connection expired; an admin reconnects with gatehouse servers connect ${id}`
    : `servers.${id}: not connected to its OAuth server yet; an admin connects with gatehouse servers connect ${id}`;
}
