/** Turns an AuthFailure into the HTTP answer: RFC 6750 / RFC 9728 challenge headers and a JSON error body. */
import type { Env } from '../env.ts';
import { resourceMetadataUrl } from './config.ts';
import type { AuthFailure } from './verify.ts';

/** Quoted-string value for a WWW-Authenticate parameter: printable ASCII only (header values must be Latin-1). */
const q = (s: string) => `"${s.replace(/[\\"]/g, "'").replace(/[^\x20-\x7e]/g, '?')}"`;

export function authErrorResponse(req: Request, env: Env, f: AuthFailure): Response {
  const headers = new Headers({ 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' });
  const meta = `resource_metadata=${q(resourceMetadataUrl(req, env))}`;
  if (f.status === 403 && f.code === 'insufficient_scope') {
    headers.set('WWW-Authenticate', `Bearer error="insufficient_scope", scope=${q(f.scope ?? '')}, error_description=${q(f.message)}, ${meta}`);
  } else if (f.status === 401 || f.status === 431) {
    headers.set('WWW-Authenticate', f.tokenPresented ? `Bearer error="invalid_token", error_description=${q(f.message)}, ${meta}` : `Bearer ${meta}`);
  } else if (f.status === 400 && f.code === 'invalid_argument') {
    headers.set('WWW-Authenticate', `Bearer error="invalid_request", error_description=${q(f.message)}, ${meta}`);
  }
  return new Response(JSON.stringify({ error: { code: f.code, message: f.message } }), { status: f.status, headers });
}
