/** Small helpers shared by the admin routes: JSON error answers and body parsing. */
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { ErrorCode } from '../contracts/errors.ts';
import { visible } from '../contracts/visible-text.ts';
import type { AppEnv } from '../env.ts';

/** Admin request bodies are small documents; anything larger is a mistake. */
const MAX_ADMIN_BODY_BYTES = 256 * 1024;

export const STATUS: Partial<Record<ErrorCode, ContentfulStatusCode>> = {
  invalid_argument: 400,
  unauthenticated: 401,
  insufficient_scope: 403,
  forbidden: 403,
  not_found: 404,
  payload_too_large: 413,
  config_error: 500,
  internal: 500,
  upstream_error: 503,
  team_suspended: 403,
  quota_exceeded: 429,
  limit_reached: 409,
};

/** An admin API error; the message may quote what the caller sent, so its control and bidi characters are shown as escapes. */
export function apiError(c: Context<AppEnv>, code: ErrorCode, message: string, status?: ContentfulStatusCode): Response {
  return c.json({ error: { code, message: visible(message, false, true) } }, status ?? STATUS[code] ?? 500);
}

export type Body = { ok: true; value: unknown } | { ok: false; response: Response };

/** Reads a JSON body (size-capped); answers 400/413 with a clear message otherwise. */
export async function readJson(c: Context<AppEnv>): Promise<Body> {
  const text = await c.req.text();
  if (new TextEncoder().encode(text).byteLength > MAX_ADMIN_BODY_BYTES) {
    return { ok: false, response: apiError(c, 'payload_too_large', `request body exceeds ${MAX_ADMIN_BODY_BYTES} bytes`) };
  }
  if (text.trim() === '') return { ok: false, response: apiError(c, 'invalid_argument', 'request body is empty; send a JSON document') };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, response: apiError(c, 'invalid_argument', `request body is not valid JSON: ${(e as Error).message}`) };
  }
}
