/** The edge's side of the team's script library (script-library.ts in the team's object): one DO call each. */
import type { Env } from '../env.ts';
import type { ScriptSource, ScriptSummary, ScriptVersionView } from '../contracts/scripts.ts';
import type { LibraryAnswer } from './script-library.ts';
import { teamStub } from './client.ts';

export type { LibraryAnswer } from './script-library.ts';

export async function pushScript(
  env: Env,
  team: string,
  p: { name: string; source: string; sha256: string; by: string; now: number },
): Promise<LibraryAnswer<{ version: ScriptVersionView; created: boolean }>> {
  return (await teamStub(env, team).scriptLibrary({ op: 'push', ...p })) as LibraryAnswer<{ version: ScriptVersionView; created: boolean }>;
}

export async function listScripts(env: Env, team: string): Promise<ScriptSummary[]> {
  const r = (await teamStub(env, team).scriptLibrary({ op: 'list' })) as LibraryAnswer<ScriptSummary[]>;
  return r.ok ? r.value : [];
}

export async function scriptVersions(env: Env, team: string, name: string): Promise<LibraryAnswer<ScriptVersionView[]>> {
  return (await teamStub(env, team).scriptLibrary({ op: 'versions', name })) as LibraryAnswer<ScriptVersionView[]>;
}

/** The newest version, or `version`. */
export async function getScript(env: Env, team: string, name: string, version?: number): Promise<LibraryAnswer<ScriptSource>> {
  return (await teamStub(env, team).scriptLibrary({ op: 'get', name, ...(version !== undefined ? { version } : {}) })) as LibraryAnswer<ScriptSource>;
}

/** The whole script, or one `version`. */
export async function removeScript(env: Env, team: string, name: string, version?: number): Promise<LibraryAnswer<{ removed: number }>> {
  return (await teamStub(env, team).scriptLibrary({ op: 'remove', name, ...(version !== undefined ? { version } : {}) })) as LibraryAnswer<{ removed: number }>;
}
