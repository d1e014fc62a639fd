/**
 * Members signed in by Cloudflare Access, through the real gateway (wrangler dev, local D1) and a
 * local stand-in of the Access team domain: taking an invitation, the admin API by role, and the
 * attacks — forged, expired and foreign assertions, a replayed or misdirected invitation, a
 * cross-site request, a member calling admin routes, another team's data, a removed member.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { execSql } from '../admin/seed.ts';
import { startAccessIdp, type AccessIdp } from '../support/access-idp.ts';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from '../e2e/harness.ts';
import { readmeBlock } from '../cli/readme.ts';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { TestOAuthProvider } from '../support/oauth-provider.ts';

let gw: Gateway;
let idp: AccessIdp;
const alice = { sub: 'u-alice', email: 'alice@acme.example', name: 'Alice' };
const carol = { sub: 'u-carol', email: 'carol@acme.example' };
const dave = { sub: 'u-dave', email: 'dave@acme.example', name: 'Dave' };
const erin = { sub: 'u-erin', email: 'erin@both.example' };
const EXPIRED_SECRET = 'expired-invitation-secret-0123456789abcdefghij';

beforeAll(async () => {
  idp = await startAccessIdp();
  const t0 = Date.now() - 3600_000;
  const member = (id: string, team: string, p: { sub: string; email: string }, role: string) =>
    `INSERT INTO members (member_id, team, issuer, subject, email, name, role, created_at, added_by) VALUES ('${id}', '${team}', '${idp.teamDomain}', '${p.sub}', '${p.email}', NULL, '${role}', ${t0}, 'seed');`;
  gw = await startGateway({
    vars: { CF_ACCESS_TEAM_DOMAIN: idp.teamDomain, CF_ACCESS_AUD: idp.aud },
    beforeStart: async (persist) =>
      execSql(
        persist,
        [
          member('mem_alice', 'acme', alice, 'owner'),
          member('mem_carol', 'acme', carol, 'member'),
          member('mem_erin_acme', 'acme', erin, 'member'),
          member('mem_erin_globex', 'globex', erin, 'admin'),
          `INSERT INTO member_invitations (invitation_id, team, email, role, secret_hash, created_at, expires_at, created_by) VALUES ('inv_old', 'acme', 'dave@acme.example', 'admin', '${createHash('sha256').update(EXPIRED_SECRET).digest('hex')}', ${t0}, ${t0 + 60_000}, 'seed');`,
        ].join('\n'),
      ),
  });
});
afterAll(async () => {
  await gw?.stop();
  await idp?.close();
});

/** A request as a browser behind Access sends it: the assertion, and for changes this origin. */
async function asPerson(assertion: string, method: string, path: string, body?: unknown, o: { origin?: string | null } = {}) {
  const headers: Record<string, string> = { 'Cf-Access-Jwt-Assertion': assertion };
  const origin = o.origin === undefined ? gw.url : o.origin;
  if (origin) headers.Origin = origin;
  if (body !== undefined) headers['Content-Type'] = typeof body === 'string' ? 'application/x-www-form-urlencoded' : 'application/json';
  const r = await fetch(`${gw.url}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    redirect: 'manual',
  });
  const text = await r.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* an HTML page */
  }
  return { status: r.status, text, json, csp: r.headers.get('Content-Security-Policy') ?? '' };
}

async function adminToken(method: string, path: string, body?: unknown) {
  const token = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'admin-tok' });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as any };
}

const secretOf = (url: string) => new URL(url).searchParams.get('invitation')!;
const joinForm = (secret: string) => `invitation=${encodeURIComponent(secret)}`;

describe('an invitation taken through Cloudflare Access', () => {
  let secret = '';

  it('shows the team and role, joins with one same-origin post, and audits the join under the member', async () => {
    const inv = await adminToken('POST', '/members/invitations', { email: 'dave@acme.example', role: 'admin' });
    secret = secretOf(inv.json.url);
    const daveA = await idp.assertion(dave);
    const page = await asPerson(daveA, 'GET', `/dashboard/join?invitation=${encodeURIComponent(secret)}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('a <strong data-role>admin</strong> of team <strong data-team>acme</strong>');
    expect(page.text).toContain('You are signed in as dave@acme.example.');
    expect(page.csp).toContain("form-action 'self'");

    const joined = await asPerson(daveA, 'POST', '/dashboard/join', joinForm(secret));
    expect(joined.status).toBe(200);
    expect(joined.text).toContain('You joined team acme as admin.');
    const memberId = /data-member="(mem_[0-9a-f]+)"/.exec(joined.text)![1];

    const list = await asPerson(daveA, 'GET', '/admin/v1/members');
    expect(list.status).toBe(200);
    expect(list.json.members.find((m: any) => m.memberId === memberId)).toMatchObject({
      issuer: idp.teamDomain,
      subject: 'u-dave',
      email: 'dave@acme.example',
      name: 'Dave',
      role: 'admin',
      addedBy: `invitation:${inv.json.invitation.invitationId}`,
    });
    const audit = await adminToken('GET', '/audit?tool=member.join');
    expect(audit.json.entries[0]).toMatchObject({
      subject: `member:${memberId}`,
      decision: 'allowed',
      command: { invitationId: inv.json.invitation.invitationId, role: 'admin', joined: true },
    });
    // What the member does next is audited under them too.
    const whoami = await asPerson(daveA, 'GET', '/admin/v1/whoami');
    expect(whoami.json).toMatchObject({ team: 'acme', subject: `member:${memberId}`, scopes: ['admin', 'execute', 'artifacts:read'] });
  });

  it('refuses a replayed invitation, for the same person and for anyone else', async () => {
    const again = await asPerson(await idp.assertion(dave), 'POST', '/dashboard/join', joinForm(secret));
    expect(again.status).toBe(403);
    expect(again.text).toContain('this invitation link was already used: each link works once');
    const page = await asPerson(await idp.assertion(carol), 'GET', `/dashboard/join?invitation=${encodeURIComponent(secret)}`);
    expect(page.status).toBe(403);
  });

  it('refuses an expired, withdrawn or unknown invitation', async () => {
    const expired = await asPerson(await idp.assertion(dave), 'POST', '/dashboard/join', joinForm(EXPIRED_SECRET));
    expect(expired.status).toBe(403);
    expect(expired.text).toMatch(/this invitation expired at \d{4}-\d\d-\d\dT[\d:.]+Z; ask a team admin for a new one/);
    const w = await adminToken('POST', '/members/invitations', { email: 'dave@acme.example' });
    await adminToken('DELETE', `/members/invitations/${w.json.invitation.invitationId}`);
    expect((await asPerson(await idp.assertion(dave), 'POST', '/dashboard/join', joinForm(secretOf(w.json.url)))).text).toContain('withdrawn');
    expect((await asPerson(await idp.assertion(dave), 'POST', '/dashboard/join', joinForm('x'.repeat(43)))).status).toBe(404);
  });

  it('lets only the invited address take it, and the wrong person does not use it up', async () => {
    const inv = await adminToken('POST', '/members/invitations', { email: 'frank@acme.example' });
    const s = secretOf(inv.json.url);
    const wrong = await asPerson(await idp.assertion(carol), 'POST', '/dashboard/join', joinForm(s));
    expect(wrong.status).toBe(403);
    expect(wrong.text).toContain('this invitation is for frank@acme.example; you are signed in as carol@acme.example: sign in with that address');
    const right = await asPerson(await idp.assertion({ sub: 'u-frank', email: 'frank@acme.example' }), 'POST', '/dashboard/join', joinForm(s));
    expect(right.text).toContain('You joined team acme as member.');
  });

  it('refuses a join posted from another site (CSRF) or without an Origin, and takes nothing', async () => {
    const inv = await adminToken('POST', '/members/invitations', { email: 'gina@acme.example' });
    const s = secretOf(inv.json.url);
    const gina = await idp.assertion({ sub: 'u-gina', email: 'gina@acme.example' });
    const foreign = await asPerson(gina, 'POST', '/dashboard/join', joinForm(s), { origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    expect(foreign.text).toContain('must come from this gateway&#39;s pages');
    expect((await asPerson(gina, 'POST', '/dashboard/join', joinForm(s), { origin: null })).status).toBe(403);
    // `Origin: null` (a page without referrer) passes only with the browser's Sec-Fetch-Site: same-origin.
    const opaque = await asPerson(gina, 'POST', '/dashboard/join', joinForm(s), { origin: 'null' });
    expect(opaque.status).toBe(403);
    expect(opaque.text).toContain('got Origin null and no Sec-Fetch-Site: same-origin');
    expect((await asPerson(gina, 'POST', '/dashboard/join', joinForm(s))).text).toContain('You joined team acme as member.');
  });

  it('asks a person who is not signed in to sign in through Access', async () => {
    const r = await fetch(`${gw.url}/dashboard/join?invitation=abc`);
    expect(r.status).toBe(401);
    expect(await r.text()).toContain(`Open this link through Cloudflare Access (${idp.teamDomain})`);
  });
});

