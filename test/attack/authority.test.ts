/**
 * Authority follows people (src/auth/minter.ts): the attacks of an admin member who tries to become
 * owner and to outlive their removal through a token they minted, through the real gateway (wrangler
 * dev, local D1), a real OpenID provider for the members' sign-in, and the real consent page.
 *
 * The reported sequence: Bob (admin) signs in, mints an admin token, makes himself owner with it,
 * demotes the real owner, is removed, and his token still answers. Every step after the mint must be
 * refused, and his token and what it consented to must end when he is removed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { execSql } from '../admin/seed.ts';
import { startOidcIdp, type OidcAccount, type OidcIdp } from '../support/oidc-idp.ts';
import { type Browser, browserApi, signInAs } from '../support/oidc-browser.ts';
import { TestOAuthProvider } from '../support/oauth-provider.ts';
import { runCli } from '../support/cli.ts';
import { initializeStatus } from '../support/mcp-initialize.ts';

let gw: Gateway;
let idp: OidcIdp;
const alice: OidcAccount = { sub: 'alice', email: 'alice@acme.example', name: 'Alice' };
const bob: OidcAccount = { sub: 'bob', email: 'bob@acme.example', name: 'Bob' };
const carol: OidcAccount = { sub: 'carol', email: 'carol@acme.example' };
const dan: OidcAccount = { sub: 'dan', email: 'dan@acme.example' };
const erin: OidcAccount = { sub: 'erin', email: 'erin@acme.example' };

beforeAll(async () => {
  idp = await startOidcIdp();
  const member = (id: string, a: OidcAccount, role: string) =>
    `INSERT INTO members (member_id, team, issuer, subject, email, name, role, created_at, added_by) VALUES ('${id}', 'acme', '${idp.issuer}', '${a.sub}', '${a.email}', NULL, '${role}', ${Date.now() - 60_000}, 'seed');`;
  gw = await startGateway({
    vars: { OIDC_ISSUER: idp.issuer, OIDC_CLIENT_ID: idp.clientId, OIDC_CLIENT_SECRET: idp.clientSecret },
    beforeStart: async (persist) =>
      execSql(
        persist,
        [
          member('mem_alice', alice, 'owner'),
          member('mem_bob', bob, 'admin'),
          member('mem_carol', carol, 'member'),
          member('mem_dan', dan, 'admin'),
          member('mem_erin', erin, 'admin'),
        ].join('\n'),
      ),
  });
  idp.allowRedirect(`${gw.url}/dashboard/auth/callback`);
});
afterAll(async () => {
  await gw?.stop();
  await idp?.close();
});

/** A signed-in person's dashboard API, with their session's CSRF token. */
async function person(a: OidcAccount) {
  const b: Browser = await signInAs(gw, idp, a);
  const { csrf } = (await browserApi(gw, b, 'GET', '/dashboard/auth/session')).json;
  return (method: string, path: string, body?: unknown) => browserApi(gw, b, method, `/dashboard/api/v1${path}`, { body, csrf });
}

/** The admin API with a bearer token. */
async function withToken(token: string, method: string, path: string, body?: unknown) {
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as any };
}

const roleOf = async (id: string) => {
  const token = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'observer' });
  return (await withToken(token, 'GET', '/members')).json.members.find((m: any) => m.memberId === id)?.role;
};

/** An MCP client connected through the consent page with `adminToken`; returns its access token. */
async function oauthClientConsentedWith(adminToken: string): Promise<string> {
  const provider = new TestOAuthProvider(`authority ${crypto.randomUUID().slice(0, 8)}`, 'http://127.0.0.1:9/callback');
  const probe = new Client({ name: 'authority', version: '1.0.0' });
  await expect(probe.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
  const body = new URLSearchParams({ admin_token: adminToken, team: 'acme', scope: 'execute', decision: 'approve' });
  const r = await fetch(provider.authorizationUrl!, { method: 'POST', body, redirect: 'manual' });
  expect(r.status, await r.clone().text()).toBe(302);
  const code = new URL(r.headers.get('Location')!).searchParams.get('code')!;
  await new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }).finishAuth(code);
  return provider.saved!.access_token;
}

const mcpStatus = (access: string) => initializeStatus(gw.mcpUrl, access);

