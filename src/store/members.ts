/**
 * Team members and invitations (D1, migrations/0011_members.sql), and the stamp that ends a person's
 * signed-in sessions (migrations/0013_members_sessions.sql). Every member query is keyed by team; the
 * rules of who may change whom are src/members/roles.ts, and the last-owner rule is also enforced
 * here, inside the one statement that changes the row, so two concurrent demotions cannot leave a
 * team without an owner.
 */
import type { Env } from '../env.ts';
import type { GatehouseErrorShape, Result } from '../contracts/errors.ts';
import type { Role } from '../members/roles.ts';

export interface MemberRow {
  memberId: string;
  team: string;
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
  role: Role;
  createdAt: number;
  addedBy: string;
  lastSeenAt: number | null;
}

export interface InvitationRow {
  invitationId: string;
  team: string;
  email: string;
  role: Role;
  createdAt: number;
  expiresAt: number;
  createdBy: string;
  acceptedAt: number | null;
  acceptedMemberId: string | null;
  revokedAt: number | null;
}

/** An identity as a trusted identity provider asserted it (OpenID Connect or Cloudflare Access). */
export interface Identity {
  issuer: string;
  subject: string;
  email: string | null;
  /** Only a verified email may take an invitation sent to that address. */
  emailVerified: boolean;
  name: string | null;
}

interface DbMember {
  member_id: string;
  team: string;
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
  role: Role;
  created_at: number;
  added_by: string;
  last_seen_at: number | null;
}
interface DbInvitation {
  invitation_id: string;
  team: string;
  email: string;
  role: Role;
  created_at: number;
  expires_at: number;
  created_by: string;
  accepted_at: number | null;
  accepted_member_id: string | null;
  revoked_at: number | null;
}

const MEMBER_COLUMNS = 'member_id, team, issuer, subject, email, name, role, created_at, added_by, last_seen_at';
const INVITATION_COLUMNS = 'invitation_id, team, email, role, created_at, expires_at, created_by, accepted_at, accepted_member_id, revoked_at';

const toMember = (r: DbMember): MemberRow => ({
  memberId: r.member_id,
  team: r.team,
  issuer: r.issuer,
  subject: r.subject,
  email: r.email,
  name: r.name,
  role: r.role,
  createdAt: r.created_at,
  addedBy: r.added_by,
  lastSeenAt: r.last_seen_at,
});
const toInvitation = (r: DbInvitation): InvitationRow => ({
  invitationId: r.invitation_id,
  team: r.team,
  email: r.email,
  role: r.role,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  createdBy: r.created_by,
  acceptedAt: r.accepted_at,
  acceptedMemberId: r.accepted_member_id,
  revokedAt: r.revoked_at,
});

const fail = (code: GatehouseErrorShape['code'], message: string): { ok: false; error: GatehouseErrorShape } => ({ ok: false, error: { code, message } });

function randomId(prefix: string, bytes: number): string {
  const b = crypto.getRandomValues(new Uint8Array(bytes));
  return prefix + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** The secret of an invitation link: 32 random bytes, base64url. */
function randomSecret(): string {
  const b = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...b))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
}

/** What is stored of an invitation secret: its SHA-256, hex. */
async function hashSecret(secret: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(secret)));
  return Array.from(d, (x) => x.toString(16).padStart(2, '0')).join('');
}

const normalizeEmail = (email: string): string => email.trim().toLowerCase();

/** The subject audit rows carry for a member: their membership id, which the Members list shows. */
export const memberSubject = (m: Pick<MemberRow, 'memberId'>): string => `member:${m.memberId}`;

export async function listMembers(env: Env, team: string): Promise<MemberRow[]> {
  const r = await env.DB.prepare(`SELECT ${MEMBER_COLUMNS} FROM members WHERE team = ? ORDER BY created_at, member_id`).bind(team).all<DbMember>();
  return r.results.map(toMember);
}

/** Every team `issuer`/`subject` belongs to, with the role in each (sign-in and consent pick one). */
export async function membershipsOf(env: Env, issuer: string, subject: string): Promise<MemberRow[]> {
  const r = await env.DB.prepare(`SELECT ${MEMBER_COLUMNS} FROM members WHERE issuer = ? AND subject = ? ORDER BY team`).bind(issuer, subject).all<DbMember>();
  return r.results.map(toMember);
}

/**
 * One member of `team` by membership id or by email (what a person types). Another team's member is
 * "not found"; an email two identities of the team share is refused, naming their ids.
 */
export async function findMember(env: Env, team: string, ref: string): Promise<Result<MemberRow>> {
  const byEmail = ref.includes('@');
  const r = await env.DB.prepare(`SELECT ${MEMBER_COLUMNS} FROM members WHERE team = ? AND ${byEmail ? 'email = ?' : 'member_id = ?'}`)
    .bind(team, byEmail ? normalizeEmail(ref) : ref)
    .all<DbMember>();
  if (r.results.length === 0) return fail('not_found', `no member "${ref.slice(0, 200)}" in team "${team}" (see GET /admin/v1/members)`);
  if (r.results.length > 1) {
    return fail(
      'invalid_argument',
      `${r.results.length} members of team "${team}" have the email ${ref.slice(0, 200)}: name one by its id (${r.results.map((m) => m.member_id).join(', ')})`,
    );
  }
  return { ok: true, value: toMember(r.results[0]) };
}

