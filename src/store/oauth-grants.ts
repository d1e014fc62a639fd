/**
 * OAuth grants in D1: one row per consent, keyed by the authorization server's grant id and scoped by
 * team (another team's grant id is "not found"). The row is what an admin lists and revokes; every
 * request with the grant's access token is admitted from it (see `oauthAdmissionOf`).
 */
import type { Env } from '../env.ts';
import type { PolicyStamp } from './admission.ts';
import type { OAuthGrantState, OAuthGrantView } from '../contracts/oauth-grants.ts';

/** How long an authorization code may be exchanged (the authorization server keeps an unexchanged grant this long). */
const AUTH_CODE_TTL_MS = 600_000;

function grantState(r: DbGrant, now: number): OAuthGrantState {
  if (r.revoked_at !== null) return 'revoked';
  if (r.code_exchanged_at === null) return r.created_at + AUTH_CODE_TTL_MS < now ? 'abandoned' : 'pending';
  return r.expires_at !== null && r.expires_at <= now ? 'expired' : 'active';
}

interface DbGrant {
  grant_id: string;
  client_id: string;
  client_name: string | null;
  subject: string;
  consent_token_id: string;
  scopes: string;
  created_at: number;
  expires_at: number | null;
  last_used_at: number | null;
  revoked_at: number | null;
  revoked_reason: string | null;
  code_exchanged_at: number | null;
  user_id: string;
}

const toRow = (r: DbGrant, now = Date.now()): OAuthGrantView => ({
  grantId: r.grant_id,
  clientId: r.client_id,
  clientName: r.client_name,
  subject: r.subject,
  consentTokenId: r.consent_token_id,
  scopes: r.scopes.split(' ').filter(Boolean),
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  lastUsedAt: r.last_used_at,
  revokedAt: r.revoked_at,
  revokedReason: r.revoked_reason,
  codeExchangedAt: r.code_exchanged_at,
  state: grantState(r, now),
});

/** A grant the authorization server must also forget (its KV record and tokens). */
export interface GrantKey {
  grantId: string;
  userId: string;
}

/** The token id an OAuth principal carries (audit rows, `DELETE /admin/v1/tokens/<id>`). */
export const OAUTH_TOKEN_PREFIX = 'oauth-';
export const GRANT_ID_RE = /^[A-Za-z0-9_-]{1,100}$/;
/** Client ids: registered ones are random strings; Client ID Metadata Document ones are HTTPS URLs. */
export const CLIENT_ID_RE = /^[\x21-\x7e]{1,1000}$/;

/** The grant id inside one of the authorization server's codes or tokens ("userId:grantId:secret"); '' if none. */
export const grantIdOf = (codeOrToken: string): string => codeOrToken.split(':')[1] ?? '';

/** Last-used times are written at most this often per grant, so a busy client costs one D1 write a minute. */
export const LAST_USED_RESOLUTION_MS = 60_000;

