/**
 * Admin: the team's per-task workspaces (docs/workspaces.md), from the team object's workspaces table.
 * `GET /workspaces` lists them (size, quota, agent, created, last used, expiry); `DELETE /workspaces/:id`
 * forgets one and tells its agent to delete the files. A delete, refused or not, leaves an audit row.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { WORKSPACE_ID_RULE, WorkspaceId } from '../contracts/workspaces.ts';
import { teamWorkspaces } from '../dispatch/client.ts';
import { apiError } from './http.ts';
import { auditAdmin } from './audit-action.ts';

export const workspaceRoutes = new Hono<AppEnv>();

workspaceRoutes.get('/', async (c) => {
  const r = await teamWorkspaces(c.env, c.get('principal').team, { op: 'list' });
  if (!r.ok) return apiError(c, r.error.code, r.error.message);
  return c.json({ workspaces: 'workspaces' in r ? r.workspaces : [] });
});

workspaceRoutes.delete('/:id', async (c) => {
  const id = c.req.param('id');
  if (!WorkspaceId.safeParse(id).success)
    return apiError(c, 'invalid_argument', `workspace id ${JSON.stringify(id.slice(0, 80))} is not allowed: ${WORKSPACE_ID_RULE}`);
  const r = await teamWorkspaces(c.env, c.get('principal').team, { op: 'delete', id });
  const deleted = r.ok && 'deleted' in r ? r.deleted : null;
  await auditAdmin(c, 'admin.workspace_delete', {
    command: { workspace: id, ...(deleted ? { agent: deleted.agentId } : {}) },
    ok: r.ok,
    reason: r.ok ? undefined : r.error.message,
  });
  // `conflict`: its agent is not connected, so the files cannot be deleted now; try again once it is.
  if (!r.ok) return apiError(c, r.error.code, r.error.message, r.error.code === 'conflict' ? 409 : undefined);
  return c.json({ workspace: id, agent_id: deleted?.agentId ?? null, deleted: true });
});
