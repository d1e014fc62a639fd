/** `gatehouse members list|invite|withdraw|role|remove`: the team's people and their roles. */
import { parseArgs, parseDuration, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { info, iso, out, printJson, table } from './io.ts';
// Names and emails come from identity providers and invitations: shown as data, never as terminal control.
import { visible } from '../src/contracts/visible-text.ts';

const ROLES = ['owner', 'admin', 'member'];
const ROLE_LIST = ROLES.join(', ');
const MAX_INVITE_TTL = 30 * 86400;

const MEMBERS_HELP = `gatehouse members — the team's people (signed in through the identity provider) and their roles

usage:
  gatehouse members list                                     members (role, email, last seen) and pending invitations
  gatehouse members invite <email> [--role member] [--ttl 7d]   prints a one-time link for that address
  gatehouse members withdraw <invitation-id>                 the link stops working
  gatehouse members role <member-id|email> <role>            roles: ${ROLE_LIST}
  gatehouse members remove <member-id|email>

Owners and admins manage members; only an owner makes, demotes or removes an owner; the last owner
stays. An admin token acts with an owner's authority.`;

interface MemberRow {
  memberId: string;
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
  role: string;
  createdAt: number;
  lastSeenAt: number | null;
}
interface InvitationRow {
  invitationId: string;
  email: string;
  role: string;
  createdAt: number;
  expiresAt: number;
  createdBy: string;
}

const INVITE_FLAGS: FlagSpecs = {
  role: { type: 'string', value: 'role', help: `role the invited person gets: ${ROLE_LIST} (default member)` },
  ttl: { type: 'string', value: 'duration', help: 'how long the link works: 7d (default), 12h, 90m; at most 30d' },
};

const help = (usage: string, specs: FlagSpecs) => out(`${usage}\n\nflags:\n${formatFlags(specs)}`);

export async function membersCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'list':
      return list(rest);
    case 'invite':
      return invite(rest);
    case 'withdraw':
      return withdraw(rest);
    case 'role':
      return role(rest);
    case 'remove':
      return remove(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(MEMBERS_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown members command "${sub}"; allowed: list, invite, withdraw, role, remove`);
  }
}

function roleOf(v: string | undefined): string {
  if (v === undefined) return 'member';
  if (!ROLES.includes(v)) throw new UsageError(`unknown role "${v}"; allowed: ${ROLE_LIST}`);
  return v;
}

async function list(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'members list');
  if (a.flags.help) return (help('usage: gatehouse members list', {}), 0);
  if (a.positionals.length) throw new UsageError('members list takes no arguments');
  const r = await api<{ members: MemberRow[]; invitations: InvitationRow[] }>(connection(a.flags), 'GET', '/members');
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const { members, invitations } = r.value;
  if (!members.length) info('no members yet: gatehouse members invite <email> --role owner');
  else {
    out(
      table([
        ['MEMBER', 'ROLE', 'EMAIL', 'NAME', 'IDENTITY', 'JOINED', 'LAST SEEN'],
        ...members.map((m) => [
          m.memberId,
          m.role,
          visible(m.email ?? '-'),
          visible(m.name ?? '-'),
          visible(`${m.issuer} ${m.subject}`),
          iso(m.createdAt),
          iso(m.lastSeenAt),
        ]),
      ]),
    );
  }
  if (invitations.length) {
    out('\npending invitations:');
    out(
      table([
        ['INVITATION', 'EMAIL', 'ROLE', 'EXPIRES', 'BY'],
        ...invitations.map((i) => [i.invitationId, visible(i.email), i.role, iso(i.expiresAt), visible(i.createdBy)]),
      ]),
    );
  }
  return 0;
}

async function invite(argv: string[]): Promise<number> {
  const a = parseArgs(argv, INVITE_FLAGS, 'members invite');
  if (a.flags.help) return (help('usage: gatehouse members invite <email> [--role member] [--ttl 7d]', INVITE_FLAGS), 0);
  if (a.positionals.length !== 1) throw new UsageError('usage: gatehouse members invite <email> [--role member] [--ttl 7d] (exactly one email)');
  const body: Record<string, unknown> = { email: a.positionals[0], role: roleOf(a.flags.role as string | undefined) };
  if (a.flags.ttl !== undefined) {
    const s = parseDuration(String(a.flags.ttl));
    if (s === null || s < 300 || s > MAX_INVITE_TTL) throw new UsageError(`--ttl "${a.flags.ttl}" is not a duration from 5m to 30d (examples: 7d, 12h, 90m)`);
    body.ttlSeconds = s;
  }
  const r = await api<{ invitation: InvitationRow; url: string }>(connection(a.flags), 'POST', '/members/invitations', body);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const i = r.value.invitation;
  info(
    `invitation ${i.invitationId} for ${visible(i.email)} as ${i.role}, valid until ${iso(i.expiresAt)}; send this link to them (it works once and is not shown again):`,
  );
  out(r.value.url);
  return 0;
}

async function withdraw(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'members withdraw');
  if (a.flags.help) return (help('usage: gatehouse members withdraw <invitation-id>', {}), 0);
  if (a.positionals.length !== 1) throw new UsageError('usage: gatehouse members withdraw <invitation-id> (see gatehouse members list)');
  const r = await api<{ invitation: InvitationRow & { revokedAt: number } }>(
    connection(a.flags),
    'DELETE',
    `/members/invitations/${encodeURIComponent(a.positionals[0])}`,
  );
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`invitation ${r.value.invitation.invitationId} for ${visible(r.value.invitation.email)} withdrawn`);
  return 0;
}

async function role(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'members role');
  if (a.flags.help) return (help(`usage: gatehouse members role <member-id|email> <role>   (${ROLE_LIST})`, {}), 0);
  if (a.positionals.length !== 2) throw new UsageError(`usage: gatehouse members role <member-id|email> <role> (roles: ${ROLE_LIST})`);
  const [ref, to] = a.positionals;
  const r = await api<{ member: MemberRow; previousRole: string; oauthGrantsEnded?: string[]; sessionsEnded?: boolean }>(
    connection(a.flags),
    'PATCH',
    `/members/${encodeURIComponent(ref)}`,
    { role: roleOf(to) },
  );
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const m = r.value.member;
  if (r.value.sessionsEnded) {
    info(
      `a lowered role: their signed-in sessions and ${r.value.oauthGrantsEnded?.length ?? 0} OAuth grant(s) in the team ended; they sign in and connect again`,
    );
  }
  out(
    r.value.previousRole === m.role
      ? `${m.memberId} (${visible(m.email ?? '-')}) is already ${m.role}`
      : `${m.memberId} (${visible(m.email ?? '-')}): ${r.value.previousRole} -> ${m.role}`,
  );
  return 0;
}

async function remove(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'members remove');
  if (a.flags.help) return (help('usage: gatehouse members remove <member-id|email>', {}), 0);
  if (a.positionals.length !== 1) throw new UsageError('usage: gatehouse members remove <member-id|email> (see gatehouse members list)');
  const r = await api<{ removed: MemberRow; oauthGrantsEnded?: string[]; tokensRevoked?: string[] }>(
    connection(a.flags),
    'DELETE',
    `/members/${encodeURIComponent(a.positionals[0])}`,
  );
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`removed ${r.value.removed.memberId} (${visible(r.value.removed.email ?? '-')}, ${r.value.removed.role}) from the team`);
  // What ended with the membership, by id: the admin can match them in `gatehouse oauth grants` and `gatehouse token list`.
  const grants = r.value.oauthGrantsEnded ?? [];
  const tokens = r.value.tokensRevoked ?? [];
  out(grants.length ? `OAuth grants ended (${grants.length}): ${grants.map((g) => visible(g)).join(', ')}` : 'OAuth grants ended: none');
  out(tokens.length ? `tokens revoked (${tokens.length}): ${tokens.map((t) => visible(t)).join(', ')}` : 'tokens revoked: none');
  return 0;
}
