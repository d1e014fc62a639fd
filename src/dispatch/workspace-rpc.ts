/**
 * The team object's answers about its workspaces (`workspace_list`, `workspace_delete`, the admin API):
 * the list from the workspaces table, and a delete that forgets the row and tells the holding agent.
 */
import type { WorkspaceView } from '../contracts/workspaces.ts';
import type { GatehouseErrorShape } from '../contracts/errors.ts';
import type { AgentLink } from './agent-link.ts';
import type { Workspaces } from './workspaces.ts';

export type WorkspaceOp = { op: 'list' } | { op: 'delete'; id: string };
export type WorkspaceAnswer =
  | { ok: true; workspaces: WorkspaceView[] }
  | { ok: true; deleted: { id: string; agentId: string; told: boolean } }
  | { ok: false; error: GatehouseErrorShape };

export function workspaceRpc(c: { workspaces: Workspaces; link: Pick<AgentLink, 'socketOf' | 'send'> }, op: WorkspaceOp): WorkspaceAnswer {
  if (op.op === 'list') return { ok: true, workspaces: c.workspaces.list((a) => c.link.socketOf(a) !== null) };
  const holder = c.workspaces.holder(op.id);
  if (!holder) return { ok: false, error: { code: 'not_found', message: `no workspace "${op.id}" in this team (workspace_list shows them)` } };
  const ws = c.link.socketOf(holder);
  if (!ws)
    return {
      ok: false,
      error: {
        code: 'conflict',
        message: `workspace "${op.id}" is on executor agent "${holder}", which is not connected: it can be deleted once that agent is back`,
      },
    };
  c.link.send(ws, { type: 'workspace.delete', id: op.id });
  c.workspaces.remove(op.id);
  return { ok: true, deleted: { id: op.id, agentId: holder, told: true } };
}
