/**
 * A remote MCP server protected by OAuth, for tests, all on 127.0.0.1, built from the MCP SDK's own
 * pieces (`@modelcontextprotocol/sdk`: `mcpAuthRouter`, `requireBearerAuth`, the Streamable HTTP server):
 *
 *   - the resource server: `POST /mcp` (stateless Streamable HTTP; tools `echo {text}` and `add {a, b}`)
 *     behind a bearer token, refused with 401 and `WWW-Authenticate: Bearer …, resource_metadata="…"`
 *     when the token is missing, unknown, revoked, expired or issued for another resource; and its
 *     protected-resource metadata (RFC 9728) naming the authorization server;
 *   - the authorization server, on its own port: metadata (RFC 8414), dynamic client registration
 *     (RFC 7591; it hands every client a secret and `client_secret_post`, so a client secret exists to
 *     be leaked), `/authorize` that approves at once (a 302 to the redirect URI with `code` and `state`:
 *     a test follows it with `fetch(url, { redirect: 'manual' })`), and `/token` for the authorization
 *     code (PKCE S256 checked by the SDK's handler; a code works once, for its client and redirect URI)
 *     and refresh-token grants (rotated on each use);
 *   - a trap on a third port: where the `redirect` setting sends a request instead of answering it,
 *     so a test can see that no client followed.
 *
 * `requests` records every request any of the three saw (which server, method, path, query, the
 * Authorization header, the parsed body, the status and Location answered). `issued` keeps every
 * credential handed out, for tests that check none of them shows up anywhere else. `settings` can be
 * changed between calls: the access tokens' lifetime (real and announced), a refused or slow refresh,
 * redirects, errors that repeat the request.
 *
 *   const remote = await startOAuthMcpServer();
 *   remote.url                       // http://127.0.0.1:PORT/mcp
 *   remote.settings.refuseRefresh = true;
 */
import { randomBytes } from 'node:crypto';
import { createServer, type RequestListener, type Server } from 'node:http';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidGrantError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { OAuthClientInformationFull, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { mcpServer } from './remote-mcp-server.ts';

/** Which of the three listeners saw a request. */
type Listener = 'resource' | 'authorization' | 'trap';

interface SeenRequest {
  server: Listener;
  method: string;
  path: string;
  query: Record<string, string>;
  authorization: string | undefined;
  /** The parsed body (form or JSON), once the request was answered. */
  body: Record<string, unknown> | undefined;
  status: number | undefined;
  location: string | undefined;
  wwwAuthenticate: string | undefined;
}

/** Where the `redirect` setting answers 307 to the trap instead of serving. */
export type RedirectPoint = 'resource-metadata' | 'authorization-metadata' | 'register' | 'token' | 'mcp';

interface OAuthMcpSettings {
  /** How long a new access token is good for at the resource server. */
  accessTtlSeconds: number;
  /** The `expires_in` given with it (default: the real lifetime); a lie lets a test make the client send an expired token. */
  announcedTtlSeconds: number | undefined;
  /** Refuse every refresh grant with `invalid_grant`. */
  refuseRefresh: boolean;
  /** Hold a successful refresh's answer this long (its refresh token is spent at once: a concurrent refresh is refused first). */
  refreshDelayMs: number;
  /** Answer a 500 whose body repeats what was sent (the token request's form, the MCP request's Authorization header). */
  echoOnError: Set<'token' | 'mcp'>;
  redirect: Set<RedirectPoint>;
}

export interface OAuthMcpServer {
  /** The MCP endpoint (the resource). */
  url: string;
  /** The authorization server's issuer. */
  issuer: string;
  /** The trap's origin: nothing should ever reach it. */
  trap: string;
  requests: SeenRequest[];
  issued: { accessTokens: string[]; refreshTokens: string[]; clientSecrets: string[]; codes: string[]; clientIds: string[] };
  settings: OAuthMcpSettings;
  /** Requests one listener saw, optionally only from index `from` on. */
  seen(server: Listener, from?: number): SeenRequest[];
  /** Token requests (`/token`) of a grant type, from index `from` on. */
  grants(type: 'authorization_code' | 'refresh_token', from?: number): SeenRequest[];
  /** Every secret handed out or sent: tokens, client secrets, PKCE verifiers the token endpoint received. */
  secrets(): string[];
  /** Makes every access token issued so far expired at the resource server (the client still thinks it fresh). */
  expireAccessTokens(): void;
  /** The authorization server forgets every client registered so far (an expired or deleted registration). */
  forgetClients(): void;
  reset(): void;
  close(): Promise<void>;
}

const SCOPES = ['read', 'write'];

interface Grant {
  clientId: string;
  scopes: string[];
  resource: string | undefined;
}

const secret = (prefix: string) => `${prefix}-${randomBytes(18).toString('hex')}`;

function listen(handler: RequestListener): Promise<{ server: Server; origin: string }> {
  const server = createServer(handler);
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r({ server, origin: `http://127.0.0.1:${(server.address() as { port: number }).port}` })));
}

