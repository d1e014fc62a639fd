/** Stages 1–2: feature gates and the runtime allowlist (the governed-runtime contract's first two checks and their messages, docs/architecture.md). */
import type { PolicyDocument } from '../contracts/policy.ts';
import { RUNTIME_NAMES } from '../contracts/runtimes.ts';
import { deny, pass, type PolicyRequest, type StageResult } from './types.ts';

export function featureGate(policy: PolicyDocument, req: PolicyRequest): StageResult {
  // Input written after the start is code on stdin the screens never saw: a team turns it on knowingly.
  if (req.interactive && !policy.interactive.enabled) {
    return deny(
      'Interactive input is disabled in configuration (interactive.enabled = false): a job cannot keep its stdin open for job_input; run it without interactive/tty, or enable interactive in the team policy',
    );
  }
  if (req.tool === 'runtime_execute') {
    if (!policy.runtime.enabled) return deny('Runtime execution is disabled in configuration (runtime.enabled = false)');
    return pass(undefined);
  }
  // `execute` and a runtime-less `policy_check` (a dry run of an execute call) share the execute gate.
  if (!policy.execute.enabled) return deny('Command execution is disabled in configuration (execute.enabled = false)');
  return pass(undefined);
}

export function runtimeAllowlist(policy: PolicyDocument, req: PolicyRequest): StageResult {
  if (req.runtime === undefined) {
    if (req.tool === 'runtime_execute') return deny('runtime_execute needs a "runtime"');
    return pass(undefined);
  }
  // The type says RuntimeName, but the request may come from an unchecked caller.
  if (!(RUNTIME_NAMES as readonly string[]).includes(req.runtime)) {
    return deny(`Runtime "${req.runtime}" is not a known runtime: [${RUNTIME_NAMES.join(', ')}]`);
  }
  const allowed = policy.runtime.allowedRuntimes;
  if (!allowed.includes(req.runtime)) return deny(`Runtime "${req.runtime}" is not in the allowed runtimes list: [${allowed.join(', ')}]`);
  return pass(undefined);
}