export async function countOwners(env: Env, team: string): Promise<number> {
  const r = await env.DB.prepare("SELECT COUNT(*) AS n FROM members WHERE team = ? AND role = 'owner'").bind(team).first<{ n: number }>();
  return r?.n ?? 0;
}

/** The guard every change of an owner carries: some other owner stays. */
const ANOTHER_OWNER_STAYS = "(role != 'owner' OR (SELECT COUNT(*) FROM members o WHERE o.team = ?1 AND o.role = 'owner' AND o.member_id != ?2) > 0)";
const lastOwner = (team: string) => fail('forbidden', `this is the last owner of team "${team}": make another member owner first`);

export async function setMemberRole(env: Env, team: string, memberId: string, role: Role): Promise<Result<MemberRow>> {
  const guard = role === 'owner' ? '1' : ANOTHER_OWNER_STAYS;
  const r = await env.DB.prepare(`UPDATE members SET role = ?3 WHERE team = ?1 AND member_id = ?2 AND ${guard} RETURNING ${MEMBER_COLUMNS}`)
    .bind(team, memberId, role)
    .all<DbMember>();
  if (r.results.length) return { ok: true, value: toMember(r.results[0]) };
  const still = await findMember(env, team, memberId);
  return still.ok ? lastOwner(team) : still;
}

export async function removeMember(env: Env, team: string, memberId: string): Promise<Result<MemberRow>> {
  const r = await env.DB.prepare(`DELETE FROM members WHERE team = ?1 AND member_id = ?2 AND ${ANOTHER_OWNER_STAYS} RETURNING ${MEMBER_COLUMNS}`)
    .bind(team, memberId)
    .all<DbMember>();
  if (r.results.length) return { ok: true, value: toMember(r.results[0]) };
  const still = await findMember(env, team, memberId);
  return still.ok ? lastOwner(team) : still;
}