const DEFAULT_SETTINGS = (): OAuthMcpSettings => ({
  accessTtlSeconds: 3600,
  announcedTtlSeconds: undefined,
  refuseRefresh: false,
  refreshDelayMs: 0,
  echoOnError: new Set(),
  redirect: new Set(),
});

export async function startOAuthMcpServer(): Promise<OAuthMcpServer> {
  const requests: SeenRequest[] = [];
  const issued: OAuthMcpServer['issued'] = { accessTokens: [], refreshTokens: [], clientSecrets: [], codes: [], clientIds: [] };
  const settings = DEFAULT_SETTINGS();
  const clients = new Map<string, OAuthClientInformationFull>();
  const codes = new Map<string, Grant & { challenge: string; redirectUri: string }>();
  const access = new Map<string, Grant & { expiresAt: number }>();
  const refresh = new Map<string, Grant>();

  // Requests are recorded before anything answers them, the body once a parser has read it.
  const record = (server: Listener) => (req: any, res: any, next: () => void) => {
    const seen: SeenRequest = {
      server,
      method: req.method,
      path: req.path ?? new URL(req.url, 'http://x').pathname,
      query: { ...(req.query ?? {}) },
      authorization: req.headers.authorization,
      body: undefined,
      status: undefined,
      location: undefined,
      wwwAuthenticate: undefined,
    };
    requests.push(seen);
    res.on('finish', () => {
      seen.status = res.statusCode;
      seen.location = res.getHeader('location');
      seen.wwwAuthenticate = res.getHeader('www-authenticate');
      seen.body = req.body && typeof req.body === 'object' ? { ...req.body } : undefined;
    });
    next();
  };

  const trap = await listen((req, res) => {
    requests.push({
      server: 'trap',
      method: req.method ?? '',
      path: new URL(req.url ?? '/', 'http://x').pathname,
      query: Object.fromEntries(new URL(req.url ?? '/', 'http://x').searchParams),
      authorization: req.headers.authorization,
      body: undefined,
      status: 200,
      location: undefined,
      wwwAuthenticate: undefined,
    });
    req.resume();
    res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
  });

  const redirectAt = (point: RedirectPoint) => (req: any, res: any, next: () => void) => {
    if (settings.redirect.has(point)) res.redirect(307, `${trap.origin}${req.originalUrl}`);
    else next();
  };

  const issue = (g: Grant): OAuthTokens => {
    const accessToken = secret('at');
    const refreshToken = secret('rt');
    issued.accessTokens.push(accessToken);
    issued.refreshTokens.push(refreshToken);
    access.set(accessToken, { ...g, expiresAt: Math.floor(Date.now() / 1000) + settings.accessTtlSeconds });
    refresh.set(refreshToken, g);
    return {
      access_token: accessToken,
      token_type: 'bearer',
      expires_in: settings.announcedTtlSeconds ?? settings.accessTtlSeconds,
      refresh_token: refreshToken,
      scope: g.scopes.join(' '),
    };
  };

  const clientsStore: OAuthRegisteredClientsStore = {
    getClient: (id) => clients.get(id),
    registerClient: (c) => {
      // A confidential client whatever it asked for: its secret is one more credential that must not leak.
      const full = {
        ...c,
        // The SDK's handler generated the id; the store's type leaves it out.
        client_id: (c as { client_id?: string }).client_id ?? secret('client'),
        client_secret: secret('cs'),
        client_secret_expires_at: 0,
        token_endpoint_auth_method: 'client_secret_post',
      } as OAuthClientInformationFull;
      clients.set(full.client_id, full);
      issued.clientIds.push(full.client_id);
      issued.clientSecrets.push(full.client_secret!);
      return full;
    },
  };

  const provider: OAuthServerProvider = {
    clientsStore,
    async authorize(client, params: AuthorizationParams, res) {
      const code = secret('code');
      issued.codes.push(code);
      codes.set(code, {
        clientId: client.client_id,
        scopes: params.scopes?.length ? params.scopes : SCOPES,
        resource: params.resource?.href,
        challenge: params.codeChallenge,
        redirectUri: params.redirectUri,
      });
      const to = new URL(params.redirectUri);
      to.searchParams.set('code', code);
      if (params.state !== undefined) to.searchParams.set('state', params.state);
      res.redirect(302, to.href);
    },
    async challengeForAuthorizationCode(client, code) {
      const c = codes.get(code);
      if (!c || c.clientId !== client.client_id) throw new InvalidGrantError('unknown authorization code');
      return c.challenge;
    },
    async exchangeAuthorizationCode(client, code, _verifier, redirectUri, resource) {
      const c = codes.get(code);
      if (!c || c.clientId !== client.client_id) throw new InvalidGrantError('unknown authorization code');
      codes.delete(code);
      if (redirectUri !== c.redirectUri) throw new InvalidGrantError('redirect_uri differs from the authorization request');
      return issue({ clientId: c.clientId, scopes: c.scopes, resource: resource?.href ?? c.resource });
    },
    async exchangeRefreshToken(client, refreshToken, scopes, resource) {
      const g = refresh.get(refreshToken);
      if (settings.refuseRefresh || !g || g.clientId !== client.client_id) throw new InvalidGrantError('refresh token refused');
      refresh.delete(refreshToken);
      if (settings.refreshDelayMs) await new Promise((r) => setTimeout(r, settings.refreshDelayMs));
      return issue({ clientId: g.clientId, scopes: scopes?.length ? scopes : g.scopes, resource: resource?.href ?? g.resource });
    },
    async verifyAccessToken(token): Promise<AuthInfo> {
      const t = access.get(token);
      if (!t) throw new InvalidTokenError('unknown access token');
      return { token, clientId: t.clientId, scopes: t.scopes, expiresAt: t.expiresAt, ...(t.resource ? { resource: new URL(t.resource) } : {}) };
    },
  };

  // The authorization server. Its address is known only once it listens: the router is mounted then.
  const as = createMcpExpressApp();
  as.use(record('authorization'));
  as.use('/.well-known/oauth-authorization-server', redirectAt('authorization-metadata'));
  as.use('/register', redirectAt('register'));
  as.use('/token', redirectAt('token'));
  as.use('/token', (req: any, res: any, next: () => void) => {
    if (!settings.echoOnError.has('token')) return next();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () =>
      res
        .status(500)
        .type('text/plain')
        .send(`token endpoint failed on: ${Buffer.concat(chunks).toString('utf8')}`),
    );
  });
  let router: ((req: any, res: any, next: () => void) => void) | undefined;
  as.use((req: any, res: any, next: () => void) => (router ? router(req, res, next) : next()));
  const asListening = await listen(as);

  // The resource server.
  const rs = createMcpExpressApp();
  const rsListening = await listen(rs);
  const url = `${rsListening.origin}/mcp`;
  const metadataUrl = `${rsListening.origin}/.well-known/oauth-protected-resource/mcp`;
  const issuer = `${asListening.origin}/`;
  router = mcpAuthRouter({
    provider,
    issuerUrl: new URL(issuer),
    scopesSupported: SCOPES,
    resourceServerUrl: new URL(url),
    authorizationOptions: { rateLimit: false },
    tokenOptions: { rateLimit: false },
    clientRegistrationOptions: { rateLimit: false },
  });
  rs.use(record('resource'));
  rs.get('/.well-known/oauth-protected-resource/mcp', redirectAt('resource-metadata'), (_req: any, res: any) =>
    res.json({ resource: url, authorization_servers: [issuer], scopes_supported: SCOPES, bearer_methods_supported: ['header'] }),
  );
  rs.use(
    '/mcp',
    redirectAt('mcp'),
    requireBearerAuth({ verifier: provider, resourceMetadataUrl: metadataUrl, expectedResource: new URL(url) }),
    async (req: any, res: any) => {
      if (settings.echoOnError.has('mcp')) return res.status(500).type('text/plain').send(`resource failed for: ${req.headers.authorization}`);
      if (req.method !== 'POST') return res.status(405).end();
      // Stateless: a server and transport per request, as the SDK's stateless example does.
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      const s = mcpServer('oauth-remote-test');
      res.on('close', () => {
        void transport.close();
        void s.close();
      });
      await s.connect(transport);
      await transport.handleRequest(req, res, req.body);
    },
  );

  const servers = [trap.server, asListening.server, rsListening.server];
  return {
    url,
    issuer,
    trap: trap.origin,
    requests,
    issued,
    settings,
    seen: (server, from = 0) => requests.slice(from).filter((r) => r.server === server),
    grants: (type, from = 0) => requests.slice(from).filter((r) => r.server === 'authorization' && r.path === '/token' && r.body?.grant_type === type),
    secrets: () => [
      ...issued.accessTokens,
      ...issued.refreshTokens,
      ...issued.clientSecrets,
      ...requests.flatMap((r) => (typeof r.body?.code_verifier === 'string' ? [r.body.code_verifier] : [])),
    ],
    expireAccessTokens() {
      for (const t of access.values()) t.expiresAt = Math.floor(Date.now() / 1000) - 1;
    },
    forgetClients() {
      clients.clear();
    },
    reset() {
      Object.assign(settings, DEFAULT_SETTINGS());
    },
    close: async () => {
      for (const s of servers) s.closeAllConnections();
      await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
    },
  };
}
