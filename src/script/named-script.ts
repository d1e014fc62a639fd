/**
 * `run_script {"name"}`: which program a name means. The team's library first (the newest version, or
 * `version`); then, only where the policy's `script.workspaceScripts` allows and no version was asked for,
 * `.gatehouse/scripts/<name>.ts` from the workspace, read by one of the team's agents (workspace-script.ts).
 * Every refusal is one line in the runner's style that says what exists and what the policy allows.
 */
import type { ErrorCode } from '../contracts/errors.ts';
import type { ScriptPolicy } from '../contracts/policy.ts';
import { scriptDigest, type ScriptRef } from '../contracts/scripts.ts';
import { getScript } from '../dispatch/script-library-client.ts';
import type { ToolContext, ToolExtra } from '../governed/call-context.ts';
import type { JobWorkspaceRef } from '../governed/governed-run.ts';
import { readWorkspaceScript, WORKSPACE_SCRIPTS_DIR } from './workspace-script.ts';

export type NamedScript = { ok: true; code: string; ref: ScriptRef } | { ok: false; code: ErrorCode; message: string };

export async function resolveNamedScript(
  ctx: ToolContext,
  extra: ToolExtra,
  policy: ScriptPolicy,
  name: string,
  version?: number,
  workspace?: JobWorkspaceRef,
): Promise<NamedScript> {
  const lib = await getScript(ctx.env, ctx.principal.team, name, version);
  if (lib.ok) return { ok: true, code: lib.value.source, ref: { name, origin: 'team', version: lib.value.version, sha256: lib.value.sha256 } };
  if (lib.code !== 'not_found') return { ok: false, code: lib.code, message: `run_script: ${lib.message}` };
  if (lib.versions)
    return { ok: false, code: 'not_found', message: `run_script: script "${name}" has no version ${version} (versions: ${lib.versions.join(', ')})` };
  const library = `team library: ${lib.names?.length ? lib.names.join(', ') : 'empty'}`;
  if (!policy.workspaceScripts)
    return { ok: false, code: 'not_found', message: `run_script: no script named "${name}" (${library}; workspace scripts: off by policy)` };
  if (version !== undefined)
    return {
      ok: false,
      code: 'not_found',
      message: `run_script: no script named "${name}" in the team library (${library}); a workspace script (${WORKSPACE_SCRIPTS_DIR}/${name}.ts) has no versions: call it without "version"`,
    };
  const ws = await readWorkspaceScript(ctx, extra, name, workspace);
  if (ws.ok) return { ok: true, code: ws.source, ref: { name, origin: 'workspace', sha256: await scriptDigest(ws.source) } };
  return { ok: false, code: ws.code, message: `run_script: no script named "${name}" (${library}; workspace scripts: ${ws.message})` };
}
