/**
 * The one way a script's host reads a small file of the workspace (`.mcp.json`, `.gatehouse/scripts/<name>.ts`):
 * a governed job on the team's agent, `cat -- <path>`, decided by the team policy like any command, audited (its row
 * links to the script's) and sandboxed. The edge never reads an agent's files itself.
 *
 * The path is checked here: relative, inside the workspace (no `..`, no leading `/`), plain characters only. The
 * read is bounded: a file larger than `maxBytes` (or than the job's inline output) is refused, not cut.
 */
import type { ToolContext, ToolExtra } from '../governed/call-context.ts';
import { runGoverned } from '../governed/governed-run.ts';

export type WorkspaceFile =
  | { ok: true; text: string }
  /** `missing`: no such file; `no_agent`: no agent of the team to read it; `refused`: the policy or the checks here said no. */
  | { ok: false; kind: 'missing' | 'no_agent' | 'refused' | 'error'; message: string };

const SAFE_PATH = /^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,255}$/;

/** Whether `path` names a file inside the workspace: relative, no `..` segment, no empty segment. */
export function workspacePathProblem(path: string): string | null {
  if (!SAFE_PATH.test(path)) return `${path}: a workspace path is relative and made of A-Z, a-z, 0-9, "_", "-", "." and "/"`;
  if (path.split('/').some((seg) => seg === '..' || seg === '')) return `${path}: a workspace path may not leave the workspace ("..") or have empty segments`;
  return null;
}

export async function readWorkspaceFile(
  ctx: ToolContext,
  extra: ToolExtra,
  path: string,
  maxBytes: number,
  parentJobId?: string,
): Promise<WorkspaceFile> {
  const problem = workspacePathProblem(path);
  if (problem) return { ok: false, kind: 'refused', message: problem };
  const out = await runGoverned(ctx, extra, {
    tool: 'run_script',
    ...(parentJobId ? { parentJobId } : {}),
    policy: { mode: 'argv', command: 'cat', args: ['--', path] },
    job: { mode: 'argv', command: 'cat', args: ['--', path] },
  });
  if (out.kind === 'denied') return { ok: false, kind: 'refused', message: `${path}: reading it (cat) is denied by policy: ${out.decision.reason}` };
  if (out.kind === 'error') return { ok: false, kind: out.error.code === 'no_agent' ? 'no_agent' : 'error', message: `${path}: ${out.error.message}` };
  if (out.kind !== 'done') return { ok: false, kind: 'refused', message: `${path}: reading it (cat) needs an approval a script cannot wait for` };
  const { exit } = out;
  if (exit.state !== 'exited') return { ok: false, kind: 'error', message: `${path}: the read ended ${exit.state}` };
  if (exit.exitCode !== 0) {
    if (/No such file/i.test(exit.stderr)) return { ok: false, kind: 'missing', message: `${path}: no such file in the workspace` };
    return { ok: false, kind: 'error', message: `${path}: could not be read: ${exit.stderr.trim().slice(0, 300)}` };
  }
  const bytes = new TextEncoder().encode(exit.stdout).byteLength;
  if (exit.stdoutTruncated || bytes > maxBytes) return { ok: false, kind: 'refused', message: `${path}: larger than ${maxBytes} bytes` };
  return { ok: true, text: exit.stdout };
}
