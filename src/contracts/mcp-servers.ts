/**
 * MCP servers a script can call (`servers.<id>.call(tool, args)`, `servers.<id>.listTools()`):
 * stdio servers named in the job workspace's `.mcp.json`, and remote Streamable HTTP servers an
 * admin registers for the team. Defined once here: the admin API, the CLI, the team's object and
 * the script host all use these shapes.
 */
import { z } from 'zod';
import { SQLITE_ROW_MAX_BYTES } from '../platform/limits.ts';
import type { OAuthConnectionView } from './remote-oauth.ts';

/** A server id is a property name a script writes (`servers.docs`, `servers["my-docs"]`). */
const SERVER_ID_RULE = 'a server id is 1 to 64 characters of A-Z, a-z, 0-9, "_" and "-"';
export const ServerId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, SERVER_ID_RULE);
export type ServerId = z.infer<typeof ServerId>;

/** The workspace file a script's stdio servers come from (the standard shape MCP clients read). */
export const MCP_JSON_FILE = '.mcp.json';
/** Largest `.mcp.json` read: a server list is a few kilobytes; a larger file is refused rather than cut. */
export const MCP_JSON_MAX_BYTES = 64 * 1024;

const StdioServerEntry = z.object({
  command: z.string().min(1, 'command is empty').max(4096),
  args: z
    .array(z.string().max(64 * 1024))
    .max(1000)
    .default([]),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'env names are [A-Za-z_][A-Za-z0-9_]*'), z.string().max(64 * 1024)).default({}),
});
export type StdioServerEntry = z.infer<typeof StdioServerEntry>;

const McpJsonFile = z.object({ mcpServers: z.record(ServerId, StdioServerEntry) });

/** `.mcp.json` read: its servers, or an error naming the file and the key that is wrong. */
export function parseMcpJson(text: string): { ok: true; servers: Record<string, StdioServerEntry> } | { ok: false; message: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return { ok: false, message: `${MCP_JSON_FILE}: not valid JSON (${e instanceof Error ? e.message : String(e)})` };
  }
  const r = McpJsonFile.safeParse(raw);
  if (r.success) return { ok: true, servers: r.data.mcpServers };
  const issue = r.error.issues[0]!;
  const key = issue.path.length ? issue.path.map(String).join('.') : '(top level)';
  // zod reports a bad record key as "Invalid key in record": say what a key must be.
  const message = issue.code === 'invalid_key' ? SERVER_ID_RULE : issue.message;
  return { ok: false, message: `${MCP_JSON_FILE}: ${key}: ${message}; expected {"mcpServers": {"<id>": {"command": "…", "args": […], "env": {…}}}}` };
}

/**
 * Headers of one remote server (an API key, an Authorization header). Sealed together as one value
 * in the team object's row, whose limit is SQLITE_ROW_MAX_BYTES (2 MB): these caps keep a sealed
 * set under a tenth of it.
 */
const REMOTE_SERVER_HEADERS_MAX = 20;
const REMOTE_SERVER_HEADER_VALUE_MAX_CHARS = 8 * 1024;
export const REMOTE_SERVER_HEADERS_SEALED_MAX_BYTES = SQLITE_ROW_MAX_BYTES / 10;

const HeaderName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/, 'a header name is an HTTP token (letters, digits, -, …)');
// Headers the transport sets itself: a registration cannot override them.
const RESERVED_HEADERS = new Set([
  'host',
  'content-type',
  'content-length',
  'accept',
  'mcp-session-id',
  'mcp-protocol-version',
  'connection',
  'transfer-encoding',
]);

/** How the gateway authenticates to a server: the registered headers only, or an OAuth connection as well. */
const RemoteServerAuth = z.enum(['headers', 'oauth']);
type RemoteServerAuth = z.infer<typeof RemoteServerAuth>;

/**
 * What an admin registers: the server's MCP endpoint, the headers sent with every request to it, and
 * `auth: "oauth"` for a server that wants an OAuth access token (connected afterwards, src/contracts/remote-oauth.ts).
 */
export const RemoteServerInput = z
  .object({
    url: z
      .string()
      .max(2048)
      .url('url must be an absolute http(s) URL')
      .refine((u) => /^https?:$/.test(new URL(u).protocol), 'url must be http: or https:')
      .refine(
        (u) => new URL(u).username === '' && new URL(u).password === '',
        'url must not carry credentials: put them in headers, which are stored encrypted',
      ),
    headers: z
      .record(HeaderName, z.string().max(REMOTE_SERVER_HEADER_VALUE_MAX_CHARS, `a header value is at most ${REMOTE_SERVER_HEADER_VALUE_MAX_CHARS} characters`))
      .refine((h) => Object.keys(h).length <= REMOTE_SERVER_HEADERS_MAX, `at most ${REMOTE_SERVER_HEADERS_MAX} headers`)
      .refine((h) => Object.keys(h).every((k) => !RESERVED_HEADERS.has(k.toLowerCase())), `headers may not set ${[...RESERVED_HEADERS].join(', ')}`)
      .default({}),
    description: z.string().max(500).optional(),
    auth: RemoteServerAuth.default('headers'),
    /** Scopes to ask the authorization server for (space-separated); else what the server's metadata names. */
    scope: z
      .string()
      .max(1000)
      .regex(/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/, 'scope is space-separated scope tokens')
      .optional(),
  })
  .refine((s) => s.auth === 'oauth' || s.scope === undefined, { message: 'scope is for auth "oauth"', path: ['scope'] })
  .refine((s) => s.auth !== 'oauth' || !Object.keys(s.headers).some((k) => k.toLowerCase() === 'authorization'), {
    message: 'with auth "oauth" the gateway sends the Authorization header itself: leave it out of headers',
    path: ['headers'],
  });
export type RemoteServerInput = z.infer<typeof RemoteServerInput>;

/** What seals a server's headers to its team and id (a row moved to another team or id does not open). */
export function remoteHeadersAad(team: string, id: string): string {
  return `gatehouse:remote-mcp-server:${team}:${id}`;
}

/** A registered server as admins see it: the header names only, never their values. */
export interface RemoteServerView {
  id: string;
  url: string;
  headerNames: string[];
  auth: RemoteServerAuth;
  scope: string | null;
  /** For auth "oauth": the connection's state, expiry and scopes (never a token). */
  oauth?: OAuthConnectionView;
  description: string | null;
  createdAt: string;
  createdBy: string;
}

/** A registered server as the team's object keeps it: the headers sealed (src/platform/secret-box.ts). */
export interface StoredRemoteServer {
  id: string;
  url: string;
  headerNames: string[];
  sealedHeaders: string;
  auth: RemoteServerAuth;
  scope: string | null;
  description: string | null;
  createdAt: number;
  createdBy: string;
}

/** What a script sends its host for a server: validated there (the isolate is untrusted). */
export const ServerRequest = z.discriminatedUnion('op', [
  z.object({ op: z.literal('list_tools'), server: z.string().max(200) }),
  z.object({ op: z.literal('call'), server: z.string().max(200), tool: z.string().min(1).max(256), args: z.record(z.string(), z.unknown()).default({}) }),
]);
export type ServerRequest = z.infer<typeof ServerRequest>;
