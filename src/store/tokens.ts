/**
 * Issued tokens and revocations (D1). Every query is keyed by team: a jti of another team is
 * "not found", and a team can only revoke its own tokens.
 */
import type { Env } from '../env.ts';
import { AgentGrant } from '../contracts/agent-grant.ts';
import { Minter } from '../auth/minter.ts';

export interface TokenRow {
  jti: string;
  subject: string;
  scopes: string[];
  createdAt: number;
  expiresAt: number;
  revokedAt: number | null;
  note: string | null;
  /** An agent token's grant (what its agents may claim); null: none, its agents claim what they say. */
  agentGrant: AgentGrant | null;
  /** Who minted it (src/auth/minter.ts); null: not recorded (minted before minters were, capped at admin). */
  mintedBy: Minter | null;
  /** The `kid` of the key that signed it; null: not recorded. */
  signingKid: string | null;
}

interface DbTokenRow {
  jti: string;
  subject: string;
  scopes: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
  note: string | null;
  agent_grant: string | null;
  minted_by: string | null;
  minter_role: string | null;
  signing_kid: string | null;
}

/** A minter as stored: 'bootstrap' or 'member:<id>' (one indexed column), plus the role beside it. */
const MEMBER_PREFIX = 'member:';
const storedMinter = (m: Minter | null): string | null => (m === null ? null : m.kind === 'bootstrap' ? 'bootstrap' : `${MEMBER_PREFIX}${m.memberId}`);

function minterOf(by: string | null, role: string | null): Minter | null {
  if (by === null) return null;
  const m = Minter.safeParse(by === 'bootstrap' ? { kind: 'bootstrap' } : { kind: 'member', memberId: by.slice(MEMBER_PREFIX.length), role });
  return m.success ? m.data : null;
}

const toRow = (r: DbTokenRow): TokenRow => ({
  jti: r.jti,
  subject: r.subject,
  scopes: r.scopes.split(' ').filter(Boolean),
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  revokedAt: r.revoked_at,
  note: r.note,
  agentGrant: grantOf(r.agent_grant),
  mintedBy: minterOf(r.minted_by, r.minter_role),
  signingKid: r.signing_kid,
});

/** The stored grant as written by insertToken; a row that does not parse shows as none (the token carries its own). */
function grantOf(json: string | null): AgentGrant | null {
  if (json === null) return null;
  try {
    const g = AgentGrant.safeParse(JSON.parse(json));
    return g.success ? g.data : null;
  } catch {
    return null;
  }
}

/** Records a minted token (times in ms since the epoch, like every other table). */
export async function insertToken(
  env: Env,
  t: {
    jti: string;
    team: string;
    subject: string;
    scopes: string[];
    createdAt: number;
    expiresAt: number;
    note?: string | null;
    agentGrant?: AgentGrant | null;
    mintedBy: Minter | null;
    signingKid: string | null;
  },
): Promise<void> {
  await env.DB.batch([
    env.DB.prepare('INSERT OR IGNORE INTO teams (id, created_at) VALUES (?, ?)').bind(t.team, t.createdAt),
    env.DB.prepare(
      'INSERT INTO tokens (jti, team, subject, scopes, created_at, expires_at, revoked_at, note, agent_grant, minted_by, minter_role, signing_kid) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)',
    ).bind(
      t.jti,
      t.team,
      t.subject,
      t.scopes.join(' '),
      t.createdAt,
      t.expiresAt,
      t.note ?? null,
      t.agentGrant ? JSON.stringify(t.agentGrant) : null,
      storedMinter(t.mintedBy),
      t.mintedBy?.kind === 'member' ? t.mintedBy.role : null,
      t.signingKid,
    ),
  ]);
}

/** The team's recorded tokens, newest first. */
export async function listTokens(env: Env, team: string, limit = 1000): Promise<TokenRow[]> {
  const r = await env.DB.prepare(
    'SELECT jti, subject, scopes, created_at, expires_at, revoked_at, note, agent_grant, minted_by, minter_role, signing_kid FROM tokens WHERE team = ? ORDER BY created_at DESC, jti LIMIT ?',
  )
    .bind(team, limit)
    .all<DbTokenRow>();
  return r.results.map(toRow);
}

export type RevokeTarget =
  | { ok: true; value: { jti: string; revokedAt: number; recorded: boolean } }
  | { ok: false; error: { code: 'not_found'; message: string } };

/**
 * What revoking `jti` for `team` would record: when (the first revocation's time if there is one)
 * and whether the gateway issued it. A token this gateway issued must be one of the team's (else
 * not found). A token it did not issue (offline bootstrap, external issuer) is only revoked when
 * the caller says so with `unrecorded`, so a typo in a jti is "not found" rather than a silent no-op.
 * Revocations are keyed by (team, jti): another team revoking the same jti changes nothing here.
 */
export async function revocationTarget(env: Env, team: string, jti: string, o: { unrecorded?: boolean; now?: number } = {}): Promise<RevokeTarget> {
  const now = o.now ?? Date.now();
  const [owner, existing] = await env.DB.batch<{ revoked_at: number | null }>([
    env.DB.prepare('SELECT revoked_at FROM tokens WHERE jti = ? AND team = ?').bind(jti, team),
    env.DB.prepare('SELECT revoked_at FROM revocations WHERE team = ? AND jti = ?').bind(team, jti),
  ]);
  const own = owner.results[0];
  const prior = own?.revoked_at ?? existing.results[0]?.revoked_at ?? null;
  if (!own && prior === null && !o.unrecorded) {
    return {
      ok: false,
      error: {
        code: 'not_found',
        message: `token "${jti}" not found among the team's issued tokens (see GET /admin/v1/tokens); to revoke a token this gateway did not issue (offline bootstrap, external issuer), repeat the request with ?unrecorded=true`,
      },
    };
  }
  return { ok: true, value: { jti, revokedAt: prior ?? now, recorded: own !== undefined } };
}

/** Records a revocation in the directory (idempotent: revoking twice keeps the first time). The team's DO took it first. */
export async function recordRevocation(env: Env, team: string, jti: string, revokedAt: number): Promise<void> {
  await env.DB.batch([
    env.DB.prepare('INSERT OR IGNORE INTO revocations (team, jti, revoked_at) VALUES (?, ?, ?)').bind(team, jti, revokedAt),
    env.DB.prepare('UPDATE tokens SET revoked_at = ? WHERE jti = ? AND team = ? AND revoked_at IS NULL').bind(revokedAt, jti, team),
  ]);
}

/** The live (not revoked, not expired) tokens member `memberId` of `team` minted, with the role they minted them as. */
export async function liveTokensMintedBy(env: Env, team: string, memberId: string, now = Date.now()): Promise<TokenRow[]> {
  const r = await env.DB.prepare(
    `SELECT jti, subject, scopes, created_at, expires_at, revoked_at, note, agent_grant, minted_by, minter_role, signing_kid FROM tokens
     WHERE team = ? AND minted_by = ? AND revoked_at IS NULL AND expires_at > ? ORDER BY created_at, jti`,
  )
    .bind(team, `${MEMBER_PREFIX}${memberId}`, now)
    .all<DbTokenRow>();
  return r.results.map(toRow);
}
