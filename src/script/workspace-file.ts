/**
 * The one way a script's host reads a small file of the workspace (`.mcp.json`, `.gatehouse/scripts/<name>.ts`):
 * a governed job on the team's agent, `cat -- <path>`, decided by the team policy like any command, audited (its row
 * links to the script's) and sandboxed. The edge never reads an agent's files itself.
 *
 * The path is checked here: relative, inside the workspace (no `..`, no leading `/`), plain characters only. Symlinks
 * are refused: a first job (`stat -c %F` of every prefix of the path: stat does not follow the last component of each
 * argument) must see directories and a regular file; a symlink anywhere would point the read outside what was named.
 * The read is bounded: a file larger than `maxBytes` (or than the job's inline output) is refused, not cut.
 */
import type { ToolContext, ToolExtra } from '../governed/call-context.ts';
import { runGoverned, type JobWorkspaceRef } from '../governed/governed-run.ts';

export type WorkspaceFile =
  | { ok: true; text: string }
  /** `missing`: no such file; `no_agent`: no agent of the team to read it; `refused`: the policy or the checks here said no. */
  | { ok: false; kind: 'missing' | 'no_agent' | 'refused' | 'error'; message: string };

const SAFE_PATH = /^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,255}$/;

/** Whether `path` names a file inside the workspace: relative, no `..` segment, no empty segment. */
function workspacePathProblem(path: string): string | null {
  if (!SAFE_PATH.test(path)) return `${path}: a workspace path is relative and made of A-Z, a-z, 0-9, "_", "-", "." and "/"`;
  if (path.split('/').some((seg) => seg === '..' || seg === '')) return `${path}: a workspace path may not leave the workspace ("..") or have empty segments`;
  return null;
}

/** `workspace`: read from that per-task workspace (docs/workspaces.md); absent: the shared one. */
export async function readWorkspaceFile(
  ctx: ToolContext,
  extra: ToolExtra,
  path: string,
  maxBytes: number,
  parentJobId?: string,
  workspace?: JobWorkspaceRef,
): Promise<WorkspaceFile> {
  const problem = workspacePathProblem(path);
  if (problem) return { ok: false, kind: 'refused', message: problem };
  const segments = path.split('/');
  const prefixes = segments.map((_, i) => segments.slice(0, i + 1).join('/'));
  const kinds = await runTool(ctx, extra, path, 'stat', ['-c', '%F', '--', ...prefixes], parentJobId, workspace);
  if (!kinds.ok) return kinds;
  const seen = kinds.stdout.trim().split('\n');
  const want = [...prefixes.slice(0, -1).map(() => 'directory'), 'regular file'];
  const bad = seen.findIndex((k, i) => k !== want[i]);
  if (seen.length !== want.length || bad >= 0)
    return {
      ok: false,
      kind: 'refused',
      message: `${prefixes[Math.max(bad, 0)]} is a ${seen[Math.max(bad, 0)] ?? 'missing entry'}: only a regular file reached through directories (no symlink) is read`,
    };
  const cat = await runTool(ctx, extra, path, 'cat', ['--', path], parentJobId, workspace);
  if (!cat.ok) return cat;
  const exit = { stdout: cat.stdout, stdoutTruncated: cat.truncated };
  const bytes = new TextEncoder().encode(exit.stdout).byteLength;
  if (exit.stdoutTruncated || bytes > maxBytes) return { ok: false, kind: 'refused', message: `${path}: larger than ${maxBytes} bytes` };
  return { ok: true, text: exit.stdout };
}

/** One governed read-only command of the read; its stdout, or why the read cannot go on. */
async function runTool(
  ctx: ToolContext,
  extra: ToolExtra,
  path: string,
  command: string,
  args: string[],
  parentJobId: string | undefined,
  workspace: JobWorkspaceRef | undefined,
): Promise<{ ok: true; stdout: string; truncated: boolean } | Extract<WorkspaceFile, { ok: false }>> {
  const out = await runGoverned(ctx, extra, {
    tool: 'run_script',
    ...(parentJobId ? { parentJobId } : {}),
    policy: { mode: 'argv', command, args },
    job: { mode: 'argv', command, args },
    ...(workspace ? { workspace } : {}),
  });
  if (out.kind === 'denied') return { ok: false, kind: 'refused', message: `${path}: reading it (${command}) is denied by policy: ${out.decision.reason}` };
  if (out.kind === 'error') return { ok: false, kind: out.error.code === 'no_agent' ? 'no_agent' : 'error', message: `${path}: ${out.error.message}` };
  if (out.kind !== 'done') return { ok: false, kind: 'refused', message: `${path}: reading it (${command}) needs an approval a script cannot wait for` };
  const { exit } = out;
  if (exit.state !== 'exited') return { ok: false, kind: 'error', message: `${path}: ${command} ended ${exit.state}` };
  if (exit.exitCode !== 0) {
    if (/No such file/i.test(exit.stderr)) return { ok: false, kind: 'missing', message: `${path}: no such file in the workspace` };
    return { ok: false, kind: 'error', message: `${path}: could not be read: ${exit.stderr.trim().slice(0, 300)}` };
  }
  return { ok: true, stdout: exit.stdout, truncated: exit.stdoutTruncated };
}
