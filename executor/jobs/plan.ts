/**
 * Turns a JobSpec into what to run, after the agent's own checks (its local floor): cwd in
 * the workspace, executable present in the sandbox and on the allowlist, runtime toolchain
 * installed, limits clamped to the agent's ceilings. Pure apart from reading the filesystem.
 */
import { RUNTIMES } from '../../src/contracts/runtimes.ts';
import { visible } from '../../src/contracts/visible-text.ts';
import type { JobSpec } from '../../src/contracts/agent-protocol.ts';
import type { GatehouseErrorShape } from '../../src/contracts/errors.ts';
import { GIT_HARDENING_ENV, gitRepositoryOptions } from '../../src/contracts/git-hardening.ts';
import { SANDBOX_PATH } from '../sandbox/types.ts';
import { pickRuntimeExecutable, type RuntimeTable } from '../runtimes/probe.ts';
import { ENV_NAME } from './launcher.ts';
import { effectiveLimits } from './limits.ts';
import type { ResourceLimits } from '../../src/contracts/resource-limits.ts';
import { checkCwd, isAllowedExecutable, resolveExecutable, type ResolveContext } from './resolve.ts';

export interface Ceilings {
  maxTimeoutMs: number;
  maxArtifactBytes: number;
}

interface CodeStep {
  /** Source file name inside the job dir. */
  file: string;
  code: string;
  /** argv templates with {exe}/{file}/{out} still to substitute with in-sandbox paths. */
  build: string[] | null;
  run: string[];
  exe: string;
}

export interface JobPlan {
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  inlineBytes: number;
  artifactBytes: number;
  /** Resource limits, every one set. */
  limits: ResourceLimits;
  /** argv/shell modes: what to exec (argv[0] as seen inside the sandbox). */
  argv: string[] | null;
  code: CodeStep | null;
  /** Run git with the repository's programs switched off (see launcher.ts). */
  hardenGit?: { repositoryOptions: string[] };
}

/** A refusal the edge sees as `job.error`, or a start failure it sees as `failed_to_start`. */
export type PlanFailure = { kind: 'refuse'; error: GatehouseErrorShape | { code: string; message: string } } | { kind: 'spawn_failed'; detail: string };

export interface PlanContext {
  root: string;
  workspaceInside: string;
  hostVisible: boolean;
  runtimes: RuntimeTable;
  ceilings: Ceilings;
}

export function planJob(spec: JobSpec, ctx: PlanContext): { ok: true; plan: JobPlan } | { ok: false; failure: PlanFailure } {
  // A refusal quotes what the job asked for (a cwd, an executable, an env name): shown visible, it cannot reorder or hide the message.
  const refuse = (code: string, message: string) => ({ ok: false as const, failure: { kind: 'refuse' as const, error: { code, message: visible(message) } } });
  // The launcher passes everything through sh and `env -i`: NUL cannot be carried, and env
  // names must be plain names (anything else could read as an option or a command).
  for (const [k, v] of Object.entries(spec.env)) {
    if (!ENV_NAME.test(k)) return refuse('invalid_argument', `environment variable name "${k}" is not allowed (letters, digits, _ only)`);
    if (v.includes('\0')) return refuse('invalid_argument', `environment variable ${k} contains a NUL byte`);
  }
  if ([spec.command, ...spec.args].some((a) => a.includes('\0'))) return refuse('invalid_argument', 'command and args must not contain NUL bytes');
  const cwd = checkCwd(ctx.root, spec.cwd);
  if (!cwd.ok) return refuse(cwd.error.code, cwd.error.message);
  const rctx: ResolveContext = { root: ctx.root, cwd: cwd.value, workspaceInside: ctx.workspaceInside, hostVisible: ctx.hostVisible };

  // The job's env is exactly what the edge sent plus the sandbox basics; nothing of ours.
  const env: Record<string, string> = { ...spec.env };
  if (spec.runtime) Object.assign(env, RUNTIMES[spec.runtime].env ?? {});
  Object.assign(env, { PATH: SANDBOX_PATH, HOME: '/tmp', TMPDIR: '/tmp' });

  const base = {
    cwd: cwd.value,
    env,
    timeoutMs: Math.max(1, Math.min(spec.timeoutMs, ctx.ceilings.maxTimeoutMs)),
    inlineBytes: spec.limits.inlineBytes,
    limits: effectiveLimits(spec.limits),
    artifactBytes: Math.min(spec.limits.artifactBytes, ctx.ceilings.maxArtifactBytes),
  };

  if (spec.mode === 'code') {
    if (!spec.runtime) return refuse('invalid_argument', 'code mode needs a runtime');
    if (spec.code === undefined) return refuse('invalid_argument', 'code mode needs code');
    const def = RUNTIMES[spec.runtime];
    const info = pickRuntimeExecutable(ctx.runtimes, spec.runtime, spec.command || undefined);
    if (!info) {
      const wanted = spec.command || def.executables.join(' or ');
      return refuse('runtime_unavailable', `runtime "${spec.runtime}" needs ${wanted} on the agent; install Debian package ${def.debianPackage}`);
    }
    const exe = resolveExecutable(info.path, rctx);
    if (!exe)
      return refuse('runtime_unavailable', `runtime "${spec.runtime}" needs ${info.executable} on the agent; install Debian package ${def.debianPackage}`);
    if (spec.allowedExecutables && !isAllowedExecutable(exe, spec.allowedExecutables, rctx)) {
      return refuse('policy_denied', `Executable "${info.executable}" is not in the allowed executables list`);
    }
    return { ok: true, plan: { ...base, argv: null, code: { file: def.codeFile, code: spec.code, build: def.build ?? null, run: def.run, exe: exe.inside } } };
  }

  const command = spec.mode === 'shell' ? 'sh' : spec.command;
  if (!command.trim()) return refuse('invalid_argument', 'Error: command: empty');
  const exe = resolveExecutable(command, rctx);
  if (!exe || exe.inside.includes('='))
    return { ok: false, failure: { kind: 'spawn_failed', detail: `executable "${visible(command)}" not found in ${SANDBOX_PATH} of the sandbox` } };
  if (spec.mode === 'argv' && spec.allowedExecutables && !isAllowedExecutable(exe, spec.allowedExecutables, rctx)) {
    return refuse('policy_denied', `Executable "${command}" is not in the allowed executables list`);
  }
  const argv = spec.mode === 'shell' ? [exe.inside, '-c', spec.command] : [exe.inside, ...spec.args];
  if (spec.hardenGit) {
    if (spec.mode !== 'argv') return refuse('invalid_argument', 'hardenGit applies to an argv-mode git job only');
    // None of the job's own GIT_* variables: they can name programs or configuration.
    for (const k of Object.keys(env)) if (k.startsWith('GIT_')) delete env[k];
    Object.assign(env, GIT_HARDENING_ENV);
    return { ok: true, plan: { ...base, argv, code: null, hardenGit: { repositoryOptions: gitRepositoryOptions(spec.args) } } };
  }
  return { ok: true, plan: { ...base, argv, code: null } };
}

/** Substitutes {exe}/{file}/{out} in a RUNTIMES build/run template. */
export function expandTemplate(t: string[], v: { exe: string; file: string; out: string }): string[] {
  return t.map((a) => a.replaceAll('{exe}', v.exe).replaceAll('{file}', v.file).replaceAll('{out}', v.out));
}
