/**
 * The members admin API through the real gateway (wrangler dev, local D1 with the migrations):
 * list, invite, withdraw, role change and removal in the admin token's own team, each audited;
 * another team's members do not exist; the last owner stays.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { execSql } from './seed.ts';
import { runCli } from '../support/cli.ts';

let gw: Gateway;
const T0 = Date.now() - 3600_000;

/** Member rows as SQL for the seed (before the gateway starts). */
function membersSeedSql(rows: { id: string; team: string; sub: string; email: string; role: string }[], issuer = 'https://idp.example'): string {
  return rows
    .map(
      (m, i) =>
        `INSERT INTO members (member_id, team, issuer, subject, email, name, role, created_at, added_by) VALUES ('${m.id}', '${m.team}', '${issuer}', '${m.sub}', '${m.email}', '${m.sub}', '${m.role}', ${T0 + i}, 'seed');`,
    )
    .join('\n');
}

beforeAll(async () => {
  gw = await startGateway({
    beforeStart: async (persist) =>
      execSql(
        persist,
        membersSeedSql([
          { id: 'mem_alice', team: 'acme', sub: 'alice', email: 'alice@acme.example', role: 'owner' },
          { id: 'mem_bob', team: 'acme', sub: 'bob', email: 'bob@acme.example', role: 'admin' },
          { id: 'mem_carol', team: 'acme', sub: 'carol', email: 'carol@acme.example', role: 'member' },
          { id: 'mem_eve', team: 'globex', sub: 'eve', email: 'eve@globex.example', role: 'owner' },
          { id: 'mem_dave', team: 'acme', sub: 'dave', email: 'dave@acme.example', role: 'member' },
        ]) +
          // An MCP client Dave connected: removing him ends it, and the CLI names it.
          `\nINSERT INTO oauth_grants (grant_id, team, user_id, client_id, client_name, subject, consent_token_id, scopes, created_at, code_exchanged_at)
           VALUES ('grant_dave_editor', 'acme', 'acme%2Fmember%3Amem_dave', 'client_dave', 'Dave''s editor', 'member:mem_dave', 'member:mem_dave', '["execute"]', ${T0}, ${T0});`,
      ),
  });
});
afterAll(async () => {
  await gw?.stop();
});

async function call(method: string, path: string, body?: unknown, o: { team?: string; scopes?: string[] } = {}) {
  const token = await gw.token({ team: o.team ?? 'acme', scopes: o.scopes ?? ['admin'], subject: 'admin-tok' });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as any };
}

const auditOf = async (tool: string) => (await call('GET', `/audit?tool=${tool}&limit=50`)).json.entries as any[];

