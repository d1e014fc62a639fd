/**
 * The gateway as an OAuth 2.1 authorization server for interactive MCP clients, on
 * `@cloudflare/workers-oauth-provider`: RFC 8414 metadata, Client ID Metadata Documents (an HTTPS URL as
 * `client_id`, fetched under the rules of client-metadata.ts) with dynamic client registration (RFC 7591)
 * as the fallback, authorization code + PKCE (S256 only), token and revocation endpoints. The consent page at
 * /authorize is ours (consent.ts); access tokens are opaque and checked by `validateOAuthToken`.
 *
 * The issuer and the one resource (the MCP URL) follow GATEHOUSE_ISSUER / GATEHOUSE_AUDIENCE, or
 * the request's origin when those are unset, exactly like Gatehouse's own JWTs.
 */
import { OAuthAuthorizationServer } from '@cloudflare/workers-oauth-provider';
import type { Env } from '../env.ts';
import { canonicalMcpUrl, gatehouseIssuer } from '../auth/config.ts';
import { OAUTH_SCOPES } from '../contracts/scopes.ts';

/** What an admin may grant an OAuth client: using the tools, not administering or serving as an agent. */
const AUTHORIZE_PATH = '/authorize';
export const TOKEN_PATH = '/oauth/token';
const REGISTER_PATH = '/oauth/register';
/** Access tokens live an hour; the client refreshes (refresh tokens rotate). */
const ACCESS_TOKEN_TTL_S = 3600;
/** A grant (and so its refresh tokens) lasts 30 days from the consent; then an admin consents again. */
export const REFRESH_TOKEN_TTL_S = 30 * 86400;

/** What a grant stores and every request with its token sees: the same claims an API token carries. */
export interface OAuthGrantProps {
  team: string;
  subject: string;
  scopes: string[];
}

export type OAuthEnv = Env & { OAUTH_KV: KVNamespace };

/**
 * Set (by `onError`) on the token endpoint's answer to a replayed authorization code: the library has
 * then ended the grant and its tokens, and the token route records that in D1 and removes the header.
 */
export const CODE_REPLAYED_HEADER = 'X-Gatehouse-Code-Replayed';

export function hasOAuthStore(env: Env): env is OAuthEnv {
  return (env as Partial<OAuthEnv>).OAUTH_KV !== undefined;
}

// One instance per (issuer, resource): the library fixes both at construction.
const servers = new Map<string, OAuthAuthorizationServer<OAuthEnv>>();

export function authorizationServer(req: Request, env: Env): OAuthAuthorizationServer<OAuthEnv> {
  const issuer = gatehouseIssuer(req, env);
  const resource = canonicalMcpUrl(req, env);
  const key = `${issuer}\n${resource}`;
  let s = servers.get(key);
  if (!s) {
    s = new OAuthAuthorizationServer<OAuthEnv>({
      issuer,
      resources: [resource],
      defaultResource: resource,
      authorizeEndpoint: AUTHORIZE_PATH,
      tokenEndpoint: TOKEN_PATH,
      clientRegistrationEndpoint: REGISTER_PATH,
      // Advertised as client_id_metadata_document_supported (needs the global_fetch_strictly_public flag).
      clientIdMetadataDocumentEnabled: true,
      scopesSupported: [...OAUTH_SCOPES],
      accessTokenTTL: ACCESS_TOKEN_TTL_S,
      refreshTokenTTL: REFRESH_TOKEN_TTL_S,
      // The library's own error answer, marked when it is a replayed code (its reason is not in the body).
      onError: ({ code, description, status, headers, internal }) =>
        internal?.reason === 'code_replayed'
          ? new Response(JSON.stringify({ error: code, error_description: description }), {
              status,
              headers: { ...headers, 'Content-Type': 'application/json', [CODE_REPLAYED_HEADER]: '1' },
            })
          : undefined,
    });
    servers.set(key, s);
  }
  return s;
}
