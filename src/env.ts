/** Bindings and configuration of the edge Worker (wrangler.toml [vars], secrets, bindings). */
import type { TeamDispatcher } from './dispatch/team-dispatcher.ts';
import type { AgentGrant } from './contracts/agent-grant.ts';
import type { Role } from './members/roles.ts';

export interface Env {
  DB: D1Database;
  ARTIFACTS: R2Bucket;
  TEAM_DISPATCHER: DurableObjectNamespace<TeamDispatcher>;
  /** Worker Loader (Dynamic Workers): run_script's isolates. Absent → run_script answers a configuration error. */
  LOADER?: WorkerLoader;
  /** Secret: private JWK (JSON) of the Gatehouse signing key (ES256). `npm start` generates one. */
  GATEHOUSE_SIGNING_KEY?: string;
  /** Optional secret: HS256 shared secret for tokens minted by another system; ≥ 32 bytes. */
  GATEHOUSE_HS_SECRET?: string;
  GATEHOUSE_ISSUER?: string;
  GATEHOUSE_AUDIENCE?: string;
  ALLOWED_ORIGINS?: string;
  MAX_BODY_BYTES?: string;
  HEARTBEAT_MS?: string;
  /** `paid` (default) or `free`: the Cloudflare Workers plan, whose limits the edge budgets with (src/platform/plan.ts). */
  GATEHOUSE_WORKERS_PLAN?: string;
  /** Bench only: '1' prints a timestamped line at each step of a call (src/mcp/trace.ts). */
  HOTPATH_TRACE?: string;
  EXTERNAL_JWKS_URL?: string;
  EXTERNAL_ISSUER?: string;
  EXTERNAL_AUDIENCE?: string;
  /** Teams the external issuer may speak for (comma-separated, `*` = any); required with EXTERNAL_ISSUER. */
  EXTERNAL_TEAMS?: string;
  /** Scopes the external issuer may grant (default `execute artifacts:read`; `admin`/`agent` only when listed). */
  EXTERNAL_SCOPES?: string;
  /** Accepted `typ` of external tokens (default `at+jwt`). */
  EXTERNAL_TOKEN_TYPES?: string;
  /** Teams and scopes HS256 tokens may carry (like EXTERNAL_TEAMS / EXTERNAL_SCOPES). */
  HS_TEAMS?: string;
  HS_SCOPES?: string;
  /** Longest accepted token lifetime in seconds (default one year). */
  MAX_TOKEN_LIFETIME_SECONDS?: string;
  /** Rate-limiting bindings (wrangler.toml `[[ratelimits]]`); absent in unit tests, where nothing is limited. */
  RL_MCP_TOKEN?: RateLimit;
  RL_MCP_TEAM?: RateLimit;
  RL_ADMIN_TOKEN?: RateLimit;
  RL_ADMIN_TEAM?: RateLimit;
  /** Extra host names (comma-separated `host[:port]`) the gateway answers on besides the issuer's and audience's. */
  ALLOWED_HOSTS?: string;
  /** KV of the OAuth authorization server (clients, grants, tokens; src/oauth/). Absent → OAuth answers 501. */
  OAUTH_KV?: KVNamespace;
  /** Cloudflare Access as the members' identity provider (src/members/access.ts): the team domain and the application's audience tag. */
  CF_ACCESS_TEAM_DOMAIN?: string;
  CF_ACCESS_AUD?: string;
  /** OpenID Connect sign-in of members (src/members/oidc.ts); OIDC_CLIENT_SECRET is a secret. */
  OIDC_ISSUER?: string;
  OIDC_CLIENT_ID?: string;
  OIDC_CLIENT_SECRET?: string;
}

export const SCOPES = ['execute', 'artifacts:read', 'admin', 'agent'] as const;
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
  /** A signed-in person (src/members/): their membership and role in `team`. Absent: an API token. */
  member?: { memberId: string; role: Role };
}

/** Hono context variables set by middleware. */
export interface AppVariables {
  principal: Principal;
}
export type AppEnv = { Bindings: Env; Variables: AppVariables };
