/**
 * Who is calling, from a verified token (src/auth/verify.ts, src/oauth/verify.ts) or a member's
 * session (src/members/auth.ts): set on the request by the middleware that verified it.
 */
import type { AgentGrant } from '../contracts/agent-grant.ts';
import type { Role } from '../members/roles.ts';
import type { Minter } from './minter.ts';

/** Who is calling, from a verified token. Every query is keyed by `team`. */
export interface Principal {
  team: string;
  subject: string;
  scopes: string[];
  /** Token id (`jti`), used for revocation and audit. */
  tokenId: string;
  issuer: string;
  /** An agent token's grant: what its agents may claim in `hello`. Absent: whatever they say (src/contracts/agent-grant.ts). */
  agentGrant?: AgentGrant;
  /** Who minted this API token (signed `minted_by` claim of the gateway's own tokens; src/auth/minter.ts). Absent: unattributed, capped at admin. */
  minter?: Minter;
  /** A signed-in person (src/members/): their membership and role in `team`. Absent: an API token. */
  member?: { memberId: string; role: Role };
}

// Hono's way to type a context variable for every route: `c.get('principal')` is a Principal.
// Declared here, not in src/env.ts, so the platform's Env names no type of the rooms above it.
declare module 'hono' {
  interface ContextVariableMap {
    principal: Principal;
  }
}
