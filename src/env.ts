/** Bindings and configuration of the edge Worker (wrangler.toml [vars], secrets, bindings). */
import type { TeamDispatcher } from './dispatch/team-dispatcher.ts';
import type { AgentGrant } from './contracts/agent-grant.ts';
import type { Role } from './members/roles.ts';
import type { Minter } from './auth/minter.ts';

/**
 * The Worker's bindings and [vars] come from wrangler.toml through `npm run types`
 * (src/worker-configuration.d.ts, `wrangler types`; `npm run lint` fails when it is stale).
 * Vars and optional bindings (LOADER, rate limits, OAUTH_KV) may be absent: unit tests run
 * without them. Added here: secrets and vars wrangler.toml does not list.
 */
export type Env = Pick<WranglerEnv, 'DB' | 'ARTIFACTS'> &
  Partial<Omit<WranglerEnv, 'DB' | 'ARTIFACTS' | 'TEAM_DISPATCHER'>> & {
    /** Typed with the class itself (the generated type imports it through src/index.ts). */
    TEAM_DISPATCHER: DurableObjectNamespace<TeamDispatcher>;
    /** Secret: private JWK (JSON) of the Gatehouse signing key (ES256). `npm start` generates one. */
    GATEHOUSE_SIGNING_KEY?: string;
    /**
     * Optional secret during a key rotation: a second key (its public half is enough) trusted to verify
     * tokens and published in the JWKS, never used to sign — the next key before the switch, the previous one after.
     */
    GATEHOUSE_VERIFY_KEY?: string;
    /** Optional secret: HS256 shared secret for tokens minted by another system; ≥ 32 bytes. */
    GATEHOUSE_HS_SECRET?: string;
    /** Longest accepted token lifetime in seconds (default one year). */
    MAX_TOKEN_LIFETIME_SECONDS?: string;
    /** Bench only: '1' prints a timestamped line at each step of a call (src/contracts/trace.ts). */
    HOTPATH_TRACE?: string;
    /** Cloudflare Access as the members' identity provider (src/members/access.ts): the team domain and the application's audience tag. */
    CF_ACCESS_TEAM_DOMAIN?: string;
    CF_ACCESS_AUD?: string;
    /** OpenID Connect sign-in of members (src/members/oidc.ts); OIDC_CLIENT_SECRET is a secret. */
    OIDC_ISSUER?: string;
    OIDC_CLIENT_ID?: string;
    OIDC_CLIENT_SECRET?: string;
  };

/**
 * `operator`: the deployment's operators (teams' life cycle: /operator/v1/, src/operator/). Only the holder of
 * the signing key mints it, offline (`gatehouse token bootstrap --scope operator`); no role may mint it (src/auth/minter.ts).
 */
export const SCOPES = ['execute', 'artifacts:read', 'admin', 'agent', 'operator'] as const;
export type Scope = (typeof SCOPES)[number];

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

/** Hono context variables set by middleware. */
interface AppVariables {
  principal: Principal;
}
export type AppEnv = { Bindings: Env; Variables: AppVariables };
