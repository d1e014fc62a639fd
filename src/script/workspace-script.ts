/**
 * Workspace scripts (`.gatehouse/scripts/<name>.ts`, policy `script.workspaceScripts`): the edge never reads an
 * agent's files itself; the read belongs to the team's agent, which must refuse symlinks and paths outside
 * its workspace. The agent side of that read does not exist yet, so a policy that turns the fallback on
 * gets a clear refusal instead of a silent miss.
 */
import type { ErrorCode } from '../contracts/errors.ts';
import type { ToolContext } from '../governed/call-context.ts';

export const WORKSPACE_SCRIPTS_DIR = '.gatehouse/scripts';

export type WorkspaceRead = { ok: true; source: string } | { ok: false; code: ErrorCode; message: string };

export async function readWorkspaceScript(_ctx: ToolContext, name: string): Promise<WorkspaceRead> {
  return {
    ok: false,
    code: 'not_found',
    message: `on by policy, but this gateway's agents cannot read ${WORKSPACE_SCRIPTS_DIR}/${name}.ts yet`,
  };
}
