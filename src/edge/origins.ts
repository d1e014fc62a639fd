/**
 * Which browser origins may drive the MCP endpoint. A pure decision (`originVerdict`) and the
 * configuration it reads (`originRules`); `src/edge/cors.ts` turns it into HTTP.
 *
 * - A development gateway (no GATEHOUSE_AUDIENCE, or a loopback one as `npm start` configures; hostCheck
 *   lets it answer on loopback names only) allows every loopback origin on any port: the MCP Inspector's UI, a local web IDE, a page
 *   served by a dev server. A non-loopback origin is refused (DNS rebinding, cross-site pages).
 * - A configured deployment allows its own origin and the exact `scheme://host[:port]` entries of
 *   ALLOWED_ORIGINS; `https://*.example.com` allows subdomains of example.com only when written so.
 */
import type { Env } from '../env.ts';
import { isDevelopmentGateway, isLoopbackHost, publicOrigin } from '../auth/config.ts';
import { gatewayConfig } from '../platform/config.ts';

export interface OriginRules {
  self: string;
  /** Exact origins (scheme://host[:port], lower-case host). */
  exact: string[];
  /** `https://*.example.com` entries as [scheme, ".example.com"]. */
  wildcard: [string, string][];
  development: boolean;
}

export type OriginVerdict = { ok: true } | { ok: false; errorCode: 'origin_not_allowed' | 'origin_malformed'; message: string };

export function originRules(req: Request, env: Env): OriginRules {
  const cfg = gatewayConfig(env);
  const { exact, wildcard } = cfg.ok ? cfg.config.origins : { exact: [], wildcard: [] };
  return {
    self: publicOrigin(req, env).toLowerCase(),
    exact,
    wildcard,
    development: isDevelopmentGateway(env),
  };
}

/** Whether a request carrying `Origin: origin` may use the endpoint. */
export function originVerdict(origin: string, rules: OriginRules): OriginVerdict {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return { ok: false, errorCode: 'origin_malformed', message: `Origin "${origin.slice(0, 200)}" is not an origin (scheme://host[:port])` };
  }
  const o = url.origin.toLowerCase();
  if (o === rules.self || rules.exact.includes(o)) return { ok: true };
  if (rules.development && (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackHost(url.hostname)) return { ok: true };
  const scheme = url.protocol.slice(0, -1);
  const hostPort = url.host.toLowerCase();
  if (rules.wildcard.some(([s, suffix]) => s === scheme && hostPort.endsWith(suffix) && hostPort.length > suffix.length)) return { ok: true };
  const allowed = [
    rules.self,
    ...rules.exact,
    ...rules.wildcard.map(([s, suffix]) => `${s}://*${suffix}`),
    ...(rules.development ? ['any loopback origin (development gateway)'] : []),
  ];
  return {
    ok: false,
    errorCode: 'origin_not_allowed',
    message: `Origin "${origin.slice(0, 200)}" is not allowed (allowed: ${allowed.join(', ')}; ALLOWED_ORIGINS adds more)`,
  };
}
