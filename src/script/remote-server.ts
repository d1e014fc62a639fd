/**
 * A script's connection to one remote MCP server (Streamable HTTP), made from the edge with the
 * official MCP client. The registered headers are opened here, in the Worker, and go only into the
 * requests to that server: the script never holds them, and no audit row or error carries them.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Env } from '../env.ts';
import { remoteHeadersAad, type StoredRemoteServer } from '../contracts/mcp-servers.ts';
import { openSecret, secretsKey } from '../platform/secret-box.ts';
import { OAuthCallAuth, OAuthConnectionError, type OAuthCallFailure } from './remote-oauth-call.ts';
import { redactSecrets } from './redact.ts';

/** A connection: its client, and what must never appear in an error (header values, tokens). */
export type RemoteOpen =
  | { ok: true; client: Client; secrets: () => string[]; oauthFailure: () => OAuthCallFailure | undefined }
  | { ok: false; code: 'config_error' | 'upstream_error' | OAuthCallFailure['code']; message: string };

/**
 * Opens the headers (and, for auth "oauth", the OAuth connection: src/script/remote-oauth-call.ts) and connects
 * (initialize) within `timeoutMs`.
 */
export async function connectRemote(row: StoredRemoteServer, team: string, env: Env, timeoutMs: number): Promise<RemoteOpen> {
  let headers: Record<string, string> = {};
  if (row.headerNames.length > 0) {
    const key = await secretsKey(env);
    if (!key.ok) return { ok: false, code: 'config_error', message: key.error.message };
    const opened = await openSecret(key.value, row.sealedHeaders, remoteHeadersAad(team, row.id));
    if (!opened.ok) return { ok: false, code: 'config_error', message: `its stored headers do not open: ${opened.error.message}` };
    headers = JSON.parse(opened.value) as Record<string, string>;
  }
  let oauth: OAuthCallAuth | undefined;
  if (row.auth === 'oauth') {
    const o = await OAuthCallAuth.open(env, team, row);
    if (!o.ok) return o;
    oauth = o.auth;
  }
  const secrets = () => [...Object.values(headers), ...(oauth?.secrets() ?? [])];
  // A redirect must not carry the headers or the token to another origin: the SDK's default ('same-origin') refuses that.
  const transport = new StreamableHTTPClientTransport(new URL(row.url), {
    requestInit: { headers },
    redirectPolicy: 'same-origin',
    ...(oauth ? { authProvider: oauth } : {}),
  });
  const client = new Client({ name: 'gatehouse-script', version: '1' }, { capabilities: {} });
  try {
    await client.connect(transport, { timeout: timeoutMs });
    return { ok: true, client, secrets, oauthFailure: () => oauth?.failure };
  } catch (e) {
    await client.close().catch(() => undefined);
    const failure = oauthFailureOf(e) ?? oauth?.failure;
    if (failure) return { ok: false, ...failure };
    return { ok: false, code: 'upstream_error', message: `could not connect: ${describe(e, secrets())}` };
  }
}

/** The OAuth failure an error stands for, if it is one (the transport may wrap what the auth provider threw). */
export function oauthFailureOf(e: unknown): OAuthCallFailure | undefined {
  for (let x: unknown = e, depth = 0; x instanceof Error && depth < 4; x = x.cause, depth++) if (x instanceof OAuthConnectionError) return x.failure;
  return undefined;
}

/** An error's message with every secret value cut out (a server may echo what it was sent). */
export function describe(e: unknown, secrets: Record<string, string> | Array<string | undefined> = []): string {
  const m = e instanceof Error ? e.message : String(e);
  const values = (Array.isArray(secrets) ? secrets : Object.values(secrets)).filter((v): v is string => typeof v === 'string');
  return redactSecrets(m, values).slice(0, 1000);
}