/** A new invitation; the secret is returned once (for the link) and only its hash is kept. */
export async function createInvitation(
  env: Env,
  i: { team: string; email: string; role: Role; ttlSeconds: number; createdBy: string; now?: number },
): Promise<{ invitation: InvitationRow; secret: string }> {
  const now = i.now ?? Date.now();
  const secret = randomSecret();
  const row: DbInvitation = {
    invitation_id: randomId('inv_', 12),
    team: i.team,
    email: normalizeEmail(i.email),
    role: i.role,
    created_at: now,
    expires_at: now + i.ttlSeconds * 1000,
    created_by: i.createdBy,
    accepted_at: null,
    accepted_member_id: null,
    revoked_at: null,
  };
  await env.DB.batch([
    env.DB.prepare('INSERT OR IGNORE INTO teams (id, created_at) VALUES (?, ?)').bind(i.team, now),
    env.DB.prepare(
      `INSERT INTO member_invitations (invitation_id, team, email, role, secret_hash, created_at, expires_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ).bind(row.invitation_id, row.team, row.email, row.role, await hashSecret(secret), row.created_at, row.expires_at, row.created_by),
  ]);
  return { invitation: toInvitation(row), secret };
}

/** The team's invitations, newest first (pending, used, expired and revoked alike). */
export async function listInvitations(env: Env, team: string, limit = 500): Promise<InvitationRow[]> {
  const r = await env.DB.prepare(`SELECT ${INVITATION_COLUMNS} FROM member_invitations WHERE team = ? ORDER BY created_at DESC, invitation_id LIMIT ?`)
    .bind(team, limit)
    .all<DbInvitation>();
  return r.results.map(toInvitation);
}

/** Withdraws a pending invitation (its link stops working). Idempotent; a used one cannot be withdrawn. */
export async function revokeInvitation(env: Env, team: string, invitationId: string, now = Date.now()): Promise<Result<InvitationRow>> {
  await env.DB.prepare('UPDATE member_invitations SET revoked_at = ? WHERE team = ? AND invitation_id = ? AND revoked_at IS NULL AND accepted_at IS NULL')
    .bind(now, team, invitationId)
    .run();
  const row = await env.DB.prepare(`SELECT ${INVITATION_COLUMNS} FROM member_invitations WHERE team = ? AND invitation_id = ?`)
    .bind(team, invitationId)
    .first<DbInvitation>();
  if (!row) return fail('not_found', `no invitation "${invitationId.slice(0, 100)}" in team "${team}" (see GET /admin/v1/members/invitations)`);
  if (row.accepted_at !== null) return fail('invalid_argument', `invitation ${invitationId} was already accepted; remove the member instead`);
  return { ok: true, value: toInvitation(row) };
}

/** What a valid invitation link offers, before it is taken (the join page shows it). */
export async function peekInvitation(env: Env, secret: string, now = Date.now()): Promise<Result<InvitationRow>> {
  const row = await env.DB.prepare(`SELECT ${INVITATION_COLUMNS} FROM member_invitations WHERE secret_hash = ?`)
    .bind(await hashSecret(secret))
    .first<DbInvitation>();
  if (!row) return fail('not_found', 'this invitation link is not valid: ask a team admin for a new one');
  if (row.accepted_at !== null) return fail('forbidden', 'this invitation link was already used: each link works once; ask a team admin for a new one');
  if (row.revoked_at !== null) return fail('forbidden', 'this invitation was withdrawn by a team admin');
  if (row.expires_at <= now) return fail('forbidden', `this invitation expired at ${new Date(row.expires_at).toISOString()}; ask a team admin for a new one`);
  return { ok: true, value: toInvitation(row) };
}

/**
 * Takes an invitation as `who`: at most once (the conditional UPDATE is the single use), only by
 * the identity whose verified email it was sent to. Someone already in the team keeps their role.
 */
export async function acceptInvitation(
  env: Env,
  secret: string,
  who: Identity,
  now = Date.now(),
): Promise<Result<{ member: MemberRow; invitation: InvitationRow; joined: boolean }>> {
  const peek = await peekInvitation(env, secret, now);
  if (!peek.ok) return peek;
  const inv = peek.value;
  if (!who.email || !who.emailVerified || normalizeEmail(who.email) !== inv.email) {
    return fail(
      'forbidden',
      `this invitation is for ${inv.email}; you are signed in as ${who.email ?? 'an identity without an email'}${who.email && !who.emailVerified ? ' (not verified by your identity provider)' : ''}: sign in with that address`,
    );
  }
  const memberId = randomId('mem_', 10);
  const taken = await env.DB.prepare(
    `UPDATE member_invitations SET accepted_at = ?1, accepted_member_id = ?2
     WHERE secret_hash = ?3 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ?1 RETURNING invitation_id`,
  )
    .bind(now, memberId, await hashSecret(secret))
    .all<{ invitation_id: string }>();
  if (!taken.results.length) return fail('forbidden', 'this invitation link was already used: each link works once; ask a team admin for a new one');
  const inserted = await env.DB.prepare(
    `INSERT INTO members (member_id, team, issuer, subject, email, name, role, created_at, added_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (team, issuer, subject) DO NOTHING RETURNING ${MEMBER_COLUMNS}`,
  )
    .bind(memberId, inv.team, who.issuer, who.subject, normalizeEmail(who.email), who.name, inv.role, now, `invitation:${inv.invitationId}`)
    .all<DbMember>();
  if (inserted.results.length) {
    return { ok: true, value: { member: toMember(inserted.results[0]), invitation: { ...inv, acceptedAt: now, acceptedMemberId: memberId }, joined: true } };
  }
  const existing = (await membershipsOf(env, who.issuer, who.subject)).find((m) => m.team === inv.team)!;
  await env.DB.prepare('UPDATE member_invitations SET accepted_member_id = ? WHERE invitation_id = ?').bind(existing.memberId, inv.invitationId).run();
  return { ok: true, value: { member: existing, invitation: { ...inv, acceptedAt: now, acceptedMemberId: existing.memberId }, joined: false } };
}

/** Notes that a member acted (the Members page's "last seen"); at most once a minute per member. */
export async function touchMember(env: Env, memberId: string, now = Date.now()): Promise<void> {
  await env.DB.prepare('UPDATE members SET last_seen_at = ?1 WHERE member_id = ?2 AND (last_seen_at IS NULL OR last_seen_at < ?1 - 60000)')
    .bind(now, memberId)
    .run();
}

/** The order of roles by authority: a change to a lower one is a demotion. */
const RANK: Record<Role, number> = { member: 0, admin: 1, owner: 2 };
export const isDemotion = (from: Role, to: Role): boolean => RANK[to] < RANK[from];

/** Ends every signed-in session of `issuer`/`subject` issued up to `now` (ms): they sign in again. */
export async function endSessionsOf(env: Env, issuer: string, subject: string, now = Date.now()): Promise<void> {
  await env.DB.prepare(
    `INSERT INTO member_sessions_ended (issuer, subject, ended_at) VALUES (?1, ?2, ?3)
     ON CONFLICT (issuer, subject) DO UPDATE SET ended_at = max(ended_at, excluded.ended_at)`,
  )
    .bind(issuer, subject, now)
    .run();
}

/** Whether a session of `issuer`/`subject` issued at `issuedAt` (ms) was ended since. */
export async function sessionEnded(env: Env, issuer: string, subject: string, issuedAt: number): Promise<boolean> {
  const r = await env.DB.prepare('SELECT ended_at FROM member_sessions_ended WHERE issuer = ? AND subject = ?')
    .bind(issuer, subject)
    .first<{ ended_at: number }>();
  return r !== null && r.ended_at >= issuedAt;
}
