/**
 * Admin: mint, list and revoke the team's tokens. The minted token is returned once and never stored.
 * A token carries who minted it and may hold only what its minter's role may mint (src/auth/minter.ts).
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { SCOPES } from '../contracts/scopes.ts';
import type { AppEnv } from '../env.ts';
import { describeIssues } from '../contracts/errors.ts';
import { AgentGrant } from '../contracts/agent-grant.ts';
import { strictInput } from '../contracts/strict-input.ts';
import { mintToken } from '../auth/mint.ts';
import { canonicalMcpUrl, gatehouseIssuer } from '../auth/config.ts';
import { authorityOf, minterFor, mintRefusal } from '../auth/minter.ts';
import { insertToken, listTokens } from '../store/tokens.ts';
import { listMembers } from '../store/members.ts';
import { apiError, readJson } from './http.ts';
import { auditAdmin } from './audit-action.ts';
import { teamNotFound } from './team.ts';
import { revokeOAuthGrant } from './oauth.ts';
import { OAUTH_TOKEN_PREFIX } from '../store/oauth-grants.ts';
import { endToken } from './token-revocation.ts';

const DEFAULT_TTL_SECONDS = 30 * 24 * 3600;
const MAX_TTL_SECONDS = 365 * 24 * 3600;
const MIN_TTL_SECONDS = 60;

const scopeList = SCOPES.join(', ');

export const CreateTokenBody = strictInput({
  team: z.string().optional(),
  subject: z
    .string()
    .min(1, 'subject is required')
    .max(200)
    .regex(/^[\x21-\x7e]+$/, 'subject must be printable ASCII without spaces'),
  scopes: z
    .array(z.string())
    .min(1, `at least one scope is required; allowed: ${scopeList}`)
    .superRefine((xs, ctx) => {
      for (const s of xs) {
        if (!(SCOPES as readonly string[]).includes(s)) ctx.addIssue({ code: 'custom', message: `unknown scope "${s}"; allowed: ${scopeList}` });
      }
    }),
  ttlSeconds: z
    .number()
    .int()
    .min(MIN_TTL_SECONDS, `ttlSeconds must be at least ${MIN_TTL_SECONDS}`)
    .max(MAX_TTL_SECONDS, `ttlSeconds must be at most ${MAX_TTL_SECONDS} (1 year)`)
    .default(DEFAULT_TTL_SECONDS),
  note: z.string().max(500).optional(),
  /** An agent token's grant: the sandboxes, labels and agent id its agents may claim (src/contracts/agent-grant.ts). */
  agentGrant: AgentGrant.optional(),
}).superRefine((b, ctx) => {
  if (b.agentGrant && !b.scopes.includes('agent')) {
    ctx.addIssue({
      code: 'custom',
      path: ['agentGrant'],
      message: `says what an agent may claim, so it needs the "agent" scope (scopes: ${b.scopes.join(', ')}); add "agent" to scopes or leave agentGrant out`,
    });
  }
});

export const tokenRoutes = new Hono<AppEnv>();

