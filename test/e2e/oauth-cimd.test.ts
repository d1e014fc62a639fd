/**
 * Client ID Metadata Documents (MCP authorization 2025-11-25): an OAuth client whose `client_id` is an
 * HTTPS URL serving its metadata, tried before dynamic registration. The flow is driven by the official
 * SDK v2 client's OAuth support through discovery (401 → protected-resource metadata → authorization
 * server metadata → metadata-document client → consent in Debian's Chromium → code + PKCE → token → a
 * tool call → refresh); the consent page names the host that published the document. A client without a document
 * registers instead (the fallback), and the consent page marks its name unverified.
 *
 * The fetch is replaced in this test: the OAuth provider fetches the document with the Worker's global
 * fetch and offers no test switch (no way to trust a test CA for a loopback HTTPS server, which the
 * public-address rule would refuse anyway), so the gateway runs with its outbound network handed to
 * `serve` below (test/support/outbound-gateway.ts). Everything in the Worker runs as deployed.
 *
 * Attacks, each refused with a message that says what is wrong: a client_id URL on http://, on a
 * loopback, private or link-local address or a local name; a document that redirects; an oversized
 * document; a document whose client_id is not its URL; a redirect_uri the document does not list.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport, UnauthorizedError, type OAuthClientProvider, type OAuthDiscoveryState } from '@modelcontextprotocol/client';
import type { Browser, Page } from 'puppeteer-core';
import { HAVE_CHROMIUM, launchChromium, requireChromium } from '../support/chromium.ts';
import { startOutboundGateway, type OutboundGateway } from '../support/outbound-gateway.ts';
import { ROOT } from './harness.ts';

requireChromium('OAuth metadata-document browser tests');
const SHOTS = join(ROOT, 'test/screenshots');
const TEAM = 'cimd';
const APP = 'https://agent.example/oauth/client.json';

let gw: OutboundGateway;
let callback: Server;
let callbackUrl = '';
const arrivals: URL[] = [];
/** Every URL the Worker fetched, in order. */
const fetched: string[] = [];
/** What `serve` answers per URL (set by each test). */
const documents = new Map<string, () => Response>();

const json = (body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { headers: { 'Content-Type': 'application/json', ...headers } });
const clientDocument = (id: string, redirectUris = [callbackUrl]) => ({
  client_id: id,
  client_name: 'Example Agent',
  redirect_uris: redirectUris,
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
});

function serve(req: Request): Response {
  fetched.push(req.url);
  const answer = documents.get(req.url);
  return answer ? answer() : new Response('not found', { status: 404 });
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  callback = createServer((req, res) => {
    arrivals.push(new URL(req.url!, callbackUrl));
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><title>signed in</title><p id="done">You can close this window.</p>');
  });
  await new Promise<void>((r) => callback.listen(0, '127.0.0.1', r));
  callbackUrl = `http://127.0.0.1:${(callback.address() as { port: number }).port}/callback`;
  gw = await startOutboundGateway(serve);
}, 180_000);

afterAll(async () => {
  await gw?.stop();
  await new Promise<void>((r) => (callback ? callback.close(() => r()) : r()));
});

/** GET /authorize as a browser would open it; the page's text (an error page or the consent page). */
async function authorize(clientId: string, redirectUri = callbackUrl): Promise<{ status: number; text: string }> {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    state: 's1',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
    resource: gw.mcpUrl,
  });
  const r = await fetch(`${gw.url}/authorize?${q}`, { redirect: 'manual' });
  return {
    status: r.status,
    text: (await r.text())
      .replace(/<[^>]+>/g, '')
      .replace(/&#x2F;|&#47;/g, '/')
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'"),
  };
}

