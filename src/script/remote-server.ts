/**
 * A script's connection to one remote MCP server (Streamable HTTP), made from the edge with the
 * official MCP client. The registered headers are opened here, in the Worker, and go only into the
 * requests to that server: the script never holds them, and no audit row or error carries them.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Env } from '../env.ts';
import { remoteHeadersAad, type StoredRemoteServer } from '../contracts/mcp-servers.ts';
import { openSecret, secretsKey } from '../platform/secret-box.ts';

export type RemoteOpen =
  | { ok: true; client: Client; headers: Record<string, string> }
  | { ok: false; code: 'config_error' | 'upstream_error'; message: string };

/** Opens the headers and connects (initialize) within `timeoutMs`. */
export async function connectRemote(row: StoredRemoteServer, team: string, env: Env, timeoutMs: number): Promise<RemoteOpen> {
  let headers: Record<string, string> = {};
  if (row.headerNames.length > 0) {
    const key = await secretsKey(env);
    if (!key.ok) return { ok: false, code: 'config_error', message: key.error.message };
    const opened = await openSecret(key.value, row.sealedHeaders, remoteHeadersAad(team, row.id));
    if (!opened.ok) return { ok: false, code: 'config_error', message: `its stored headers do not open: ${opened.error.message}` };
    headers = JSON.parse(opened.value) as Record<string, string>;
  }
  // A redirect must not carry the headers to another origin: the SDK's default ('same-origin') refuses that.
  const transport = new StreamableHTTPClientTransport(new URL(row.url), { requestInit: { headers }, redirectPolicy: 'same-origin' });
  const client = new Client({ name: 'gatehouse-script', version: '1' }, { capabilities: {} });
  try {
    await client.connect(transport, { timeout: timeoutMs });
    return { ok: true, client, headers };
  } catch (e) {
    await client.close().catch(() => undefined);
    return { ok: false, code: 'upstream_error', message: `could not connect: ${describe(e, headers)}` };
  }
}

/** An error's message with any header value cut out (a server may echo what it was sent). */
export function describe(e: unknown, headers: Record<string, string> = {}): string {
  let m = e instanceof Error ? e.message : String(e);
  for (const v of Object.values(headers)) if (v.length >= 4) m = m.split(v).join('[redacted]');
  return m.slice(0, 1000);
}
