/** The admin API client of the CLI: connection settings, JSON requests, errors as values. */
import { UsageError } from './args.ts';
import { visible } from './visible-text.ts';

export interface Connection {
  url: string;
  token: string;
  /** --team: requests go to /admin/v1/teams/<team>/…, which the gateway checks against the token's team. */
  team?: string;
}

export interface ApiError {
  status: number;
  code: string;
  message: string;
}

export type ApiResult<T> = { ok: true; value: T } | { ok: false; error: ApiError };

/** --url/--token, else GATEHOUSE_URL/GATEHOUSE_ADMIN_TOKEN; missing either is a usage error. */
export function connection(flags: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): Connection {
  const url = (flags.url as string | undefined) ?? env.GATEHOUSE_URL;
  const token = (flags.token as string | undefined) ?? env.GATEHOUSE_ADMIN_TOKEN;
  if (!url) throw new UsageError('no gateway URL: pass --url or set GATEHOUSE_URL');
  if (!token) throw new UsageError('no admin token: pass --token or set GATEHOUSE_ADMIN_TOKEN');
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`--url "${url}" is not a URL`);
  }
  // The MCP URL is what users have at hand; the admin API lives beside it.
  const base = u.href.replace(/\/+$/, '').replace(/\/mcp$/, '');
  const team = flags.team as string | undefined;
  return { url: base, token: token.trim(), ...(team ? { team } : {}) };
}

/**
 * One admin API request: the answer's status, text and headers, or the gateway unreachable. A non-2xx
 * answer becomes the gateway's `{ error: { code, message } }` (or its status and first bytes).
 */
async function request(
  conn: Connection,
  method: string,
  path: string,
  o: { body?: unknown; accept?: string; timeoutMs: number },
): Promise<ApiResult<{ status: number; text: string; headers: Headers }>> {
  let res: Response;
  try {
    const scoped = conn.team ? `/teams/${encodeURIComponent(conn.team)}${path}` : path;
    res = await fetch(`${conn.url}/admin/v1${scoped}`, {
      method,
      headers: {
        Authorization: `Bearer ${conn.token}`,
        ...(o.accept ? { Accept: o.accept } : {}),
        ...(o.body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: o.body === undefined ? undefined : typeof o.body === 'string' ? o.body : JSON.stringify(o.body),
      signal: AbortSignal.timeout(o.timeoutMs),
    });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    return {
      ok: false,
      error: { status: 0, code: 'unreachable', message: `cannot reach ${conn.url}: ${cause?.code ?? cause?.message ?? (e as Error).message}` },
    };
  }
  const text = await res.text();
  if (!res.ok) {
    let err: { code?: string; message?: string } | undefined;
    try {
      err = (JSON.parse(text) as { error?: { code?: string; message?: string } } | null)?.error;
    } catch {
      err = undefined;
    }
    return {
      ok: false,
      error: { status: res.status, code: err?.code ?? `http_${res.status}`, message: err?.message ?? (text.slice(0, 300) || res.statusText) },
    };
  }
  return { ok: true, value: { status: res.status, text, headers: res.headers } };
}

export async function api<T>(conn: Connection, method: string, path: string, body?: unknown): Promise<ApiResult<T>> {
  const r = await request(conn, method, path, { body, accept: 'application/json', timeoutMs: 30_000 });
  if (!r.ok) return r;
  const { status, text } = r.value;
  try {
    return { ok: true, value: (text ? JSON.parse(text) : null) as T };
  } catch {
    return { ok: false, error: { status, code: 'bad_response', message: `the gateway answered non-JSON: ${text.slice(0, 200)}` } };
  }
}

/** A request whose answer is not JSON (an NDJSON export): its text and headers, or the error. */
export async function apiText(conn: Connection, path: string): Promise<ApiResult<{ text: string; headers: Headers }>> {
  const r = await request(conn, 'GET', path, { timeoutMs: 120_000 });
  return r.ok ? { ok: true, value: { text: r.value.text, headers: r.value.headers } } : r;
}

/** The gateway's message can quote what a caller sent: shown through `visible`, on one line. */
export const formatError = (e: ApiError) => `error (${visible(e.code)}): ${visible(e.message)}`;
