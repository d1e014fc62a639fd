/**
 * `npm run idp`: a development OpenID Connect provider on 127.0.0.1 for trying member sign-in with `npm start`.
 * It is `oidc-provider` (a certified implementation) with one confidential client for the local gateway and one
 * user, owner@gatehouse.test / gatehouse, signing in on a plain HTML form. Keys and state live in memory: every
 * restart is a fresh provider. Never expose it: the password is in the docs. See docs/members.md#trying-it-locally.
 *
 *   GATEHOUSE_IDP_PORT  port to listen on (default 8788)
 *   GATEHOUSE_URL       the gateway it signs in to (default http://127.0.0.1:8787; its callback is registered)
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import Provider from 'oidc-provider';

const HOST = '127.0.0.1';
const PORT = Number(process.env.GATEHOUSE_IDP_PORT ?? 8788);
const GATEWAY = (process.env.GATEHOUSE_URL ?? 'http://127.0.0.1:8787').replace(/\/+$/, '');
const ISSUER = `http://${HOST}:${PORT}`;
/** The client `npm start` is configured with; fixed so the printed variables work across restarts. */
const CLIENT_ID = 'gatehouse-dev';
const CLIENT_SECRET = 'gatehouse-dev-secret';
/** The one documented user (docs/members.md). */
const USER = { sub: 'dev-owner', email: 'owner@gatehouse.test', name: 'Dev Owner', password: 'gatehouse' };

const provider = new Provider(ISSUER, {
  clients: [
    {
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      redirect_uris: [`${GATEWAY}/dashboard/auth/callback`],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
  ],
  findAccount: (_ctx: unknown, id: string) =>
    id === USER.sub ? { accountId: id, claims: () => ({ sub: id, email: USER.email, email_verified: true, name: USER.name }) } : undefined,
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  pkce: { required: () => true },
  // Our own form below instead of the library's development screens, which accept any name without a password.
  features: { devInteractions: { enabled: false } },
  interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
  cookies: { keys: [crypto.randomUUID()] },
});

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The sign-in page: data only (no script), posting back to the interaction's own path. */
function loginPage(uid: string, error: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Gatehouse dev sign-in</title></head><body>
<h1>Gatehouse development identity provider</h1>
<p>For local use only. The one user is <code>${escapeHtml(USER.email)}</code>, password <code>${escapeHtml(USER.password)}</code>.</p>
${error ? `<p role="alert" id="error">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/interaction/${escapeHtml(uid)}">
<label>Email <input name="email" type="email" autocomplete="username" required></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button type="submit" id="sign-in">Sign in</button>
</form></body></html>`;
}

async function formOf(req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > 16_384) throw new Error('the sign-in form is larger than 16 KiB');
    chunks.push(c as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

async function interaction(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const details = await provider.interactionDetails(req, res);
  const html = (status: number, error = '') =>
    void res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' }).end(loginPage(details.uid, error));
  if (req.method !== 'POST') return html(200);
  const form = await formOf(req);
  if (form.get('email')?.trim().toLowerCase() !== USER.email || form.get('password') !== USER.password) {
    return html(401, `Wrong email or password: this provider knows only ${USER.email} with password ${USER.password}.`);
  }
  const grant = new provider.Grant({ accountId: USER.sub, clientId: CLIENT_ID });
  grant.addOIDCScope('openid email profile');
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { login: { accountId: USER.sub }, consent: { grantId } }, { mergeWithLastSubmission: false });
}

const server = createServer((req, res) => {
  if (req.url?.startsWith('/interaction/')) {
    interaction(req, res).catch((e: Error) => {
      if (!res.headersSent) res.writeHead(400, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(`sign-in failed: ${e.message}; start again from the gateway's dashboard`);
    });
    return;
  }
  provider.callback()(req, res);
});

server.listen(PORT, HOST, () => {
  process.stdout.write(
    `Development OpenID provider at ${ISSUER} (user ${USER.email}, password ${USER.password}); it signs in to ${GATEWAY}.\n` +
      `Start the gateway with it:\n` +
      `  OIDC_ISSUER=${ISSUER} OIDC_CLIENT_ID=${CLIENT_ID} OIDC_CLIENT_SECRET=${CLIENT_SECRET} npm start\n` +
      `then invite the user as the first owner: npx gatehouse members invite ${USER.email} --role owner\n`,
  );
});
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => server.close(() => process.exit(0)));
