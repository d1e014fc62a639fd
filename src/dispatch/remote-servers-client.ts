/**
 * The edge's side of the team's remote MCP servers (remote-servers.ts in the team's object): the
 * admin API registers and lists them, a script's host reads the sealed rows to call them.
 */
import type { Env } from '../env.ts';
import type { RemoteServerView, StoredRemoteServer } from '../contracts/mcp-servers.ts';
import { teamStub } from './client.ts';

export async function putRemoteServer(env: Env, team: string, server: StoredRemoteServer): Promise<{ replaced: boolean }> {
  const r = await teamStub(env, team).remoteServers({ op: 'put', server });
  return { replaced: r.op === 'put' && r.replaced };
}

export async function listRemoteServers(env: Env, team: string): Promise<RemoteServerView[]> {
  const r = await teamStub(env, team).remoteServers({ op: 'list' });
  return r.op === 'list' ? r.servers : [];
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
