/** Bindings and configuration of the edge Worker (wrangler.toml [vars], secrets, bindings): the ground floor, importing nothing. */

/**
 * The Worker's bindings and [vars] come from wrangler.toml through `npm run types`
 * (src/worker-configuration.d.ts, `wrangler types`; `npm run lint` fails when it is stale).
 * Vars and optional bindings (LOADER, rate limits, OAUTH_KV) may be absent: unit tests run
 * without them. Added here: secrets and vars wrangler.toml does not list. TEAM_DISPATCHER keeps
 * the generated type, `DurableObjectNamespace<import("./index").TeamDispatcher>`: its RPC stub is
 * typed with the class the Worker exports, and this file names no room above it.
 */
export type Env = Pick<WranglerEnv, 'DB' | 'ARTIFACTS' | 'TEAM_DISPATCHER'> &
  Partial<Omit<WranglerEnv, 'DB' | 'ARTIFACTS' | 'TEAM_DISPATCHER'>> & {
    /** Secret: private JWK (JSON) of the Gatehouse signing key (ES256). `npm start` generates one. */
    GATEHOUSE_SIGNING_KEY?: string;
    /**
     * Optional secret during a key rotation: a second key (its public half is enough) trusted to verify
     * tokens and published in the JWKS, never used to sign — the next key before the switch, the previous one after.
     */
    GATEHOUSE_VERIFY_KEY?: string;
    /** Optional secret: HS256 shared secret for tokens minted by another system; ≥ 32 bytes. */
    GATEHOUSE_HS_SECRET?: string;
    /**
     * Secret: 32 random bytes (base64) that seal team secrets at rest (src/platform/secret-box.ts). Unset: secret
     * operations are refused with a config_error. `npm start` generates one.
     */
    GATEHOUSE_SECRETS_KEY?: string;
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
 * The Hono app's environment: the bindings. A context variable is typed beside the middleware that
 * sets it, in Hono's `ContextVariableMap` (`principal`: src/auth/principal.ts).
 */
export type AppEnv = { Bindings: Env };
