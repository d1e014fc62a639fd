/**
 * Workspace scripts (`.gatehouse/scripts/<name>.ts`, policy `script.workspaceScripts`): read through the team's
 * agent like any workspace file a script's host needs (workspace-file.ts: a governed `cat`, the path checked to stay
 * inside the workspace, the size bounded by the run_script code cap).
 */
import type { ErrorCode } from '../contracts/errors.ts';
import type { ToolContext, ToolExtra } from '../governed/call-context.ts';
import { CODE_MAX_BYTES } from './limits.ts';
import { readWorkspaceFile } from './workspace-file.ts';
import type { JobWorkspaceRef } from '../governed/governed-run.ts';

export const WORKSPACE_SCRIPTS_DIR = '.gatehouse/scripts';

export type WorkspaceRead = { ok: true; source: string } | { ok: false; code: ErrorCode; message: string };

export async function readWorkspaceScript(ctx: ToolContext, extra: ToolExtra, name: string, workspace?: JobWorkspaceRef): Promise<WorkspaceRead> {
  const file = await readWorkspaceFile(ctx, extra, `${WORKSPACE_SCRIPTS_DIR}/${name}.ts`, CODE_MAX_BYTES, undefined, workspace);
  if (file.ok) return { ok: true, source: file.text };
  if (file.kind === 'refused') return { ok: false, code: 'policy_denied', message: file.message };
  return { ok: false, code: file.kind === 'missing' ? 'not_found' : file.kind === 'no_agent' ? 'no_agent' : 'internal', message: file.message };
}