export async function recordGrant(
  env: Env,
  g: {
    grantId: string;
    team: string;
    userId: string;
    clientId: string;
    clientName: string | null;
    subject: string;
    consentTokenId: string;
    scopes: string[];
    createdAt: number;
    expiresAt: number | null;
  },
): Promise<GrantKey[]> {
  // The authorization server replaces a user's earlier grant of the same client (one grant per user and
  // client): those rows end here too, so the list never shows a grant whose tokens are gone.
  const replaced = await env.DB.prepare(`SELECT grant_id, user_id FROM oauth_grants WHERE team = ? AND user_id = ? AND client_id = ? AND revoked_at IS NULL`)
    .bind(g.team, g.userId, g.clientId)
    .all<{ grant_id: string; user_id: string }>();
  await env.DB.batch([
    env.DB.prepare(`UPDATE oauth_grants SET revoked_at = ?, revoked_reason = ? WHERE team = ? AND user_id = ? AND client_id = ? AND revoked_at IS NULL`).bind(
      g.createdAt,
      `replaced by grant ${g.grantId}`,
      g.team,
      g.userId,
      g.clientId,
    ),
    env.DB.prepare(
      `INSERT INTO oauth_grants (grant_id, team, user_id, client_id, client_name, subject, consent_token_id, scopes, created_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).bind(g.grantId, g.team, g.userId, g.clientId, g.clientName, g.subject, g.consentTokenId, g.scopes.join(' '), g.createdAt, g.expiresAt),
  ]);
  return replaced.results.map((r) => ({ grantId: r.grant_id, userId: r.user_id }));
}

/** The team's grants, newest first (revoked ones too, so an admin sees what was ended and why). */
export async function listGrants(env: Env, team: string, limit = 1000): Promise<OAuthGrantView[]> {
  const r = await env.DB.prepare(`SELECT * FROM oauth_grants WHERE team = ? ORDER BY created_at DESC, grant_id LIMIT ?`).bind(team, limit).all<DbGrant>();
  const now = Date.now();
  return r.results.map((g) => toRow(g, now));
}

/** The client exchanged the grant's code: from pending to active (the first exchange's time stays). */
export async function noteCodeExchanged(env: Env, grantId: string, now = Date.now()): Promise<void> {
  await env.DB.prepare('UPDATE oauth_grants SET code_exchanged_at = coalesce(code_exchanged_at, ?) WHERE grant_id = ?').bind(now, grantId).run();
}

export type GrantRevocation = { ok: true; value: { grant: OAuthGrantView; key: GrantKey } } | { ok: false; error: { code: 'not_found'; message: string } };

/** Revokes one grant of `team`; idempotent (the first time and reason stay). Unknown ids are not found. */
export async function revokeGrantRow(env: Env, team: string, grantId: string, reason: string, now = Date.now()): Promise<GrantRevocation> {
  const row = await env.DB.prepare(
    `UPDATE oauth_grants SET revoked_at = coalesce(revoked_at, ?), revoked_reason = coalesce(revoked_reason, ?)
     WHERE team = ? AND grant_id = ? RETURNING *`,
  )
    .bind(now, reason, team, grantId)
    .first<DbGrant>();
  if (!row) {
    return {
      ok: false,
      error: { code: 'not_found', message: `OAuth grant "${grantId}" not found among the team's grants (see GET /admin/v1/oauth/grants)` },
    };
  }
  return { ok: true, value: { grant: toRow(row), key: { grantId: row.grant_id, userId: row.user_id } } };
}

/** Ends every live grant of `team` matching `where` (consenting token or client); returns what ended. */
async function revokeWhere(env: Env, team: string, column: 'consent_token_id' | 'client_id', value: string, reason: string, now: number): Promise<GrantKey[]> {
  const r = await env.DB.prepare(
    `UPDATE oauth_grants SET revoked_at = ?, revoked_reason = ? WHERE team = ? AND ${column} = ? AND revoked_at IS NULL RETURNING grant_id, user_id`,
  )
    .bind(now, reason, team, value)
    .all<{ grant_id: string; user_id: string }>();
  return r.results.map((x) => ({ grantId: x.grant_id, userId: x.user_id }));
}

/** The admin token that consented is revoked: its grants end with it. */
export function revokeGrantsOfToken(env: Env, team: string, jti: string, now = Date.now()): Promise<GrantKey[]> {
  return revokeWhere(env, team, 'consent_token_id', jti, `the admin token ${jti} that consented was revoked`, now);
}

/** The grants a member consented to (`member:<id>`) end, with `reason` (removed, role lowered). */
export function revokeGrantsOfMember(env: Env, team: string, memberSubject: string, reason: string, now = Date.now()): Promise<GrantKey[]> {
  return revokeWhere(env, team, 'consent_token_id', memberSubject, reason, now);
}

/** Cuts a client off in `team`: its grants end and it cannot be granted there again until unblocked. */
export async function blockClient(env: Env, team: string, clientId: string, now = Date.now()): Promise<{ ended: GrantKey[]; known: boolean }> {
  const known = await env.DB.prepare(`SELECT 1 AS k FROM oauth_grants WHERE team = ? AND client_id = ? LIMIT 1`).bind(team, clientId).first();
  if (!known) return { ended: [], known: false };
  await env.DB.prepare(`INSERT OR IGNORE INTO oauth_blocked_clients (team, client_id, blocked_at) VALUES (?, ?, ?)`).bind(team, clientId, now).run();
  return { ended: await revokeWhere(env, team, 'client_id', clientId, `client ${clientId} was revoked for the team`, now), known: true };
}

export async function unblockClient(env: Env, team: string, clientId: string): Promise<boolean> {
  const r = await env.DB.prepare(`DELETE FROM oauth_blocked_clients WHERE team = ? AND client_id = ?`).bind(team, clientId).run();
  return (r.meta.changes ?? 0) > 0;
}

export async function isClientBlocked(env: Env, team: string, clientId: string): Promise<boolean> {
  return (await env.DB.prepare(`SELECT 1 AS b FROM oauth_blocked_clients WHERE team = ? AND client_id = ?`).bind(team, clientId).first()) !== null;
}

export type OAuthAdmission = { ok: true; policy: PolicyStamp; lastUsedAt: number | null } | { ok: false; message: string; key: GrantKey | null };

/**
 * Whether grant `grantId` of `team` may be used now, in one query (like `admissionOf` for tokens):
 * recorded, not revoked, the consenting admin token not revoked, the client not blocked, and no bare
 * revocation of its token id. Never cached: a revocation holds from the very next request.
 */
export async function oauthAdmissionOf(env: Env, team: string, grantId: string): Promise<OAuthAdmission> {
  const row = await env.DB.prepare(
    `SELECT g.grant_id AS grant_id, g.user_id AS user_id, g.revoked_at AS revoked_at, g.revoked_reason AS revoked_reason,
       g.last_used_at AS last_used_at, g.consent_token_id AS consent_token_id,
       (EXISTS (SELECT 1 FROM revocations r WHERE r.team = ?2 AND r.jti = g.consent_token_id)
        OR EXISTS (SELECT 1 FROM tokens t WHERE t.team = ?2 AND t.jti = g.consent_token_id AND t.revoked_at IS NOT NULL)) AS consent_revoked,
       EXISTS (SELECT 1 FROM oauth_blocked_clients b WHERE b.team = ?2 AND b.client_id = g.client_id) AS client_blocked,
       EXISTS (SELECT 1 FROM revocations r WHERE r.team = ?2 AND r.jti = ?3) AS id_revoked,
       (g.consent_token_id LIKE 'member:%' AND NOT EXISTS (SELECT 1 FROM members m WHERE m.team = ?2 AND 'member:' || m.member_id = g.consent_token_id)) AS member_gone,
       p.version AS version, p.updated_at AS updated_at
     FROM (SELECT 1) LEFT JOIN oauth_grants g ON g.grant_id = ?1 AND g.team = ?2 LEFT JOIN policies p ON p.team = ?2`,
  )
    .bind(grantId, team, `${OAUTH_TOKEN_PREFIX}${grantId}`)
    .first<{
      grant_id: string | null;
      user_id: string | null;
      revoked_at: number | null;
      revoked_reason: string | null;
      last_used_at: number | null;
      consent_token_id: string | null;
      consent_revoked: number | null;
      client_blocked: number | null;
      id_revoked: number;
      member_gone: number | null;
      version: number | null;
      updated_at: number | null;
    }>();
  if (!row) throw new Error('the OAuth admission query returned no row');
  if (row.grant_id === null) {
    return {
      ok: false,
      key: null,
      message: `OAuth grant ${grantId} is not on record for team "${team}" (revoked and purged, or granted before grants were recorded): authorize again`,
    };
  }
  const key = { grantId, userId: row.user_id! };
  const why =
    row.revoked_at !== null
      ? `it was revoked (${row.revoked_reason ?? 'by an admin'})`
      : row.consent_revoked
        ? `the admin token ${row.consent_token_id} that consented to it was revoked`
        : row.member_gone
          ? `the member who consented to it (${row.consent_token_id}) left the team`
          : row.client_blocked
            ? 'its client was revoked for the team'
            : row.id_revoked
              ? `token id ${OAUTH_TOKEN_PREFIX}${grantId} was revoked`
              : null;
  if (why) return { ok: false, key, message: `OAuth grant ${grantId} has ended: ${why}; authorize again` };
  return { ok: true, policy: { version: row.version, updatedAt: row.updated_at }, lastUsedAt: row.last_used_at };
}

/** Team of a grant id (the token endpoint sees a refresh token's grant id before any team). */
export async function teamOfGrant(env: Env, grantId: string): Promise<string | null> {
  const r = await env.DB.prepare(`SELECT team FROM oauth_grants WHERE grant_id = ?`).bind(grantId).first<{ team: string }>();
  return r?.team ?? null;
}

export async function noteGrantUsed(env: Env, grantId: string, now = Date.now()): Promise<void> {
  await env.DB.prepare(`UPDATE oauth_grants SET last_used_at = ? WHERE grant_id = ? AND (last_used_at IS NULL OR last_used_at < ?)`)
    .bind(now, grantId, now - LAST_USED_RESOLUTION_MS)
    .run();
}
