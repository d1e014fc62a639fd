/**
 * The edge's side of the team's OAuth connections to remote MCP servers (remote-oauth.ts in the team's
 * object). Every value passed here is already sealed by the edge (src/script/remote-oauth.ts).
 */
import type { Env } from '../env.ts';
import type { OAuthConnectionView } from '../contracts/remote-oauth.ts';
import { teamStub } from './client.ts';
import type { RemoteOAuthOp, StoredOAuthConnection } from './remote-oauth.ts';

type Op<K extends RemoteOAuthOp['op']> = Omit<Extract<RemoteOAuthOp, { op: K }>, 'op' | 'now'>;

export async function beginOAuth(env: Env, team: string, o: Omit<Op<'begin'>, 'expiresAt'> & { expiresAt: number }): Promise<void> {
  await teamStub(env, team).remoteOAuth({ op: 'begin', ...o, now: Date.now() });
}

/** The pending authorization with this nonce digest, taken (deleted) as it is read; null if unknown, used or expired. */
export async function takeOAuth(env: Env, team: string, nonceSha256: string): Promise<{ serverId: string; sealed: string } | null> {
  const r = await teamStub(env, team).remoteOAuth({ op: 'take', nonceSha256, now: Date.now() });
  return r.op === 'take' ? r.pending : null;
}

export async function saveOAuthConnection(env: Env, team: string, o: Op<'connect'>): Promise<void> {
  await teamStub(env, team).remoteOAuth({ op: 'connect', ...o, now: Date.now() });
}

/** Saves refreshed tokens if the connection still holds `previous` (the sealed value the refresh started from); false if not. */
export async function saveRefreshedOAuth(env: Env, team: string, o: Op<'refreshed'>): Promise<boolean> {
  const r = await teamStub(env, team).remoteOAuth({ op: 'refreshed', ...o, now: Date.now() });
  return r.op === 'refreshed' && r.changed;
}

/** Marks the connection expired if it still holds `previous`; false if another refresh or a reconnect replaced it. */
export async function expireOAuth(env: Env, team: string, serverId: string, previous: string): Promise<boolean> {
  const r = await teamStub(env, team).remoteOAuth({ op: 'expire', serverId, previous, now: Date.now() });
  return r.op === 'expire' && r.changed;
}

export async function oauthConnection(env: Env, team: string, serverId: string): Promise<StoredOAuthConnection | null> {
  const r = await teamStub(env, team).remoteOAuth({ op: 'get', serverId });
  return r.op === 'get' ? r.connection : null;
}

export async function oauthViews(env: Env, team: string): Promise<Record<string, OAuthConnectionView>> {
  const r = await teamStub(env, team).remoteOAuth({ op: 'views' });
  return r.op === 'views' ? r.views : {};
}
