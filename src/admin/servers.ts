/**
 * The team's remote MCP servers, which its scripts call as `servers.<id>` (docs/script-mode.md):
 * `GET /servers`, `PUT /servers/:id` `{url, headers?, description?, auth?, scope?}`, `DELETE /servers/:id`,
 * and for `auth: "oauth"` `POST /servers/:id/connect` (answers the URL an admin opens to connect the team;
 * src/script/remote-oauth.ts). Headers and tokens are sealed (src/platform/secret-box.ts) before the team's
 * object stores them; no answer and no audit row carries their values, only header names and token scopes.
 */
import { Hono, type Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { describeIssues } from '../contracts/errors.ts';
import { REMOTE_SERVER_HEADERS_SEALED_MAX_BYTES, RemoteServerInput, ServerId, remoteHeadersAad, type StoredRemoteServer } from '../contracts/mcp-servers.ts';
import { sealSecret, secretsKey } from '../platform/secret-box.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { listRemoteServers, putRemoteServer, remoteServerRow, removeRemoteServer } from '../dispatch/remote-servers-client.ts';
import { publicOrigin } from '../auth/config.ts';
import { beginConnect } from '../script/remote-oauth.ts';
import { ServerConnectInput } from '../contracts/remote-oauth.ts';
import { apiError, readJson } from './http.ts';

export const serverRoutes = new Hono<AppEnv>();

serverRoutes.get('/', async (c) => c.json({ servers: await listRemoteServers(c.env, c.get('principal').team) }));

serverRoutes.put('/:id', async (c) => {
  const p = c.get('principal');
  const id = validId(c);
  if (id instanceof Response) return id;
  const body = await readJson(c);
  if (!body.ok) return body.response;
  const parsed = RemoteServerInput.safeParse(body.value);
  if (!parsed.success)
    return apiError(
      c,
      'invalid_argument',
      `${describeIssues(parsed.error.issues)}; expected {"url": "https://…/mcp", "headers": {"Name": "value"}, "description": "…", "auth": "headers" | "oauth", "scope": "…"}`,
    );
  const { url, headers, description, auth, scope } = parsed.data;
  const key = await secretsKey(c.env);
  if (!key.ok) return apiError(c, key.error.code, key.error.message);
  const sealedHeaders = await sealSecret(key.value, JSON.stringify(headers), remoteHeadersAad(p.team, id));
  if (new TextEncoder().encode(sealedHeaders).byteLength > REMOTE_SERVER_HEADERS_SEALED_MAX_BYTES)
    return apiError(c, 'payload_too_large', `the headers take more than ${REMOTE_SERVER_HEADERS_SEALED_MAX_BYTES} bytes sealed`);
  const server: StoredRemoteServer = {
    id,
    url,
    headerNames: Object.keys(headers),
    sealedHeaders,
    auth,
    scope: scope ?? null,
    description: description ?? null,
    createdAt: Date.now(),
    createdBy: p.subject,
  };
  const { replaced } = await putRemoteServer(c.env, p.team, server);
  await recordAudit(c.env, {
    team: p.team,
    subject: p.subject,
    tokenId: p.tokenId,
    tool: 'admin.server_put',
    command: { server: id, url, headerNames: server.headerNames, auth },
    decision: 'allowed',
    reason: `${replaced ? 'replaced' : 'registered'} remote MCP server ${id}`,
  });
  const { sealedHeaders: _sealed, ...rest } = server;
  return c.json({ server: { ...rest, createdAt: new Date(server.createdAt).toISOString() }, replaced }, replaced ? 200 : 201);
});

serverRoutes.post('/:id/connect', async (c) => {
  const p = c.get('principal');
  const id = validId(c);
  if (id instanceof Response) return id;
  const row = await remoteServerRow(c.env, p.team, id);
  if (!row) return apiError(c, 'not_found', `no remote MCP server "${id}" in this team; GET /admin/v1/servers lists them`);
  if (row.auth !== 'oauth')
    return apiError(
      c,
      'conflict',
      `servers.${id} is registered with headers, not OAuth; register it again with "auth": "oauth" (gatehouse servers add ${id} <URL> --oauth)`,
    );
  // A body is optional here (`{}` and none mean the same).
  let input: ServerConnectInput = {};
  if ((await c.req.text()).trim() !== '') {
    const body = await readJson(c);
    if (!body.ok) return body.response;
    const parsed = ServerConnectInput.safeParse(body.value);
    if (!parsed.success) return apiError(c, 'invalid_argument', `${describeIssues(parsed.error.issues)}; expected {} or {"newClient": true}`);
    input = parsed.data;
  }
  const started = await beginConnect(c.env, publicOrigin(c.req.raw, c.env), p.team, row, { subject: p.subject, tokenId: p.tokenId }, input);
  if (!started.ok) return apiError(c, started.code, started.message);
  await recordAudit(c.env, {
    team: p.team,
    subject: p.subject,
    tokenId: p.tokenId,
    tool: 'admin.server_connect',
    command: { server: id, url: row.url, client: started.client },
    decision: 'allowed',
    reason: `started an OAuth connection to remote MCP server ${id} (${started.client === 'reused' ? 'the client registered before' : 'a newly registered client'})`,
  });
  return c.json({ server: id, authorizationUrl: started.authorizationUrl, expiresAt: new Date(started.expiresAt).toISOString(), client: started.client });
});

serverRoutes.delete('/:id', async (c) => {
  const p = c.get('principal');
  const id = validId(c);
  if (id instanceof Response) return id;
  const removed = await removeRemoteServer(c.env, p.team, id);
  if (!removed) return apiError(c, 'not_found', `no remote MCP server "${id}" in this team; GET /admin/v1/servers lists them`);
  await recordAudit(c.env, {
    team: p.team,
    subject: p.subject,
    tokenId: p.tokenId,
    tool: 'admin.server_remove',
    command: { server: id },
    decision: 'allowed',
    reason: `removed remote MCP server ${id}`,
  });
  return c.json({ removed: id });
});

function validId(c: Context<AppEnv>): string | Response {
  const raw = c.req.param('id') ?? '';
  const r = ServerId.safeParse(raw);
  return r.success ? r.data : apiError(c, 'invalid_argument', `server id "${raw.slice(0, 80)}": ${describeIssues(r.error.issues)}`);
}