tokenRoutes.post('/', async (c) => {
  const p = c.get('principal');
  const body = await readJson(c);
  if (!body.ok) return body.response;
  const parsed = CreateTokenBody.safeParse(body.value);
  if (!parsed.success) return apiError(c, 'invalid_argument', describeIssues(parsed.error.issues));
  const b = parsed.data;
  if (b.team !== undefined && b.team !== p.team) return teamNotFound(c, b.team);
  if (!c.env.GATEHOUSE_SIGNING_KEY?.trim()) {
    return apiError(c, 'config_error', 'GATEHOUSE_SIGNING_KEY is not configured: this gateway cannot mint tokens');
  }
  const scopes = [...new Set(b.scopes)];
  const minter = minterFor(p);
  const refused = mintRefusal(authorityOf(p), scopes, minter === null);
  if (refused) {
    await auditAdmin(c, 'admin.token_create', { command: { subject: b.subject, scopes }, ok: false, reason: refused });
    return apiError(c, 'forbidden', refused);
  }
  const now = Date.now();
  const minted = await mintToken({
    privateJwk: c.env.GATEHOUSE_SIGNING_KEY,
    issuer: gatehouseIssuer(c.req.raw, c.env),
    audience: canonicalMcpUrl(c.req.raw, c.env),
    team: p.team,
    subject: b.subject,
    scopes,
    ttlSeconds: b.ttlSeconds,
    now: Math.floor(now / 1000),
    agentGrant: b.agentGrant,
    minter,
  });
  const expiresAt = minted.expiresAt * 1000;
  const agentGrant = b.agentGrant ?? null;
  await insertToken(c.env, {
    jti: minted.jti,
    team: p.team,
    subject: b.subject,
    scopes,
    createdAt: now,
    expiresAt,
    note: b.note ?? null,
    agentGrant,
    mintedBy: minter,
    signingKid: minted.kid,
  });
  await auditAdmin(c, 'admin.token_create', {
    command: { jti: minted.jti, subject: b.subject, scopes, ttlSeconds: b.ttlSeconds, mintedBy: minter, ...(agentGrant ? { agentGrant } : {}) },
    ok: true,
  });
  return c.json({ token: minted.token, jti: minted.jti, team: p.team, subject: b.subject, scopes, expiresAt, agentGrant, mintedBy: minter }, 201);
});

/** What ends a token, in words for the list: the person it came from, or nothing but its own revocation. */
function endsWith(m: { kind: 'bootstrap' } | { kind: 'member'; role: string } | null, email: string | null): string {
  if (m === null) return 'its revocation or expiry (minted before minters were recorded: acts at most as an admin)';
  if (m.kind === 'bootstrap') return 'its revocation or expiry (minted with the signing key: acts as an owner)';
  return `its revocation, expiry, or ${email ?? 'its minter'} leaving the team or losing the ${m.role} role`;
}

tokenRoutes.get('/', async (c) => {
  const p = c.get('principal');
  const [tokens, members] = await Promise.all([listTokens(c.env, p.team), listMembers(c.env, p.team)]);
  const emailOf = new Map(members.map((m) => [m.memberId, m.email]));
  return c.json({
    tokens: tokens.map((t) => {
      const email = t.mintedBy?.kind === 'member' ? (emailOf.get(t.mintedBy.memberId) ?? null) : null;
      return { ...t, minterEmail: email, endsWith: endsWith(t.mintedBy, email) };
    }),
  });
});

tokenRoutes.delete('/:jti', async (c) => {
  const p = c.get('principal');
  const jti = c.req.param('jti');
  if (!/^[A-Za-z0-9._:-]{1,200}$/.test(jti)) return apiError(c, 'invalid_argument', `malformed token id "${jti.slice(0, 60)}"`);
  const unrecorded = c.req.query('unrecorded');
  if (unrecorded !== undefined && unrecorded !== 'true' && unrecorded !== 'false') {
    return apiError(c, 'invalid_argument', `unrecorded must be "true" or "false", got "${unrecorded.slice(0, 20)}"`);
  }
  // An OAuth principal's token id names its grant: revoking it revokes the grant (never a bare revocation
  // of an id the gateway does not know).
  if (jti.startsWith(OAUTH_TOKEN_PREFIX)) return revokeOAuthGrant(c, jti.slice(OAUTH_TOKEN_PREFIX.length));
  // The OAuth grants this token consented to end with it; an agent connected with it goes now.
  const r = await endToken(c.req.raw, c.env, p.team, jti, { unrecorded: unrecorded === 'true' });
  await auditAdmin(c, 'admin.token_revoke', {
    command: r.ok && r.value.oauthGrantsEnded.length ? { jti, oauthGrantsEnded: r.value.oauthGrantsEnded } : { jti },
    ok: r.ok,
    reason: r.ok ? undefined : r.error.message,
  });
  if (!r.ok) return apiError(c, 'not_found', r.error.message);
  return c.json(r.value);
});
