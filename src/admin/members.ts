/**
 * Admin: the team's members and invitations. Who may change whom is src/members/roles.ts; a signed-in
 * person acts with their role, an admin API token with its minter's (src/auth/minter.ts: a bootstrap
 * token as an owner, a token without a recorded minter as an admin). Every change leaves an audit row,
 * refused ones included. Removing a member or lowering their role ends, at once, every OAuth grant they
 * consented to in the team, every signed-in session of theirs (they sign in again and consent again,
 * with what their role now allows), and every token they minted that their new role does not cover.
 */
import { Hono, type Context } from 'hono';
import { z } from 'zod';
import type { AppEnv } from '../env.ts';
import { describeIssues } from '../contracts/errors.ts';
import { strictInput } from '../contracts/strict-input.ts';
import { ROLES, type Role, checkMemberChange, type Actor } from '../members/roles.ts';
import {
  countOwners,
  createInvitation,
  endSessionsOf,
  isDemotion,
  findMember,
  listInvitations,
  listMembers,
  memberSubject,
  removeMember,
  revokeInvitation,
  setMemberRole,
  type MemberRow,
} from '../store/members.ts';
import { apiError, readJson } from './http.ts';
import { auditAdmin } from './audit-action.ts';
import { revokeGrantsOfMember, type GrantKey } from '../store/oauth-grants.ts';
import { forgetGrants } from '../oauth/grants.ts';
import { authorityOf } from '../auth/minter.ts';
import { endTokensBeyond } from './member-tokens.ts';

const INVITATION_DEFAULT_TTL_SECONDS = 7 * 86400;
const INVITATION_MAX_TTL_SECONDS = 30 * 86400;
const roleList = ROLES.join(', ');

const RoleField = z.enum(ROLES, { error: (i) => `role must be one of ${roleList}, got ${JSON.stringify(i.input)}` });

const InviteBody = strictInput({
  email: z.email({ error: 'email must be an email address (the invitation is for whoever signs in with it)' }).max(320),
  role: RoleField.default('member'),
  ttlSeconds: z
    .number()
    .int()
    .min(300, 'ttlSeconds must be at least 300 (5 minutes)')
    .max(INVITATION_MAX_TTL_SECONDS, `ttlSeconds must be at most ${INVITATION_MAX_TTL_SECONDS} (30 days)`)
    .default(INVITATION_DEFAULT_TTL_SECONDS),
});
const RoleBody = strictInput({ role: RoleField });

/** Who is asking, for the role rules: the signed-in member's role, else the role of the token's minter. */
function actorOf(c: Context<AppEnv>): Actor {
  const p = c.get('principal');
  return { role: authorityOf(p), via: p.member ? 'session' : 'token' };
}

/** The link an invited person opens: the secret travels in it once, the gateway keeps only its hash. */
const invitationUrl = (c: Context<AppEnv>, secret: string): string => `${new URL(c.req.url).origin}/dashboard/join?invitation=${encodeURIComponent(secret)}`;

interface EndedAccess {
  grants: GrantKey[];
  /** The OAuth grants ended with the tokens, beside the member's own. */
  tokenGrants: string[];
  tokens: string[];
}

/**
 * What a member loses with their membership or a role: their OAuth grants in the team, their sessions,
 * and the tokens they minted that `newRole` (null: none) does not cover.
 */
async function endAccessOf(c: Context<AppEnv>, m: MemberRow, newRole: Role | null, reason: string): Promise<EndedAccess> {
  const grants = await revokeGrantsOfMember(c.env, m.team, memberSubject(m), reason);
  await endSessionsOf(c.env, m.issuer, m.subject);
  const tokens = await endTokensBeyond(c.req.raw, c.env, m.team, m.memberId, newRole);
  return { grants, tokenGrants: tokens.flatMap((t) => t.oauthGrantsEnded), tokens: tokens.map((t) => t.jti) };
}

/**
 * A member as a revocation reason names them: their email and member id, never the bare `member:<id>` subject, which
 * inside "OAuth grant … has ended" reads like a second grant id.
 */
const memberName = (m: MemberRow): string => (m.email ? `${m.email} (member ${m.memberId})` : `member ${m.memberId}`);

const NOTHING_ENDED: EndedAccess = { grants: [], tokenGrants: [], tokens: [] };

/** What ended, for the audit row and the answer. */
const endedFields = (e: EndedAccess) => ({
  oauthGrantsEnded: [...e.grants.map((g) => g.grantId), ...e.tokenGrants],
  tokensRevoked: e.tokens,
});
const auditEnded = (e: EndedAccess) => {
  const f = endedFields(e);
  return {
    ...(f.oauthGrantsEnded.length ? { oauthGrantsEnded: f.oauthGrantsEnded } : {}),
    ...(f.tokensRevoked.length ? { tokensRevoked: f.tokensRevoked } : {}),
  };
};