describe('members admin API', () => {
  it("lists the team's members only; another team's list is not found", async () => {
    const r = await call('GET', '/members');
    expect(r.status).toBe(200);
    expect(r.json.members.map((m: any) => [m.memberId, m.role, m.email])).toEqual([
      ['mem_alice', 'owner', 'alice@acme.example'],
      ['mem_bob', 'admin', 'bob@acme.example'],
      ['mem_carol', 'member', 'carol@acme.example'],
      ['mem_dave', 'member', 'dave@acme.example'],
    ]);
    expect(r.json.members[0]).toMatchObject({ issuer: 'https://idp.example', subject: 'alice', team: 'acme' });
    expect((await call('GET', '/teams/globex/members')).status).toBe(404);
    expect((await call('DELETE', '/members/mem_eve')).json.error.code).toBe('not_found');
    expect((await call('PATCH', '/members/eve@globex.example', { role: 'member' })).status).toBe(404);
  });

  it('refuses non-admin tokens', async () => {
    const r = await call('GET', '/members', undefined, { scopes: ['execute', 'artifacts:read'] });
    expect(r.status).toBe(403);
  });

  it('invites by email: a one-time link returned once, listed without its secret, audited', async () => {
    const r = await call('POST', '/members/invitations', { email: 'Dave@Acme.example', role: 'admin' });
    expect(r.status).toBe(201);
    expect(r.json.invitation).toMatchObject({
      team: 'acme',
      email: 'dave@acme.example',
      role: 'admin',
      acceptedAt: null,
      revokedAt: null,
      createdBy: 'admin-tok',
    });
    const expiresIn = r.json.invitation.expiresAt - r.json.invitation.createdAt;
    expect(expiresIn).toBe(7 * 86400_000);
    const url = new URL(r.json.url);
    expect(`${url.origin}${url.pathname}`).toBe(`${gw.url}/dashboard/join`);
    const secret = url.searchParams.get('invitation')!;
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const list = await call('GET', '/members');
    expect(list.json.invitations.map((i: any) => i.invitationId)).toContain(r.json.invitation.invitationId);
    expect(JSON.stringify(list.json)).not.toContain(secret);
    expect(JSON.stringify((await call('GET', '/members/invitations')).json)).not.toContain(secret);
    const audit = await auditOf('admin.member_invite');
    expect(audit[0]).toMatchObject({
      subject: 'admin-tok',
      decision: 'allowed',
      command: { invitationId: r.json.invitation.invitationId, email: 'dave@acme.example', role: 'admin' },
    });
    expect(JSON.stringify(audit)).not.toContain(secret);
  });

  it('refuses a bad invitation, naming what is allowed', async () => {
    const bad = await call('POST', '/members/invitations', { email: 'x@acme.example', role: 'root' });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain('role must be one of owner, admin, member, got "root"');
    expect((await call('POST', '/members/invitations', { email: 'not-an-email' })).json.error.message).toMatch(/^email: email must be an email address/);
    expect((await call('POST', '/members/invitations', { email: 'x@acme.example', ttlSeconds: 31 * 86400 })).json.error.message).toContain(
      'at most 2592000 (30 days)',
    );
    expect((await call('POST', '/members/invitations', { email: 'x@acme.example', admin: true })).status).toBe(400);
  });

  it('withdraws a pending invitation (its link is gone from the list), idempotently; audited', async () => {
    const r = await call('POST', '/members/invitations', { email: 'frank@acme.example' });
    const id = r.json.invitation.invitationId;
    const d = await call('DELETE', `/members/invitations/${id}`);
    expect(d.status).toBe(200);
    expect(typeof d.json.invitation.revokedAt).toBe('number');
    expect((await call('DELETE', `/members/invitations/${id}`)).json.invitation.revokedAt).toBe(d.json.invitation.revokedAt);
    expect((await call('GET', '/members')).json.invitations.map((i: any) => i.invitationId)).not.toContain(id);
    expect((await call('DELETE', '/members/invitations/inv_nope')).status).toBe(404);
    const audit = await auditOf('admin.member_invitation_revoke');
    expect(audit[0]).toMatchObject({ decision: 'failed', command: { invitationId: 'inv_nope' } });
    expect(audit[2]).toMatchObject({ decision: 'allowed', command: { invitationId: id } });
  });

  it('changes a role by id or email, audited with before and after', async () => {
    const r = await call('PATCH', '/members/carol@acme.example', { role: 'admin' });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ member: { memberId: 'mem_carol', role: 'admin' }, previousRole: 'member', oauthGrantsEnded: [], sessionsEnded: false });
    // Lowered: her sessions end (and her OAuth grants in the team, here none).
    expect((await call('PATCH', '/members/mem_carol', { role: 'member' })).json).toMatchObject({
      member: { role: 'member' },
      oauthGrantsEnded: [],
      sessionsEnded: true,
    });
    expect((await auditOf('admin.member_role')).slice(0, 2).map((a) => a.command)).toEqual([
      { memberId: 'mem_carol', email: 'carol@acme.example', from: 'admin', to: 'member' },
      { memberId: 'mem_carol', email: 'carol@acme.example', from: 'member', to: 'admin' },
    ]);
    expect((await call('PATCH', '/members/mem_carol', { role: 'boss' })).json.error.message).toContain('role must be one of owner, admin, member');
  });

  it('never demotes or removes the last owner; after a second owner, the first may go', async () => {
    const demote = await call('PATCH', '/members/mem_alice', { role: 'admin' });
    expect(demote.status).toBe(403);
    expect(demote.json.error).toEqual({
      code: 'forbidden',
      message: 'this is the last owner of team "acme": make another member owner first, then change this role',
    });
    const remove = await call('DELETE', '/members/alice@acme.example');
    expect(remove.json.error.message).toBe('this is the last owner of team "acme" and cannot be removed: make another member owner first');
    const refused = (await auditOf('admin.member_remove'))[0];
    expect(refused).toMatchObject({ decision: 'failed', command: { memberId: 'mem_alice' }, reason: expect.stringContaining('last owner') });
    expect((await call('GET', '/members')).json.members.find((m: any) => m.memberId === 'mem_alice').role).toBe('owner');

    expect((await call('PATCH', '/members/mem_bob', { role: 'owner' })).json.member.role).toBe('owner');
    expect((await call('PATCH', '/members/mem_alice', { role: 'admin' })).json.member.role).toBe('admin');
    // Bob is now the only owner: the same rule holds for him.
    expect((await call('DELETE', '/members/mem_bob')).status).toBe(403);
  });

  it('removes a member, audited; the removed member is then not found', async () => {
    const r = await call('DELETE', '/members/mem_carol');
    expect(r.status).toBe(200);
    expect(r.json.removed).toMatchObject({ memberId: 'mem_carol', email: 'carol@acme.example' });
    expect((await call('DELETE', '/members/mem_carol')).json.error).toEqual({
      code: 'not_found',
      message: 'no member "mem_carol" in team "acme" (see GET /admin/v1/members)',
    });
    expect((await auditOf('admin.member_remove'))[0]).toMatchObject({
      decision: 'allowed',
      subject: 'admin-tok',
      command: { memberId: 'mem_carol', role: 'member' },
    });
    // globex's owner is untouched by everything acme did.
    expect((await call('GET', '/members', undefined, { team: 'globex' })).json.members.map((m: any) => m.memberId)).toEqual(['mem_eve']);
  });
});

