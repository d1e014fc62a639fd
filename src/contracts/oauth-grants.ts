/**
 * An OAuth grant as the team's admins see it: one consent an admin gave an MCP client, listed by
 * `GET /oauth/grants` (src/store/oauth-grants.ts builds it from its D1 row) and by `gatehouse oauth grants`.
 */
import { z } from 'zod';

/**
 * A grant's state for people reading the list: `pending` until its code is exchanged, `abandoned` when
 * the code's lifetime passed unexchanged, `active`, `expired`, or `revoked` (its reason says why).
 */
const OAuthGrantState = z.enum(['pending', 'abandoned', 'active', 'expired', 'revoked']);
export type OAuthGrantState = z.infer<typeof OAuthGrantState>;

export const OAuthGrantView = z.object({
  grantId: z.string(),
  clientId: z.string(),
  clientName: z.string().nullable(),
  /** Who consented: the admin token's subject, and that token's id (revoking it ends the grant). */
  subject: z.string(),
  consentTokenId: z.string(),
  scopes: z.array(z.string()),
  createdAt: z.number(),
  expiresAt: z.number().nullable(),
  lastUsedAt: z.number().nullable(),
  revokedAt: z.number().nullable(),
  revokedReason: z.string().nullable(),
  /** When the client exchanged the authorization code for its first tokens; null: not (yet). */
  codeExchangedAt: z.number().nullable(),
  /** What the grant is now. */
  state: OAuthGrantState,
});
export type OAuthGrantView = z.infer<typeof OAuthGrantView>;
