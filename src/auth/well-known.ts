/**
 * Discovery documents: RFC 9728 protected-resource metadata (how MCP clients find out which
 * issuer and scopes to use) and the public JWKS of the Gatehouse signing key.
 */
import { Hono, type Handler } from 'hono';
import { SCOPES } from '../contracts/scopes.ts';
import type { AppEnv } from '../env.ts';
import { canonicalMcpUrl, gatehouseIssuer, publicOrigin, trustConfig } from './config.ts';
import { OPERATOR_SCOPE } from './minter.ts';

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
    // The operators' scope is no scope of this resource's (it is minted offline, for /operator/v1/).
    scopes_supported: SCOPES.filter((s) => s !== OPERATOR_SCOPE),
    jwks_uri: `${origin}/.well-known/jwks.json`,
    resource_name: 'Gatehouse',
  });
};

wellKnownRoutes.get('/.well-known/oauth-protected-resource', metadata);
// RFC 9728 §3.1: the metadata URL of a resource with a path inserts the path after the well-known name.
wellKnownRoutes.get('/.well-known/oauth-protected-resource/mcp', metadata);

wellKnownRoutes.get('/.well-known/jwks.json', async (c) => {
  const cfg = await trustConfig(c.env);
  c.header('Cache-Control', 'public, max-age=300');
  // The signing key and, while a rotation lasts, the verify-only one: tokens of either verify.
  return c.json({ keys: cfg.ok ? cfg.value.publicKeys : [] });
});