describe('an admin member cannot make themselves owner, and their tokens end with them', () => {
  it('refuses every step of the reported sequence, and ends the token and its OAuth grant when the owner removes Bob', async () => {
    const asBob = await person(bob);
    const minted = await asBob('POST', '/tokens', { subject: 'bob-automation', scopes: ['admin'] });
    expect(minted.status, JSON.stringify(minted.json)).toBe(201);
    expect(minted.json.mintedBy).toEqual({ kind: 'member', memberId: 'mem_bob', role: 'admin' });
    const token: string = minted.json.token;
    expect(decodeJwt(token).minted_by).toEqual({ kind: 'member', memberId: 'mem_bob', role: 'admin' });

    // With his token, Bob tries to make himself owner, then to demote the real owner.
    const up = await withToken(token, 'PATCH', '/members/mem_bob', { role: 'owner' });
    expect(up.status).toBe(403);
    expect(up.json.error.message).toMatch(/^only an owner may make a member an owner; .*this token acts as an admin/);
    const down = await withToken(token, 'PATCH', '/members/mem_alice', { role: 'admin' });
    expect(down.status).toBe(403);
    expect(down.json.error.message).toMatch(/^only an owner may demote an owner/);
    expect(await roleOf('mem_bob')).toBe('admin');
    expect(await roleOf('mem_alice')).toBe('owner');

    // A token minted with his token is his too: no stronger, and it ends with him.
    const child = await withToken(token, 'POST', '/tokens', { subject: 'bob-child', scopes: ['admin', 'execute'] });
    expect(child.status).toBe(201);
    expect(decodeJwt(child.json.token).minted_by).toEqual({ kind: 'member', memberId: 'mem_bob', role: 'admin' });
    expect((await withToken(child.json.token, 'POST', '/members/invitations', { email: 'mallory@acme.example', role: 'owner' })).status).toBe(403);

    // An MCP client consented with his token.
    const access = await oauthClientConsentedWith(token);
    expect(await mcpStatus(access)).toBe(200);

    // The owner removes Bob: at that moment, his tokens and what they consented to end.
    const asAlice = await person(alice);
    const removed = await asAlice('DELETE', '/members/mem_bob');
    expect(removed.status, JSON.stringify(removed.json)).toBe(200);
    expect(removed.json.tokensRevoked.sort()).toEqual([minted.json.jti, child.json.jti].sort());
    expect(removed.json.oauthGrantsEnded).toHaveLength(1);

    const after = await withToken(token, 'GET', '/members');
    expect(after.status).toBe(401);
    expect(after.json.error.message).toContain(`token ${minted.json.jti} has been revoked`);
    expect((await withToken(child.json.token, 'GET', '/members')).status).toBe(401);
    expect(await mcpStatus(access)).toBe(401);

    // The audit row says what ended with him.
    const audit = (await asAlice('GET', '/audit?tool=admin.member_remove&limit=5')).json.entries;
    expect(audit[0].command).toMatchObject({ memberId: 'mem_bob', tokensRevoked: expect.arrayContaining([minted.json.jti, child.json.jti]) });
  });

  it('does not let a member mint tokens, nor any admin token mint beyond its minter (a member role mints no admin or agent)', async () => {
    const asCarol = await person(carol);
    const r = await asCarol('POST', '/tokens', { subject: 'carol-admin', scopes: ['admin'] });
    expect(r.status).toBe(403);
    expect(r.json.error.message).toMatch(/your role in team "acme" is member/);
  });

  it('demotion revokes exactly the tokens the new role does not cover: admin and agent tokens go, an execute token stays', async () => {
    const asDan = await person(dan);
    const admin = (await asDan('POST', '/tokens', { subject: 'dan-admin', scopes: ['admin'] })).json;
    const agent = (await asDan('POST', '/tokens', { subject: 'dan-agent', scopes: ['agent'] })).json;
    const exec = (await asDan('POST', '/tokens', { subject: 'dan-exec', scopes: ['execute', 'artifacts:read'] })).json;
    const asAlice = await person(alice);
    const demoted = await asAlice('PATCH', '/members/mem_dan', { role: 'member' });
    expect(demoted.status).toBe(200);
    expect(demoted.json.tokensRevoked.sort()).toEqual([admin.jti, agent.jti].sort());
    expect((await withToken(admin.token, 'GET', '/members')).status).toBe(401);
    expect(await mcpStatus(exec.token)).toBe(200);
    expect(await mcpStatus(agent.token)).toBe(401);

    // The tokens list says who minted each and what it ends with; the CLI shows the minter.
    const list = (await asAlice('GET', '/tokens')).json.tokens;
    const row = list.find((t: any) => t.jti === exec.jti);
    expect(row).toMatchObject({ mintedBy: { kind: 'member', memberId: 'mem_dan', role: 'admin' }, minterEmail: 'dan@acme.example', revokedAt: null });
    expect(row.endsWith).toContain('dan@acme.example leaving the team or losing the admin role');
    const cli = await runCli(gw.url, await gw.token({ team: 'acme', scopes: ['admin'], subject: 'cli-admin' }), ['token', 'list']);
    expect(cli.stdout).toMatch(new RegExp(`${exec.jti}\\s+dan-exec\\s+execute artifacts:read.*active\\s+dan@acme.example \\(admin\\)`));
    expect(cli.stdout).toMatch(new RegExp(`${admin.jti}\\s+dan-admin.*revoked .*dan@acme.example \\(admin\\)`));
  });

  it("an owner's token acts as owner until the owner steps down; then it ends, and the former owner cannot climb back", async () => {
    const asAlice = await person(alice);
    const ownerToken = (await asAlice('POST', '/tokens', { subject: 'alice-ops', scopes: ['admin'] })).json;
    const aliceExec = (await asAlice('POST', '/tokens', { subject: 'alice-exec', scopes: ['execute'] })).json;
    // Owner transfer: with her token, Alice makes Erin owner, then steps down herself.
    expect((await withToken(ownerToken.token, 'PATCH', '/members/mem_erin', { role: 'owner' })).status).toBe(200);
    const stepDown = await withToken(ownerToken.token, 'PATCH', '/members/mem_alice', { role: 'admin' });
    expect(stepDown.status).toBe(200);
    expect(stepDown.json.tokensRevoked).toEqual([ownerToken.jti]);
    expect((await withToken(ownerToken.token, 'GET', '/members')).status).toBe(401);
    expect(await mcpStatus(aliceExec.token)).toBe(200);
    // Now an admin: neither her session nor a token she mints now can make her owner again.
    const again = await person(alice);
    expect((await again('PATCH', '/members/mem_alice', { role: 'owner' })).status).toBe(403);
    const newToken = (await again('POST', '/tokens', { subject: 'alice-ops-2', scopes: ['admin'] })).json;
    expect((await withToken(newToken.token, 'PATCH', '/members/mem_alice', { role: 'owner' })).status).toBe(403);
    expect(await roleOf('mem_alice')).toBe('admin');
    expect(await roleOf('mem_erin')).toBe('owner');
  });

  it('a token without a recorded minter acts at most as an admin; the bootstrap token acts as an owner (break-glass)', async () => {
    const legacy = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'legacy-admin', minter: null });
    const r = await withToken(legacy, 'PATCH', '/members/mem_dan', { role: 'owner' });
    expect(r.status).toBe(403);
    expect(r.json.error.message).toContain('this token acts as an admin');
    expect((await withToken(legacy, 'PATCH', '/members/mem_dan', { role: 'admin' })).status).toBe(200);
    // What a legacy token mints carries no minter either: no stronger than admin.
    const child = await withToken(legacy, 'POST', '/tokens', { subject: 'legacy-child', scopes: ['admin'] });
    expect(child.json.mintedBy).toBeNull();
    expect((await withToken(child.json.token, 'PATCH', '/members/mem_dan', { role: 'owner' })).status).toBe(403);

    const bootstrap = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'bootstrap-admin' });
    expect((await withToken(bootstrap, 'PATCH', '/members/mem_dan', { role: 'owner' })).status).toBe(200);
  });

  it('a token signed with another key cannot claim a minter, even a well-formed one', async () => {
    const { generateSigningKey, mintToken } = await import('../../src/auth/mint.ts');
    const { token: forged } = await mintToken({
      privateJwk: await generateSigningKey(),
      issuer: gw.issuer,
      audience: gw.audience,
      team: 'acme',
      subject: 'forger',
      scopes: ['admin'],
      ttlSeconds: 600,
      minter: { kind: 'bootstrap' },
    });
    expect((await withToken(forged, 'PATCH', '/members/mem_carol', { role: 'owner' })).status).toBe(401);
  });
});