export const memberRoutes = new Hono<AppEnv>();

memberRoutes.get('/', async (c) => {
  const team = c.get('principal').team;
  const now = Date.now();
  const [members, invitations] = await Promise.all([listMembers(c.env, team), listInvitations(c.env, team)]);
  const pending = invitations.filter((i) => i.acceptedAt === null && i.revokedAt === null && i.expiresAt > now);
  return c.json({ members, invitations: pending });
});

memberRoutes.get('/invitations', async (c) => c.json({ invitations: await listInvitations(c.env, c.get('principal').team) }));

memberRoutes.post('/invitations', async (c) => {
  const team = c.get('principal').team;
  const body = await readJson(c);
  if (!body.ok) return body.response;
  const parsed = InviteBody.safeParse(body.value);
  if (!parsed.success) return apiError(c, 'invalid_argument', describeIssues(parsed.error.issues));
  const b = parsed.data;
  const refused = checkMemberChange(actorOf(c), team, { op: 'invite', role: b.role });
  if (refused) {
    await auditAdmin(c, 'admin.member_invite', { command: { email: b.email, role: b.role }, ok: false, reason: refused.message });
    return apiError(c, refused.code, refused.message);
  }
  const { invitation, secret } = await createInvitation(c.env, {
    team,
    email: b.email,
    role: b.role,
    ttlSeconds: b.ttlSeconds,
    createdBy: c.get('principal').subject,
  });
  await auditAdmin(c, 'admin.member_invite', {
    command: { invitationId: invitation.invitationId, email: invitation.email, role: b.role, expiresAt: invitation.expiresAt },
    ok: true,
  });
  return c.json({ invitation, url: invitationUrl(c, secret) }, 201);
});

memberRoutes.delete('/invitations/:id', async (c) => {
  const team = c.get('principal').team;
  const id = c.req.param('id');
  const refused = checkMemberChange(actorOf(c), team, { op: 'invite', role: 'member' });
  const r = refused ? null : await revokeInvitation(c.env, team, id);
  const error = refused ?? (r && !r.ok ? r.error : null);
  await auditAdmin(c, 'admin.member_invitation_revoke', { command: { invitationId: id }, ok: !error, reason: error?.message });
  if (error) return apiError(c, error.code, error.message);
  return c.json({ invitation: r!.ok ? r!.value : null });
});

memberRoutes.patch('/:ref', async (c) => {
  const team = c.get('principal').team;
  const ref = c.req.param('ref');
  const body = await readJson(c);
  if (!body.ok) return body.response;
  const parsed = RoleBody.safeParse(body.value);
  if (!parsed.success) return apiError(c, 'invalid_argument', describeIssues(parsed.error.issues));
  const to: Role = parsed.data.role;
  const found = await findMember(c.env, team, ref);
  if (!found.ok) return apiError(c, found.error.code, found.error.message);
  const m = found.value;
  const refused = checkMemberChange(actorOf(c), team, { op: 'role', from: m.role, to, owners: await countOwners(c.env, team) });
  const r = refused || m.role === to ? null : await setMemberRole(c.env, team, m.memberId, to);
  const error = refused ?? (r && !r.ok ? r.error : null);
  const ended =
    !error && isDemotion(m.role, to) ? await endAccessOf(c, m, to, `the role of ${memberName(m)} was lowered from ${m.role} to ${to}`) : NOTHING_ENDED;
  await auditAdmin(c, 'admin.member_role', {
    command: { memberId: m.memberId, email: m.email, from: m.role, to, ...auditEnded(ended) },
    ok: !error,
    reason: error?.message,
  });
  if (error) return apiError(c, error.code, error.message);
  await forgetGrants(c.req.raw, c.env, ended.grants);
  return c.json({ member: r?.ok ? r.value : m, previousRole: m.role, ...endedFields(ended), sessionsEnded: isDemotion(m.role, to) });
});

memberRoutes.delete('/:ref', async (c) => {
  const team = c.get('principal').team;
  const found = await findMember(c.env, team, c.req.param('ref'));
  if (!found.ok) return apiError(c, found.error.code, found.error.message);
  const m = found.value;
  const refused = checkMemberChange(actorOf(c), team, { op: 'remove', role: m.role, owners: await countOwners(c.env, team) });
  const r = refused ? null : await removeMember(c.env, team, m.memberId);
  const error = refused ?? (r && !r.ok ? r.error : null);
  const ended = error ? NOTHING_ENDED : await endAccessOf(c, m, null, `${memberName(m)} was removed from the team`);
  await auditAdmin(c, 'admin.member_remove', {
    command: { memberId: m.memberId, email: m.email, role: m.role, ...auditEnded(ended) },
    ok: !error,
    reason: error?.message,
  });
  if (error) return apiError(c, error.code, error.message);
  await forgetGrants(c.req.raw, c.env, ended.grants);
  return c.json({ removed: m, ...endedFields(ended) });
});