describe('gatehouse members (the CLI against the same gateway)', () => {
  const cli = async (...args: string[]) => runCli(gw.url, await gw.token({ team: 'acme', scopes: ['admin'], subject: 'cli-admin' }), ['members', ...args]);

  it('lists members and pending invitations, invites (the link alone on stdout), changes a role, removes', async () => {
    const inv = await cli('invite', 'grace@acme.example', '--role', 'admin', '--ttl', '2d');
    expect(inv.code, inv.stderr).toBe(0);
    expect(inv.stdout).toMatch(new RegExp(`^${gw.url}/dashboard/join\\?invitation=[A-Za-z0-9_-]{43}\n$`));
    expect(inv.stderr).toMatch(/^invitation inv_[0-9a-f]{24} for grace@acme.example as admin, valid until \S+; send this link/);
    const l = await cli('list');
    expect(l.code).toBe(0);
    expect(l.stdout).toMatch(/mem_bob +owner +bob@acme.example/);
    expect(l.stdout).toMatch(/pending invitations:[\s\S]*grace@acme.example +admin/);
    const role = await cli('role', 'alice@acme.example', 'member');
    expect(role).toMatchObject({
      code: 0,
      stdout: 'mem_alice (alice@acme.example): admin -> member\n',
      stderr: 'a lowered role: their signed-in sessions and 0 OAuth grant(s) in the team ended; they sign in and connect again\n',
    });
    const rm = await cli('remove', 'mem_alice');
    expect(rm).toMatchObject({
      code: 0,
      stdout: 'removed mem_alice (alice@acme.example, member) from the team\nOAuth grants ended: none\ntokens revoked: none\n',
    });
    // Which grants ended with the membership, by id.
    const dave = await cli('remove', 'dave@acme.example');
    expect(dave).toMatchObject({
      code: 0,
      stdout: 'removed mem_dave (dave@acme.example, member) from the team\nOAuth grants ended (1): grant_dave_editor\ntokens revoked: none\n',
    });
    const json = JSON.parse((await cli('list', '--json')).stdout);
    expect(json.members.map((m: any) => m.memberId)).toEqual(['mem_bob']);
  });

  it('exits 1 with the rule when the gateway refuses, 2 on a usage error naming the allowed roles', async () => {
    const last = await cli('remove', 'bob@acme.example');
    expect(last).toMatchObject({
      code: 1,
      stderr: 'error (forbidden): this is the last owner of team "acme" and cannot be removed: make another member owner first\n',
    });
    const bad = await cli('role', 'mem_bob', 'root');
    expect(bad).toMatchObject({ code: 2, stderr: 'gatehouse: unknown role "root"; allowed: owner, admin, member\n' });
    expect((await cli('invite')).code).toBe(2);
    expect((await cli('frob')).stderr).toContain('allowed: list, invite, withdraw, role, remove');
  });
});
