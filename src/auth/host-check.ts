/**
 * Host validation (DNS rebinding): a page on `evil.example` whose name was re-pointed at the
 * gateway's address sends `Host: evil.example`. Only hosts the gateway is configured to be — the
 * hosts of GATEHOUSE_AUDIENCE and GATEHOUSE_ISSUER, plus ALLOWED_HOSTS — are answered; a gateway
 * without that configuration (development) answers on loopback names only. Everything derived
 * from the request URL afterwards (own origin, metadata, challenges) is therefore from a checked host.
 *
 * ```ts
 * app.use('*', hostCheck());
 * ```
 */
import type { MiddlewareHandler } from 'hono';
import type { AppEnv, Env } from '../env.ts';
import { isDevelopmentGateway, isLoopbackHost } from './config.ts';
import { gatewayConfig } from '../platform/config.ts';

const blank = (s: string | undefined): s is undefined => s === undefined || s.trim() === '';

function hostOf(url: string): string | null {
  try {
    return new URL(url).host.toLowerCase();
  } catch {
    return null;
  }
}

/** The configured hosts (`name[:port]`, lower case); empty when nothing is configured (development). */
function configuredHosts(env: Env): string[] {
  const out = new Set<string>();
  for (const u of [env.GATEHOUSE_AUDIENCE, env.GATEHOUSE_ISSUER]) {
    if (blank(u)) continue;
    const h = hostOf(u);
    if (h) out.add(h);
  }
  const cfg = gatewayConfig(env);
  for (const h of cfg.ok ? cfg.config.hosts : []) out.add(h);
  return [...out];
}

/** Null when the request's Host may be served, else why not. */
export function hostProblem(req: Request, env: Env): string | null {
  const url = new URL(req.url);
  const host = url.host.toLowerCase();
  const configured = configuredHosts(env);
  if (configured.includes(host)) return null;
  // Development (no audience, or a loopback one): loopback names, any port.
  if (isDevelopmentGateway(env) && isLoopbackHost(url.hostname)) return null;
  if (!configured.length) {
    return `Host "${host.slice(0, 100)}" is not served by this gateway: without GATEHOUSE_ISSUER and GATEHOUSE_AUDIENCE it is a development gateway and answers on localhost, 127.0.0.1 and [::1] only; to serve this host, set both (and ALLOWED_HOSTS for any other name)`;
  }
  return `Host "${host.slice(0, 100)}" is not served by this gateway (allowed: ${configured.join(', ')}); set ALLOWED_HOSTS to add one`;
}

export function hostCheck(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const problem = hostProblem(c.req.raw, c.env);
    if (!problem) return next();
    // 421 Misdirected Request: the request reached a server that is not the one its Host names.
    return c.json({ error: { code: 'misdirected_request', message: problem } }, 421);
  };
}