describe('the admin API by role, for people signed in by Access', () => {
  it('refuses forged, expired, foreign-audience, foreign-issuer and personless assertions', async () => {
    const cases: [string, string, RegExp][] = [
      ['forged', await idp.assertion(alice, {}, { forge: true }), /not valid: signature verification failed/],
      [
        'expired',
        await idp.assertion(alice, { iat: Math.floor(Date.now() / 1000) - 7200, exp: Math.floor(Date.now() / 1000) - 3600 }),
        /expired; sign in through Access again/,
      ],
      ['other application', await idp.assertion(alice, { aud: ['another-app'] }), /not for this application: unexpected "aud" claim value/],
      ['other issuer', await idp.assertion(alice, { iss: 'https://other.cloudflareaccess.com' }), /not for this application: unexpected "iss" claim value/],
      ['service token', await idp.assertion({ sub: '', email: '' }, { common_name: 'svc.access' }), /names no person \(a service token\?\)/],
    ];
    for (const [what, a, message] of cases) {
      const r = await asPerson(a, 'GET', '/admin/v1/members');
      expect(r.status, what).toBe(401);
      expect(r.json.error.message, what).toMatch(message);
    }
  });

  it('refuses a member (role member) on every admin route, naming the roles that may', async () => {
    const c = await idp.assertion(carol);
    for (const [method, path, body] of [
      ['GET', '/admin/v1/members'],
      ['GET', '/admin/v1/tokens'],
      ['PUT', '/admin/v1/policy', {}],
      ['POST', '/admin/v1/members/invitations', { email: 'x@acme.example' }],
    ] as const) {
      const r = await asPerson(c, method, path, body);
      expect(r.status, path).toBe(403);
      expect(r.json.error).toEqual({
        code: 'insufficient_scope',
        message: 'your role in team "acme" is member; this needs the owner or admin role (a member connects clients and runs what the policy allows)',
      });
    }
  });

  it('keeps an admin to admin powers: no owner made, the refusal audited under the admin', async () => {
    const d = await idp.assertion(dave);
    const r = await asPerson(d, 'PATCH', '/admin/v1/members/carol@acme.example', { role: 'owner' });
    expect(r.status).toBe(403);
    expect(r.json.error.message).toBe('only an owner may make a member an owner; an admin may invite, change and remove admins and members');
    const ok = await asPerson(d, 'PATCH', '/admin/v1/members/carol@acme.example', { role: 'admin' });
    expect(ok.json.member.role).toBe('admin');
    const audit = await adminToken('GET', '/audit?tool=admin.member_role');
    expect(audit.json.entries.slice(0, 2).map((e: any) => [e.subject.startsWith('member:mem_'), e.decision])).toEqual([
      [true, 'allowed'],
      [true, 'failed'],
    ]);
    await adminToken('PATCH', '/members/carol@acme.example', { role: 'member' });
  });

  it('refuses a signed-in change without this origin (CSRF) and changes nothing', async () => {
    const a = await idp.assertion(alice);
    const r = await asPerson(a, 'PATCH', '/admin/v1/members/carol@acme.example', { role: 'admin' }, { origin: 'https://evil.example' });
    expect(r.status).toBe(403);
    expect(r.json.error.message).toContain("must come from this gateway's pages");
    expect((await asPerson(a, 'DELETE', '/admin/v1/members/mem_carol', undefined, { origin: null })).status).toBe(403);
    expect((await adminToken('GET', '/members')).json.members.find((m: any) => m.memberId === 'mem_carol').role).toBe('member');
  });

  it("never reaches another team's data; a person in two teams picks one by path", async () => {
    const a = await idp.assertion(alice);
    const other = await asPerson(a, 'GET', '/admin/v1/teams/globex/members');
    expect(other.status).toBe(404);
    expect(other.json.error.message).toBe('team "globex" not found among alice@acme.example\'s teams (acme)');
    const e = await idp.assertion(erin);
    const both = await asPerson(e, 'GET', '/admin/v1/members');
    expect(both.status).toBe(400);
    expect(both.json.error.message).toBe('erin@both.example is a member of several teams (acme, globex): pick one with /admin/v1/teams/<team>/…');
    // Admin in globex, member in acme: the role is the one of the team named.
    expect((await asPerson(e, 'GET', '/admin/v1/teams/globex/members')).json.members.map((m: any) => m.memberId)).toEqual(['mem_erin_globex']);
    expect((await asPerson(e, 'GET', '/admin/v1/teams/acme/members')).status).toBe(403);
  });

  it('ends a removed member at their next request; an owner may then do it all', async () => {
    const a = await idp.assertion(alice);
    const d = await idp.assertion(dave);
    expect((await asPerson(d, 'GET', '/admin/v1/members')).status).toBe(200);
    const daveId = (await adminToken('GET', '/members')).json.members.find((m: any) => m.email === 'dave@acme.example').memberId;
    const rm = await asPerson(a, 'DELETE', `/admin/v1/members/${daveId}`);
    expect(rm.status).toBe(200);
    const after = await asPerson(d, 'GET', '/admin/v1/members');
    expect(after.status).toBe(403);
    expect(after.json.error.message).toBe('dave@acme.example is not a member of any team on this gateway: ask a team owner or admin for an invitation');
    // The last owner, signed in, cannot demote herself.
    expect((await asPerson(a, 'PATCH', '/admin/v1/members/mem_alice', { role: 'admin' })).json.error.message).toContain('last owner of team "acme"');
    // last seen is recorded for a member who acted.
    expect((await adminToken('GET', '/members')).json.members.find((m: any) => m.memberId === 'mem_alice').lastSeenAt).toEqual(expect.any(Number));
  });
});

