/**
 * The agent's local floor for paths: where a job may run (cwd inside the workspace, symlinks
 * resolved) and what it may execute (resolved in the sandbox PATH, matched by realpath
 * against the policy's allowlist). The edge decided already; this is the second lock.
 */
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, sep } from 'node:path';
import { SANDBOX_PATH } from '../sandbox/types.ts';
import type { Result } from '../../src/contracts/errors.ts';

/** Host directories a sandbox shows read-only at the same path (see sandbox/system-view.ts). */
const SYSTEM_PREFIXES = ['/usr/', '/bin/', '/sbin/', '/lib/', '/lib64/', '/etc/alternatives/'];

function isExecutableFile(p: string): boolean {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `name` looked up in the sandbox PATH (never the agent's PATH). */
export function findInPath(name: string): string | null {
  if (!name || name.includes('/') || name.includes('\0')) return null;
  for (const dir of SANDBOX_PATH.split(':')) {
    const p = `${dir}/${name}`;
    if (isExecutableFile(p)) return p;
  }
  return null;
}

function isInside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** Checks `cwd` (relative to the workspace) and returns it normalised, relative, symlinks resolved. */
export function checkCwd(root: string, cwd: string): Result<string> {
  if (cwd.includes('\0') || isAbsolute(cwd) || cwd.split(/[\\/]/).includes('..')) {
    return { ok: false, error: { code: 'policy_denied', message: `Relative CWD "${cwd}" contains path traversal or absolute path components` } };
  }
  let real: string;
  try {
    real = realpathSync(join(root, cwd));
  } catch {
    return { ok: false, error: { code: 'invalid_argument', message: `Relative CWD "${cwd}" does not exist in the workspace` } };
  }
  if (!isInside(root, real)) {
    return { ok: false, error: { code: 'policy_denied', message: `Relative CWD "${cwd}" resolves outside the workspace` } };
  }
  try {
    if (!statSync(real).isDirectory()) return { ok: false, error: { code: 'invalid_argument', message: `Relative CWD "${cwd}" is not a directory` } };
  } catch {
    return { ok: false, error: { code: 'invalid_argument', message: `Relative CWD "${cwd}" does not exist in the workspace` } };
  }
  return { ok: true, value: relative(root, real) };
}

export interface ResolvedExecutable {
  /** Path to exec inside the sandbox (symlinks kept: argv[0] matters to multi-call binaries). */
  inside: string;
  /** Host realpath, compared against the allowlist. */
  real: string;
}

export interface ResolveContext {
  root: string;
  /** Job cwd relative to root (already checked). */
  cwd: string;
  workspaceInside: string;
  /** `none` sandbox: the job sees the whole host, so any absolute path is reachable. */
  hostVisible: boolean;
}

/** Resolves what the job asked to run the way the sandbox will; null when it does not exist there. */
export function resolveExecutable(cmd: string, ctx: ResolveContext): ResolvedExecutable | null {
  if (!cmd || cmd.includes('\0')) return null;
  const real = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return null;
    }
  };
  if (!cmd.includes('/')) {
    const p = findInPath(cmd);
    const r = p && real(p);
    return p && r ? { inside: p, real: r } : null;
  }
  if (isAbsolute(cmd)) {
    // A path inside the workspace as the job sees it.
    if (isInside(ctx.workspaceInside, cmd) && ctx.workspaceInside !== '/') {
      return resolveInWorkspace(relative(ctx.workspaceInside, cmd), ctx);
    }
    const r = real(cmd);
    if (!r || !isExecutableFile(r)) return null;
    if (!ctx.hostVisible && !SYSTEM_PREFIXES.some((pre) => r.startsWith(pre))) return null;
    return { inside: cmd, real: r };
  }
  return resolveInWorkspace(join(ctx.cwd, cmd), ctx);
}

function resolveInWorkspace(rel: string, ctx: ResolveContext): ResolvedExecutable | null {
  let r: string;
  try {
    r = realpathSync(join(ctx.root, rel));
  } catch {
    return null;
  }
  if (!isInside(ctx.root, r) || !isExecutableFile(r)) return null;
  const relReal = relative(ctx.root, r);
  return { inside: relReal ? `${ctx.workspaceInside}/${relReal}` : ctx.workspaceInside, real: r };
}

/** Whether the resolved executable is one of `allowed` (names resolved in the sandbox PATH, or paths). */
export function isAllowedExecutable(exe: ResolvedExecutable, allowed: string[], ctx: ResolveContext): boolean {
  for (const a of allowed) {
    const r = resolveExecutable(a, ctx);
    if (r && r.real === exe.real) return true;
  }
  return false;
}
