/** `gatehouse token create|list|revoke|bootstrap`. */
import { readFileSync } from 'node:fs';
import { parseArgs, parseDuration, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { info, iso, out, printJson, table } from './io.ts';
import { mintToken } from '../src/auth/mint.ts';
import { BOOTSTRAP_MINTER } from '../src/auth/minter.ts';
import { SCOPES } from '../src/contracts/scopes.ts';
import { SANDBOX_KINDS } from '../src/contracts/sandbox-kinds.ts';
// Types only: the grant's schema (and zod) load when a grant is given, so every other command starts fast.
import type { AgentGrant } from '../src/contracts/agent-grant.ts';

const SCOPE_LIST = SCOPES.join(', ');
const SANDBOX_LIST = SANDBOX_KINDS.join(', ');
const TEAM_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const MAX_TTL = 365 * 86400;

const CREATE_FLAGS: FlagSpecs = {
  team: { type: 'string', value: 'team', help: "team of the new token (must be the admin token's team; default: that team)" },
  scope: { type: 'list', value: 'scope', help: `scope to grant: ${SCOPE_LIST}` },
  subject: { type: 'string', value: 'name', help: 'who the token is for (default: cli-<scopes>)' },
  ttl: { type: 'string', value: 'duration', help: 'lifetime: 30d (default), 12h, 90m, 3600 (seconds); at most 1y' },
  note: { type: 'string', value: 'text', help: 'free-form note shown by token list' },
  sandbox: { type: 'list', value: 'kind', help: `agent tokens: a sandbox its agents may claim (${SANDBOX_LIST}); restricts the token to what is granted` },
  label: { type: 'list', value: 'label', help: 'agent tokens: a placement label its agents may claim (needs --sandbox)' },
  'agent-id': { type: 'string', value: 'id', help: 'agent tokens: the one agent id its agent may use (needs --sandbox)' },
};
const BOOTSTRAP_FLAGS: FlagSpecs = {
  team: { type: 'string', value: 'team', help: 'team of the token (required)' },
  scope: { type: 'list', value: 'scope', help: `scope to grant (default: admin); allowed: ${SCOPE_LIST}` },
  subject: { type: 'string', value: 'name', help: 'subject (default: bootstrap-admin)' },
  ttl: { type: 'string', value: 'duration', help: 'lifetime (default 30d, at most 1y)' },
  'key-file': {
    type: 'string',
    value: 'path',
    help: 'signing key: a JWK JSON file or a .dev.vars with GATEHOUSE_SIGNING_KEY (default: $GATEHOUSE_SIGNING_KEY)',
  },
  issuer: { type: 'string', value: 'URL', help: "the gateway's issuer (GATEHOUSE_ISSUER; default: the --url origin)" },
  audience: { type: 'string', value: 'URL', help: "the gateway's MCP URL (GATEHOUSE_AUDIENCE; default: <url>/mcp)" },
};

const TOKEN_HELP = `gatehouse token — manage the team's tokens

usage:
  gatehouse token create --scope <scope> [--scope ...] [--team t] [--subject s] [--ttl 30d] [--note text]
  gatehouse token create --scope agent --sandbox <kind> [--sandbox ...] [--label l ...] [--agent-id id] [--subject s]
  gatehouse token list
  gatehouse token revoke <jti> [--unrecorded]
  gatehouse token bootstrap --team <team> --key-file <jwk.json|.dev.vars> [--issuer URL --audience URL] [--scope admin]

create, list and revoke call the admin API (--url/$GATEHOUSE_URL, --token/$GATEHOUSE_ADMIN_TOKEN).
bootstrap mints a token offline from the signing key (the first admin token of a deployment)
and prints it; nothing is sent anywhere.
A token is never stronger than who minted it: it holds only scopes its minter's role may mint
(a member: execute, artifacts:read), acts in member changes with that role, and ends when that
member leaves the team or loses the role (token list: MINTED BY). Bootstrap tokens act as an owner.
An agent token with --sandbox/--label/--agent-id lets its agents claim only those in their hello
(the gateway closes a connection that claims more); without them, whatever its agents say.
scopes: ${SCOPE_LIST}`;

function ttlSeconds(v: unknown, fallback: number): number {
  if (v === undefined) return fallback;
  const s = parseDuration(String(v));
  if (s === null || s < 60) throw new UsageError(`--ttl "${v}" is not a duration of at least 60 seconds (examples: 30d, 12h, 90m, 3600)`);
  if (s > MAX_TTL) throw new UsageError(`--ttl "${v}" is longer than the 1 year maximum`);
  return s;
}

function scopesOf(v: unknown, fallback?: string[]): string[] {
  const list = ((v as string[] | undefined) ?? fallback ?? []).flatMap((s) => s.split(/[\s,]+/)).filter(Boolean);
  if (!list.length) throw new UsageError(`at least one --scope is required; allowed: ${SCOPE_LIST}`);
  for (const s of list) {
    if (!(SCOPES as readonly string[]).includes(s)) throw new UsageError(`unknown scope "${s}"; allowed: ${SCOPE_LIST}`);
  }
  return [...new Set(list)];
}

const GRANT_FLAG: Record<string, string> = { sandboxes: '--sandbox', labels: '--label', agentId: '--agent-id' };

/** --sandbox/--label/--agent-id as an agent grant; undefined when none is given. */
async function agentGrantOf(flags: Record<string, unknown>, scopes: string[]): Promise<AgentGrant | undefined> {
  const sandboxes = ((flags.sandbox as string[] | undefined) ?? []).flatMap((s) => s.split(/[\s,]+/)).filter(Boolean);
  const labels = ((flags.label as string[] | undefined) ?? []).flatMap((s) => s.split(/[\s,]+/)).filter(Boolean);
  const agentId = flags['agent-id'] as string | undefined;
  if (!sandboxes.length && !labels.length && agentId === undefined) return undefined;
  if (!sandboxes.length)
    throw new UsageError(
      `--label and --agent-id restrict an agent token, which then names the sandboxes its agents may claim: add --sandbox (${SANDBOX_LIST})`,
    );
  if (!scopes.includes('agent')) throw new UsageError('--sandbox, --label and --agent-id say what an agent may claim: they need --scope agent');
  const { AgentGrant } = await import('../src/contracts/agent-grant.ts');
  const g = AgentGrant.safeParse({ sandboxes, labels, ...(agentId !== undefined ? { agentId } : {}) });
  if (!g.success) throw new UsageError(g.error.issues.map((i) => `${GRANT_FLAG[String(i.path[0])] ?? 'agent grant'}: ${i.message}`).join('; '));
  return g.data;
}

/** What an agent token lets its agents claim, for token list. */
function describeGrant(t: { scopes: string[]; agentGrant?: AgentGrant | null }): string {
  if (!t.scopes.includes('agent')) return '';
  const g = t.agentGrant;
  if (!g) return 'any (not restricted)';
  return [`sandbox ${g.sandboxes.join(',')}`, `labels ${g.labels.join(',') || 'none'}`, ...(g.agentId !== undefined ? [`id ${g.agentId}`] : [])].join('; ');
}

/** Who minted a token, for token list: the person it ends with, or what it acts as. */
function describeMinter(t: {
  mintedBy?: { kind: 'bootstrap' } | { kind: 'member'; memberId: string; role: string } | null;
  minterEmail?: string | null;
}): string {
  const m = t.mintedBy;
  if (!m) return 'unrecorded (acts as admin)';
  if (m.kind === 'bootstrap') return 'bootstrap (signing key)';
  return `${t.minterEmail ?? m.memberId} (${m.role})`;
}

const MINTER_LEGEND =
  'a token a member minted ends when they leave the team or lose the role it needs; bootstrap tokens act as an owner, unrecorded ones as an admin';

const help = (usage: string, specs: FlagSpecs) => out(`${usage}\n\nflags:\n${formatFlags(specs)}`);

export async function tokenCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'create':
      return create(rest);
    case 'list':
      return list(rest);
    case 'revoke':
      return revoke(rest);
    case 'bootstrap':
      return bootstrap(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(TOKEN_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown token command "${sub}"; allowed: create, list, revoke, bootstrap`);
  }
}

async function create(argv: string[]): Promise<number> {
  const a = parseArgs(argv, CREATE_FLAGS, 'token create');
  if (a.flags.help)
    return (
      help(
        'usage: gatehouse token create --scope <scope> [--scope ...] [--team t] [--subject s] [--ttl 30d] [--note text] [--sandbox kind ... --label l ... --agent-id id]',
        CREATE_FLAGS,
      ),
      0
    );
  if (a.positionals.length || a.rest.length)
    throw new UsageError(`token create takes no positional arguments (got "${[...a.positionals, ...a.rest].join(' ')}")`);
  const scopes = scopesOf(a.flags.scope);
  const agentGrant = await agentGrantOf(a.flags, scopes);
  const team = a.flags.team as string | undefined;
  if (team !== undefined && !TEAM_RE.test(team)) throw new UsageError(`--team "${team}" is not a valid team name (${TEAM_RE.source})`);
  const body = {
    ...(team !== undefined ? { team } : {}),
    subject: (a.flags.subject as string | undefined) ?? `cli-${scopes.join('-').replace(/[^a-z0-9-]/g, '-')}`,
    scopes,
    ttlSeconds: ttlSeconds(a.flags.ttl, 30 * 86400),
    ...(a.flags.note !== undefined ? { note: a.flags.note } : {}),
    ...(agentGrant ? { agentGrant } : {}),
  };
  type Created = { token: string; jti: string; team: string; subject: string; scopes: string[]; expiresAt: number; agentGrant?: AgentGrant | null };
  const r = await api<Created>(connection(a.flags), 'POST', '/tokens', body);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(r.value.token);
  const claims = describeGrant(r.value);
  info(
    `created token ${r.value.jti} for ${r.value.subject} in team ${r.value.team} (scopes: ${r.value.scopes.join(' ')}${claims ? `; agent claims: ${claims}` : ''}; expires ${iso(r.value.expiresAt)})`,
  );
  return 0;
}

async function list(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'token list');
  if (a.flags.help) return (help('usage: gatehouse token list', {}), 0);
  if (a.positionals.length) throw new UsageError('token list takes no arguments');
  type Row = {
    jti: string;
    subject: string;
    scopes: string[];
    createdAt: number;
    expiresAt: number;
    revokedAt: number | null;
    note: string | null;
    agentGrant?: AgentGrant | null;
    mintedBy?: { kind: 'bootstrap' } | { kind: 'member'; memberId: string; role: string } | null;
    minterEmail?: string | null;
    signingKid?: string | null;
  };
  const r = await api<{ tokens: Row[] }>(connection(a.flags), 'GET', '/tokens');
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  if (!r.value.tokens.length) return (info('no tokens (offline bootstrap tokens are not listed)'), 0);
  const now = Date.now();
  const rows = r.value.tokens.map((t) => [
    t.jti,
    t.subject,
    t.scopes.join(' '),
    iso(t.createdAt),
    iso(t.expiresAt),
    t.revokedAt ? `revoked ${iso(t.revokedAt)}` : t.expiresAt < now ? 'expired' : 'active',
    describeMinter(t),
    describeGrant(t),
    t.note ?? '',
    t.signingKid ?? '-',
  ]);
  out(table([['JTI', 'SUBJECT', 'SCOPES', 'CREATED', 'EXPIRES', 'STATE', 'MINTED BY', 'AGENT CLAIMS', 'NOTE', 'KEY'], ...rows]));
  info(MINTER_LEGEND);
  return 0;
}

async function revoke(argv: string[]): Promise<number> {
  const flags = { unrecorded: { type: 'bool', help: 'revoke a token this gateway did not issue (bootstrap or external issuer)' } } as const;
  const a = parseArgs(argv, flags, 'token revoke');
  if (a.flags.help) return (help('usage: gatehouse token revoke <jti> [--unrecorded]', flags), 0);
  if (a.positionals.length !== 1) throw new UsageError('usage: gatehouse token revoke <jti> (exactly one token id; see gatehouse token list)');
  const jti = a.positionals[0];
  const r = await api<{ jti: string; revokedAt: number }>(
    connection(a.flags),
    'DELETE',
    `/tokens/${encodeURIComponent(jti)}${a.flags.unrecorded ? '?unrecorded=true' : ''}`,
  );
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`revoked ${r.value.jti} at ${iso(r.value.revokedAt)}`);
  return 0;
}

/** Reads GATEHOUSE_SIGNING_KEY from a JWK JSON file or a dotenv file (`.dev.vars`). */
function readSigningKey(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read --key-file ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const t = text.trim();
  if (t.startsWith('{')) return t;
  for (const line of t.split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?GATEHOUSE_SIGNING_KEY\s*=\s*(.*)$/.exec(line);
    if (!m) continue;
    let v = m[1].trim();
    if ((v.startsWith("'") && v.endsWith("'")) || (v.startsWith('"') && v.endsWith('"'))) {
      const quote = v[0];
      v = v.slice(1, -1);
      // dotenv unescapes \" inside double quotes.
      if (quote === '"') v = v.replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    }
    return v;
  }
  throw new UsageError(`--key-file ${path} is neither a JWK (JSON) nor a dotenv file with GATEHOUSE_SIGNING_KEY=`);
}

async function bootstrap(argv: string[]): Promise<number> {
  const a = parseArgs(argv, BOOTSTRAP_FLAGS, 'token bootstrap');
  if (a.flags.help) {
    return (
      help(
        'usage: gatehouse token bootstrap --team <team> --key-file <jwk.json|.dev.vars> [--issuer URL --audience URL | --url URL] [--scope admin]\n\nMints a token offline from the signing key and prints it (the first admin token of a deployment).',
        BOOTSTRAP_FLAGS,
      ),
      0
    );
  }
  if (a.positionals.length) throw new UsageError(`token bootstrap takes no positional arguments (got "${a.positionals.join(' ')}")`);
  const team = a.flags.team as string | undefined;
  if (!team) throw new UsageError('--team is required');
  if (!TEAM_RE.test(team)) throw new UsageError(`--team "${team}" is not a valid team name (${TEAM_RE.source})`);
  const keyFile = a.flags['key-file'] as string | undefined;
  const key = keyFile ? readSigningKey(keyFile) : process.env.GATEHOUSE_SIGNING_KEY;
  if (!key) throw new UsageError('--key-file is required (or set GATEHOUSE_SIGNING_KEY)');
  let jwk: { kty?: string; crv?: string; d?: string };
  try {
    jwk = JSON.parse(key);
  } catch {
    throw new UsageError('the signing key is not valid JSON (expected a private ES256 JWK)');
  }
  if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || !jwk.d) throw new UsageError('the signing key must be a private EC P-256 JWK (kty EC, crv P-256, with d)');
  const base = (a.flags.url as string | undefined) ?? process.env.GATEHOUSE_URL;
  let origin: string | undefined;
  if (base) {
    try {
      origin = new URL(base).origin;
    } catch {
      throw new UsageError(`--url "${base}" is not a URL`);
    }
  }
  // Minted without a trailing slash, as the gateway mints: either way the gateway accepts it.
  const trim = (u: string | undefined) => u?.trim().replace(/\/+$/, '');
  const issuer = trim((a.flags.issuer as string | undefined) ?? origin);
  const audience = trim((a.flags.audience as string | undefined) ?? (origin ? `${origin}/mcp` : undefined));
  if (!issuer || !audience) throw new UsageError('--issuer and --audience are required (or --url to derive them: issuer = origin, audience = origin/mcp)');
  const scopes = scopesOf(a.flags.scope, ['admin']);
  const minted = await mintToken({
    privateJwk: key,
    issuer,
    audience,
    team,
    subject: (a.flags.subject as string | undefined) ?? 'bootstrap-admin',
    scopes,
    ttlSeconds: ttlSeconds(a.flags.ttl, 30 * 86400),
    minter: BOOTSTRAP_MINTER,
  });
  if (a.flags.json) return (printJson({ token: minted.token, jti: minted.jti, team, scopes, issuer, audience, expiresAt: minted.expiresAt * 1000 }), 0);
  out(minted.token);
  info(
    `bootstrap token ${minted.jti} for team ${team} (scopes: ${scopes.join(' ')}; iss ${issuer}; aud ${audience}; expires ${iso(minted.expiresAt * 1000)}); revoke it with: gatehouse token revoke ${minted.jti} --unrecorded`,
  );
  return 0;
}
