/**
 * What the job runner asks about a job's workspace: whether this agent may run it at all, where its
 * cwd is checked, and whether the job broke the workspace's quota or failed to create it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { JobSpec } from '../../src/contracts/agent-protocol.ts';
import type { JobWorkspace } from '../../src/contracts/workspaces.ts';
import type { ProcessEnd, SandboxDriver } from '../sandbox/types.ts';
import { CLONE_FAILED_STATUS } from '../jobs/launcher.ts';
import type { WorkspaceStore } from './store.ts';

/** Why this agent refuses a workspace job (null: it takes it). The edge never sends one where this applies; an old or odd edge might. */
export function workspaceRefusal(spec: JobSpec, driver: Pick<SandboxDriver, 'kind' | 'supportsWorkspaces'>, store?: WorkspaceStore) {
  if (!spec.workspace) return null;
  if (!driver.supportsWorkspaces || !store)
    return {
      code: 'workspace_error',
      message: `this agent's sandbox (${driver.kind}) cannot run jobs in a workspace: it mounts only the shared workspace; run it on a gVisor agent, or leave workspace out`,
    };
  return null;
}

/** The root a workspace job's cwd is checked against now: its directory when it exists, else (created by this job) the cwd waits for `run`. */
export function workspacePlanRoot(spec: JobSpec, sharedRoot: string, store?: WorkspaceStore): { spec: JobSpec; root: string } {
  if (!spec.workspace || !store) return { spec, root: sharedRoot };
  const dir = join(store.dir, spec.workspace.id);
  return existsSync(dir) ? { spec, root: dir } : { spec: { ...spec, cwd: '' }, root: sharedRoot };
}

export interface WorkspaceVerdict {
  code: 'workspace_quota' | 'workspace_error';
  message: string;
  /** The workspace holds more than its quota. */
  over: boolean;
}

/**
 * The workspace's verdict on a job: full before it started (`bytes` only), over its quota after it
 * (the disk-write limit stopped it, or it got past between two polls), or its clone failed.
 */
export function workspaceLimitError(
  ws: JobWorkspace,
  bytes: number,
  after?: { diskExceeded: boolean; end: ProcessEnd; clone?: { url: string }; hostDir: string },
): WorkspaceVerdict {
  if (after?.clone && !existsSync(join(after.hostDir, '.git'))) {
    const status = after.end.kind === 'exited' ? after.end.code : null;
    return {
      code: 'workspace_error',
      over: false,
      message: `workspace "${ws.id}" was not created: cloning ${after.clone.url} failed${status === CLONE_FAILED_STATUS ? " (stderr has git's reason; the network policy must allow the host)" : ''}; the next call tries again`,
    };
  }
  const over = bytes > ws.quotaBytes || after === undefined || after.diskExceeded;
  return {
    code: 'workspace_quota',
    over,
    message: `workspace "${ws.id}" is full: it holds ${bytes} bytes of its ${ws.quotaBytes}-byte quota (workspaces.quotaBytes in the team policy)${after ? '; the job was stopped' : ''}. Delete files in it, delete it (workspace_delete), or raise the quota`,
  };
}
