/**
 * Ending OAuth grants: the D1 row (src/store/oauth-grants.ts) decides at once — every request is
 * admitted from it — and the authorization server then forgets the grant and its tokens, so its refresh
 * token mints nothing more. A grant whose KV cleanup fails stays ended by its D1 row; the next request
 * that presents one of its tokens tries the cleanup again.
 */
import type { Env } from '../env.ts';
import type { GrantKey } from '../store/oauth-grants.ts';

/** Deletes the grants (and their access and refresh tokens) from the authorization server's store. */
export async function forgetGrants(req: Request, env: Env, keys: GrantKey[]): Promise<{ forgotten: number; failed: string[] }> {
  if (!keys.length) return { forgotten: 0, failed: [] };
  // Loaded only here: the library needs the Workers runtime (`cloudflare:` modules).
  const { authorizationServer, hasOAuthStore } = await import('./server.ts');
  if (!hasOAuthStore(env)) return { forgotten: 0, failed: [] };
  const api = authorizationServer(req, env).getOAuthApi(env as never);
  const failed: string[] = [];
  for (const k of keys) {
    try {
      await api.revokeGrant(k.grantId, k.userId);
    } catch (e) {
      console.error(`oauth: could not delete grant ${k.grantId} from OAUTH_KV (${(e as Error).message}); its D1 row keeps it ended`);
      failed.push(k.grantId);
    }
  }
  return { forgotten: keys.length - failed.length, failed };
}
