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

export async function api<T>(conn: Connection, method: string, path: string, body?: unknown): Promise<ApiResult<T>> {
  let res: Response;
  try {
    const scoped = conn.team ? `/teams/${encodeURIComponent(conn.team)}${path}` : path;
    res = await fetch(`${conn.url}/admin/v1${scoped}`, {
      method,
      headers: { Authorization: `Bearer ${conn.token}`, Accept: 'application/json', ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    return {
      ok: false,
      error: { status: 0, code: 'unreachable', message: `cannot reach ${conn.url}: ${cause?.code ?? cause?.message ?? (e as Error).message}` },
    };
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const err = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
    return {
      ok: false,
      error: { status: res.status, code: err?.code ?? `http_${res.status}`, message: err?.message ?? (text.slice(0, 300) || res.statusText) },
    };
  }
  if (json === undefined)
    return { ok: false, error: { status: res.status, code: 'bad_response', message: `the gateway answered non-JSON: ${text.slice(0, 200)}` } };
  return { ok: true, value: json as T };
}

/** A request whose answer is not JSON (an NDJSON export): its text and headers, or the error. */
export async function apiText(conn: Connection, path: string): Promise<ApiResult<{ text: string; headers: Headers }>> {
  let res: Response;
  try {
    const scoped = conn.team ? `/teams/${encodeURIComponent(conn.team)}${path}` : path;
    res = await fetch(`${conn.url}/admin/v1${scoped}`, { headers: { Authorization: `Bearer ${conn.token}` }, signal: AbortSignal.timeout(120_000) });
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
      err = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error;
    } catch {
      err = undefined;
    }
    return {
      ok: false,
      error: { status: res.status, code: err?.code ?? `http_${res.status}`, message: err?.message ?? (text.slice(0, 300) || res.statusText) },
    };
  }
  return { ok: true, value: { text, headers: res.headers } };
}

/** The gateway's message can quote what a caller sent: shown through `visible`, on one line. */
export const formatError = (e: ApiError) => `error (${visible(e.code)}): ${visible(e.message)}`;
