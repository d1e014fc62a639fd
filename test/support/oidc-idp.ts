/**
 * A real OpenID Connect provider on 127.0.0.1 for tests: `oidc-provider` (a certified
 * implementation) with one confidential client, PKCE required, and accounts the test names. Its
 * login and consent screens are answered by the test itself: `nextLogin` says who signs in at the
 * next interaction, which grants the requested openid/email/profile scopes.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import Provider from 'oidc-provider';

export interface OidcAccount {
  sub: string;
  email: string;
  emailVerified?: boolean;
  name?: string;
}

export interface OidcIdp {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Registers the gateway's callback URL (known once the gateway runs). */
  allowRedirect(uri: string): void;
  /** The account that signs in at the next interaction. */
  nextLogin(a: OidcAccount): void;
  close(): Promise<void>;
}

export async function startOidcIdp(): Promise<OidcIdp> {
  const accounts = new Map<string, OidcAccount>();
  let next: OidcAccount | null = null;
  let provider: Provider | null = null;
  const redirects: string[] = [];
  const clientId = 'gatehouse-test';
  const clientSecret = `secret-${crypto.randomUUID()}`;
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const p = provider;
    if (!p) return void res.writeHead(503).end('no client registered yet (allowRedirect)');
    try {
      if (req.url?.startsWith('/interaction/')) {
        const details = await p.interactionDetails(req, res);
        if (!next) throw new Error('the test named no account to sign in (nextLogin)');
        const a = next;
        accounts.set(a.sub, a);
        const grant = new p.Grant({ accountId: a.sub, clientId });
        grant.addOIDCScope('openid email profile');
        const grantId = await grant.save();
        await p.interactionFinished(req, res, { login: { accountId: a.sub }, consent: { grantId } }, { mergeWithLastSubmission: false });
        void details;
        return;
      }
      p.callback()(req, res);
    } catch (e) {
      res.writeHead(500, { 'Content-Type': 'text/plain' }).end(String((e as Error).stack));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    issuer,
    clientId,
    clientSecret,
    allowRedirect(uri) {
      redirects.push(uri);
      provider = new Provider(issuer, {
        clients: [
          { client_id: clientId, client_secret: clientSecret, redirect_uris: redirects, grant_types: ['authorization_code'], response_types: ['code'] },
        ],
        findAccount: (_ctx: unknown, id: string) => {
          const a = accounts.get(id);
          return a ? { accountId: id, claims: () => ({ sub: id, email: a.email, email_verified: a.emailVerified ?? true, name: a.name }) } : undefined;
        },
        claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
        pkce: { required: () => true },
        features: { devInteractions: { enabled: false } },
        interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
        cookies: { keys: [crypto.randomUUID()] },
      });
    },
    nextLogin: (a) => void (next = a),
    close: () => new Promise((r) => server.close(() => r())),
  };
}
