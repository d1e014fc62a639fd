/**
 * The edge's side of the team's remote MCP servers (remote-servers.ts in the team's object): the
 * admin API registers and lists them, a script's host reads the sealed rows to call them.
 */
import type { Env } from '../env.ts';
import type { RemoteServerView, StoredRemoteServer } from '../contracts/mcp-servers.ts';
import { NOT_CONNECTED } from '../contracts/remote-oauth.ts';
import { teamStub } from './client.ts';
import { oauthViews } from './remote-oauth-client.ts';

export async function putRemoteServer(env: Env, team: string, server: StoredRemoteServer): Promise<{ replaced: boolean }> {
  const r = await teamStub(env, team).remoteServers({ op: 'put', server });
  return { replaced: r.op === 'put' && r.replaced };
}

/** The registered servers, each OAuth one with its connection's state (two calls to the team's object: an admin read). */
export async function listRemoteServers(env: Env, team: string): Promise<RemoteServerView[]> {
  const [r, views] = await Promise.all([teamStub(env, team).remoteServers({ op: 'list' }), oauthViews(env, team)]);
  if (r.op !== 'list') return [];
  return r.servers.map((s) => (s.auth === 'oauth' ? { ...s, oauth: views[s.id] ?? NOT_CONNECTED } : s));
}

/** One registered server, with its sealed headers (null if there is none by that id). */
export async function remoteServerRow(env: Env, team: string, id: string): Promise<StoredRemoteServer | null> {
  return (await remoteServerRows(env, team)).find((s) => s.id === id) ?? null;
}

/** Every registered server with its sealed headers, for a script's catalog (one call to the team's object). */
export async function remoteServerRows(env: Env, team: string): Promise<StoredRemoteServer[]> {
  const r = await teamStub(env, team).remoteServers({ op: 'rows' });
  return r.op === 'rows' ? r.servers : [];
}

export async function removeRemoteServer(env: Env, team: string, id: string): Promise<boolean> {
  const r = await teamStub(env, team).remoteServers({ op: 'remove', id });
  return r.op === 'remove' && r.removed;
}
