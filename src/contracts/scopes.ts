/** The scopes a Gatehouse token carries: what the gateway checks and the CLI mints. */

/**
 * `operator`: the deployment's operators (teams' life cycle: /operator/v1/, src/operator/). Only the holder of
 * the signing key mints it, offline (`gatehouse token bootstrap --scope operator`); no role may mint it (src/auth/minter.ts).
 */
export const SCOPES = ['execute', 'artifacts:read', 'admin', 'agent', 'operator'] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * The scopes a client can obtain through OAuth (the consent page grants only these): what the protected-resource
 * metadata advertises and the authorization server supports. `admin` and `agent` are minted as tokens only.
 */
export const OAUTH_SCOPES = ['execute', 'artifacts:read'] as const satisfies readonly Scope[];