describe('discovery', () => {
  it('advertises metadata-document clients and keeps registration as the fallback', async () => {
    const meta = (await (await fetch(`${gw.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(meta.client_id_metadata_document_supported).toBe(true);
    expect(meta.registration_endpoint).toBe(`${gw.url}/oauth/register`);
    const reg = await fetch(`${gw.url}/oauth/register`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ client_name: 'registered', redirect_uris: [callbackUrl], token_endpoint_auth_method: 'none' }),
    });
    expect(reg.status).toBe(201);
  });
});

describe('refused metadata-document client ids', () => {
  it.each([
    ['http://agent.example/oauth/client.json', /not a registered client.*not an https URL/],
    ['https://127.0.0.1/oauth/client.json', /loopback address \(127\.0\.0\.1\); only public Internet addresses are fetched/],
    ['https://10.1.2.3/oauth/client.json', /private address \(10\.1\.2\.3\)/],
    ['https://169.254.169.254/latest/meta-data.json', /linkLocal address \(169\.254\.169\.254\)/],
    ['https://[::ffff:127.0.0.1]/oauth/client.json', /loopback address/],
    ['https://[fd00::1]/oauth/client.json', /uniqueLocal address/],
    ['https://localhost/oauth/client.json', /not on the public Internet \(localhost\)/],
    ['https://metadata.google.internal/client.json', /not on the public Internet/],
  ])('%s is refused before anything is fetched', async (clientId, why) => {
    const before = fetched.length;
    const r = await authorize(clientId);
    expect(r.status).toBe(400);
    expect(r.text).toMatch(why);
    expect(fetched.slice(before)).toEqual([]);
  });

  it('a document that redirects is refused and the redirect is not followed', async () => {
    const id = 'https://agent.example/moved/client.json';
    documents.set(id, () => new Response(null, { status: 302, headers: { Location: 'https://10.0.0.7/client.json' } }));
    const before = fetched.length;
    const r = await authorize(id);
    expect(r.status).toBe(400);
    expect(r.text).toContain(`${id} answered a redirect (HTTP 302 to https://10.0.0.7/client.json)`);
    expect(r.text).toContain('redirects are not followed');
    expect(fetched.slice(before).every((u) => u === id)).toBe(true);
  });

  it('an oversized document is refused', async () => {
    const id = 'https://agent.example/big/client.json';
    documents.set(id, () => json({ ...clientDocument(id), padding: 'x'.repeat(8 * 1024) }));
    const r = await authorize(id);
    expect(r.status).toBe(400);
    expect(r.text).toMatch(/metadata document https:\/\/agent\.example\/big\/client\.json cannot be used: .*size limit/);
  });

  it('a document whose client_id is not its own URL is refused', async () => {
    const id = 'https://agent.example/impostor/client.json';
    documents.set(id, () => json(clientDocument('https://trusted.example/oauth/client.json')));
    const r = await authorize(id);
    expect(r.status).toBe(400);
    expect(r.text).toContain('client_id "https://trusted.example/oauth/client.json" does not match metadata URL');
  });

  it('a redirect_uri the document does not list is refused, and nothing is sent there', async () => {
    const id = 'https://agent.example/strict/client.json';
    documents.set(id, () => json(clientDocument(id)));
    const r = await authorize(id, 'https://attacker.example/steal');
    expect(r.status).toBe(400);
    expect(r.text).toContain(`redirect_uri https://attacker.example/steal is not one of the redirect_uris of the client's metadata document ${id}`);
  });
});

/** The SDK's OAuthClientProvider as a CLI client keeps it: a metadata-document client id, or none (it registers). */
class SdkClient implements OAuthClientProvider {
  info?: { client_id: string };
  saved?: { access_token: string; refresh_token?: string; token_type: string };
  verifier = '';
  discovery?: OAuthDiscoveryState;
  authorizationUrl?: URL;
  registered = false;
  readonly clientMetadataUrl?: string;
  constructor(metadataUrl?: string) {
    this.clientMetadataUrl = metadataUrl;
  }
  get redirectUrl() {
    return callbackUrl;
  }
  get clientMetadata() {
    return {
      client_name: 'Example Agent',
      redirect_uris: [callbackUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    return crypto.randomUUID();
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(i: { client_id: string }) {
    this.info = i;
    this.registered ||= i.client_id !== this.clientMetadataUrl;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(t: { access_token: string; refresh_token?: string; token_type: string }) {
    this.saved = t;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(d: OAuthDiscoveryState) {
    this.discovery = d;
  }
  discoveryState() {
    return this.discovery;
  }
}

describe.skipIf(!HAVE_CHROMIUM)('the SDK v2 client signs in with a metadata document, consent in Chromium', () => {
  let browser: Browser;
  let profile: string;

  beforeAll(async () => {
    profile = mkdtempSync(join(tmpdir(), 'gatehouse-chromium-'));
    browser = await launchChromium(profile);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it('401 → discovery → metadata document → consent naming its host → code + PKCE → token → call → refresh', async () => {
    documents.set(APP, () => json(clientDocument(APP)));
    const provider = new SdkClient(APP);
    const transport = new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider });
    await expect(new Client({ name: 'cimd-test', version: '1.0.0' }).connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
    const authUrl = provider.authorizationUrl!;
    expect(authUrl.searchParams.get('client_id')).toBe(APP);
    expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(provider.registered).toBe(false);

    const page: Page = await browser.newPage();
    await page.goto(authUrl.href);
    const text = (sel: string) => page.$eval(sel, (e) => (e as unknown as { textContent: string }).textContent);
    expect(await text('#client-domain')).toBe('agent.example');
    expect(await text('#client-id')).toBe(APP);
    expect(await text('#client-name')).toBe('Example Agent');
    await page.type('#admin_token', await gw.token({ team: TEAM, scopes: ['admin'], subject: 'admin@cimd' }));
    await page.type('#team', TEAM);
    await page.screenshot({ path: join(SHOTS, 'oauth-consent-metadata-document.png'), fullPage: true });
    await Promise.all([page.waitForNavigation(), page.click('#approve')]);
    const back = arrivals.find((u) => u.searchParams.get('state') === authUrl.searchParams.get('state'));
    expect(back?.searchParams.get('code')).toBeTruthy();
    await page.close();

    await transport.finishAuth(back!.searchParams);
    const first = provider.saved!;
    expect(first.refresh_token).toBeTruthy();
    const client = new Client({ name: 'cimd-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }));
    const runtimes = await client.callTool({ name: 'list_runtimes', arguments: {} });
    expect(runtimes.isError).toBeFalsy();
    await client.close();

    // An access token the gateway no longer accepts: the client refreshes with its refresh token and retries.
    provider.saved = { ...first, access_token: `${first.access_token.split(':').slice(0, 2).join(':')}:expired` };
    const again = new Client({ name: 'cimd-test', version: '1.0.0' });
    await again.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }));
    expect((await again.callTool({ name: 'list_runtimes', arguments: {} })).isError).toBeFalsy();
    expect(provider.saved!.access_token).not.toBe(first.access_token);
    expect(provider.saved!.refresh_token).not.toBe(first.refresh_token);
    await again.close();
    expect(provider.registered).toBe(false);
  }, 120_000);

  it('a client without a metadata document registers (the fallback), and its name is marked unverified', async () => {
    const provider = new SdkClient();
    const transport = new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider });
    await expect(new Client({ name: 'registering-test', version: '1.0.0' }).connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(provider.registered).toBe(true);
    const authUrl = provider.authorizationUrl!;
    expect(authUrl.searchParams.get('client_id')).toBe(provider.info!.client_id);
    const page: Page = await browser.newPage();
    await page.goto(authUrl.href);
    expect(await page.$('#client-domain')).toBeNull();
    expect(await page.$eval('#client-unverified', (e) => (e as unknown as { textContent: string }).textContent)).toContain('not verified');
    await page.type('#admin_token', await gw.token({ team: TEAM, scopes: ['admin'], subject: 'admin@cimd' }));
    await page.type('#team', TEAM);
    await Promise.all([page.waitForNavigation(), page.click('#approve')]);
    const back = arrivals.find((u) => u.searchParams.get('state') === authUrl.searchParams.get('state'));
    await page.close();
    await transport.finishAuth(back!.searchParams);
    const client = new Client({ name: 'registering-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }));
    expect((await client.callTool({ name: 'list_runtimes', arguments: {} })).isError).toBeFalsy();
    await client.close();
  }, 120_000);
});
