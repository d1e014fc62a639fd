/**
 * Discovery documents: RFC 9728 protected-resource metadata (how MCP clients find out which
 * issuer and scopes to use) and the public JWKS of the Gatehouse signing key.
 */
import { Hono, type Handler } from 'hono';
import { OAUTH_SCOPES } from '../contracts/scopes.ts';
import type { AppEnv } from '../env.ts';
import { canonicalMcpUrl, gatehouseIssuer, publicOrigin, RESOURCE_METADATA_PATH, resourcePath, trustConfig } from './config.ts';

export const wellKnownRoutes = new Hono<AppEnv>();

const metadata: Handler<AppEnv> = async (c) => {
  const cfg = await trustConfig(c.env);
  const origin = publicOrigin(c.req.raw, c.env);
  const servers = [gatehouseIssuer(c.req.raw, c.env)];
  if (cfg.ok && cfg.value.external && !servers.includes(cfg.value.external.issuer)) servers.push(cfg.value.external.issuer);
  c.header('Cache-Control', 'public, max-age=300');
  return c.json({
    resource: canonicalMcpUrl(c.req.raw, c.env),
    authorization_servers: servers,
    bearer_methods_supported: ['header'],
    // Only what a client can obtain: listing `admin` or `agent` would make clients ask for scopes consent never grants.
    scopes_supported: [...OAUTH_SCOPES],
    jwks_uri: `${origin}/.well-known/jwks.json`,
    resource_name: 'Gatehouse',
  });
};

// Clients that drop the resource's path look here; the 401 names the path-suffixed URL below.
wellKnownRoutes.get(RESOURCE_METADATA_PATH, metadata);
// RFC 9728 §3.1: the metadata URL of a resource with a path inserts the path after the well-known name
// (`/mcp` by default; the path of GATEHOUSE_AUDIENCE when that is set).
wellKnownRoutes.get(`${RESOURCE_METADATA_PATH}/*`, (c, next) =>
  c.req.path === `${RESOURCE_METADATA_PATH}${resourcePath(c.req.raw, c.env)}` ? metadata(c, next) : c.notFound(),
);

wellKnownRoutes.get('/.well-known/jwks.json', async (c) => {
  const cfg = await trustConfig(c.env);
  c.header('Cache-Control', 'public, max-age=300');
  // The signing key and, while a rotation lasts, the verify-only one: tokens of either verify.
  return c.json({ keys: cfg.ok ? cfg.value.publicKeys : [] });
});