describe('docs/members.md', () => {
  it('runs the members-cli block as written, with the invited person joining through the link it printed', async () => {
    const env = {
      ...process.env,
      PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      GATEHOUSE_URL: gw.url,
      GATEHOUSE_ADMIN_TOKEN: await gw.token({ team: 'acme', scopes: ['admin'], subject: 'docs-admin' }),
    } as Record<string, string>;
    const lines = readmeBlock('members-cli');
    expect(lines).toHaveLength(5);
    const run = async (line: string) => {
      try {
        return (await promisify(execFile)('/bin/sh', ['-ec', line], { cwd: ROOT, env })).stdout;
      } catch (e) {
        const x = e as { stdout?: string; stderr?: string; message: string };
        throw new Error(`docs line failed: ${line}\n${x.message}\n${x.stdout ?? ''}${x.stderr ?? ''}`);
      }
    };
    const link = (await run(lines[0])).trim();
    const joined = await asPerson(await idp.assertion({ sub: 'u-dana', email: 'dana@example.com' }), 'POST', '/dashboard/join', joinForm(secretOf(link)));
    expect(joined.text).toContain('You joined team acme as admin.');
    env.INVITATION_ID = (await adminToken('POST', '/members/invitations', { email: 'later@example.com' })).json.invitation.invitationId;
    expect(await run(lines[1])).toMatch(/mem_[0-9a-f]+ +admin +dana@example.com/);
    expect(await run(lines[2])).toBe(`invitation ${env.INVITATION_ID} for later@example.com withdrawn\n`);
    expect(await run(lines[3])).toMatch(/^mem_[0-9a-f]+ \(dana@example.com\): admin -> member\n$/);
    expect(await run(lines[4])).toMatch(/^removed mem_[0-9a-f]+ \(dana@example.com, member\) from the team\nOAuth grants ended: none\ntokens revoked: none\n$/);
  }, 120_000);
});

