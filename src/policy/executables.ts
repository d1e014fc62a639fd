/**
 * Stage 3: executable validation — runtime compatibility (by basename), then the allowlist.
 * Allow entries are bare names (resolved by the agent in the sandbox PATH) or absolute paths.
 * A request naming a path matches only an identical absolute entry; a bare name matches only a
 * bare entry. The agent re-checks by resolved path, so the edge passes it the whole allowlist.
 */
import type { PolicyDocument } from '../contracts/policy.ts';
import { RUNTIMES, isCompatible, type RuntimeName } from '../contracts/runtimes.ts';
import { deny, pass, type StageResult } from './types.ts';

/** The executable a request runs: the one given, else the runtime's preferred one. */
export function requestedExecutable(command: string, runtime: RuntimeName | undefined): string {
  if (command === '' && runtime) return RUNTIMES[runtime].executables[0];
  return command;
}

export function checkExecutable(policy: PolicyDocument, exe: string, runtime: RuntimeName | undefined): StageResult<string> {
  if (exe === '') return deny('Executable "" is empty: name an executable');
  // Control characters never appear in a real executable name; they only serve to confuse logs.
  if (/[\u0000-\u001f\u007f]/.test(exe)) return deny(`Executable ${JSON.stringify(exe)} contains control characters`);
  if (runtime && !isCompatible(runtime, exe)) {
    return deny(`Executable "${exe}" is not compatible with runtime "${runtime}" (accepted: ${RUNTIMES[runtime].executables.join(', ')})`);
  }
  if (!isAllowed(policy.executables.allow, exe)) {
    const hint = exe.includes('/') && !exe.startsWith('/') ? ': pass a bare name or an absolute path listed in executables.allow' : '';
    return deny(`Executable "${exe}" is not in the allowed executables list${hint}`);
  }
  return pass(exe);
}

export function isAllowed(allow: readonly string[], exe: string): boolean {
  if (exe.includes('/')) {
    // Only an identical absolute entry: no normalisation, so `/usr/bin/../bin/sh` never sneaks in.
    return exe.startsWith('/') && !hasDotSegment(exe) && allow.includes(exe);
  }
  return allow.some((a) => !a.includes('/') && a === exe);
}

function hasDotSegment(p: string): boolean {
  return p.split('/').some((s) => s === '.' || s === '..');
}