describe('OAuth consent by a signed-in member (no admin token)', () => {
  it('connects an MCP client as the member, audits its calls under them, and ends its grant when they are removed', async () => {
    const frank = { sub: 'u-frank', email: 'frank@acme.example' };
    const provider = new TestOAuthProvider('Member-connected client', 'http://127.0.0.1:9/callback');
    const first = new Client({ name: 'member-oauth', version: '1.0.0' });
    await expect(first.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
    const authUrl = provider.authorizationUrl!.href;
    const asFrank = async (method: string, form?: Record<string, string>, origin: string | null = gw.url) => {
      const headers: Record<string, string> = { 'Cf-Access-Jwt-Assertion': await idp.assertion(frank) };
      if (origin) headers.Origin = origin;
      if (form) headers['Content-Type'] = 'application/x-www-form-urlencoded';
      return fetch(authUrl, { method, headers, body: form ? new URLSearchParams(form).toString() : undefined, redirect: 'manual' });
    };
    const page = await (await asFrank('GET')).text();
    expect(page).toContain('Signed in as <strong><bdi>frank@acme.example</bdi></strong>; the app acts as you.');
    expect(page).toMatch(/<option value="acme" >acme \(member\)<\/option>/);
    expect(page).not.toContain('admin_token');

    const form = { as: 'member', team: 'acme', scope: 'execute', decision: 'approve' };
    // Posted from another site: refused, no code.
    const crossSite = await asFrank('POST', form, 'https://evil.example');
    expect(crossSite.status).toBe(400);
    expect(await crossSite.text()).toContain('must come from this gateway&#39;s pages');
    // A team the member is not in.
    const otherTeam = await asFrank('POST', { ...form, team: 'globex' });
    expect(await otherTeam.text()).toContain('team &quot;globex&quot; not found among frank@acme.example&#39;s teams (acme)');

    const granted = await asFrank('POST', form);
    expect(granted.status).toBe(302);
    const code = new URL(granted.headers.get('Location')!).searchParams.get('code')!;
    await new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }).finishAuth(code);
    const client = new Client({ name: 'member-oauth', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl), { authProvider: provider }));
    expect((await client.callTool({ name: 'policy_check', arguments: { command: 'git', args: ['status'] } })).isError).toBeFalsy();
    await client.close();

    const frankId = (await adminToken('GET', '/members')).json.members.find((m: any) => m.email === 'frank@acme.example').memberId;
    const calls = (await adminToken('GET', '/audit?tool=policy_check')).json.entries;
    expect(calls[0].subject).toBe(`member:${frankId}`);
    const grantRow = (await adminToken('GET', '/audit?tool=oauth.grant_create')).json.entries[0];
    expect(grantRow).toMatchObject({ subject: `member:${frankId}`, command: { clientName: 'Member-connected client', scopes: ['execute'] } });
    const grants = (await adminToken('GET', '/oauth/grants')).json.grants;
    expect(grants.find((g: any) => g.grantId === grantRow.command.grantId)).toMatchObject({
      subject: `member:${frankId}`,
      consentTokenId: `member:${frankId}`,
    });

    // Removing the member ends the grant: the client's next call is refused.
    const removed = await adminToken('DELETE', `/members/${frankId}`);
    expect(removed.json.oauthGrantsEnded).toEqual([grantRow.command.grantId]);
    const after = await fetch(gw.mcpUrl, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${provider.saved!.access_token}`,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': '2025-11-25',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'policy_check', arguments: { command: 'git', args: ['status'] } } }),
    });
    expect(after.status).toBe(401);
  });
});
