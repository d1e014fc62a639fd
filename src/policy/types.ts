/**
 * The policy engine's request and decision shapes. Re-exported by engine.ts, which is what
 * the rest of Gatehouse imports; stage modules import from here to avoid an import cycle.
 */
import type { RuntimeName } from '../contracts/runtimes.ts';
import type { NetworkGrant } from '../contracts/network.ts';

export interface PolicyRequest {
  tool: 'execute' | 'runtime_execute' | 'policy_check' | 'run_script';
  /** argv: command+args, no shell; shell: command is the whole `sh -c` string; code: runtime code mode */
  mode: 'argv' | 'shell' | 'code';
  command: string; // executable (argv/code) or the whole shell string (shell)
  /**
   * Shell mode only: decide the string as a shell string even when it has no shell syntax (no
   * argv split). run_script's child_process.exec promises `sh -c` and the subprocess input document.
   */
  shellOnly?: true;
  args: string[];
  runtime?: RuntimeName; // runtime_execute (and optional in policy_check)
  code?: string; // code mode source (runtime 'shell' code is decided as a shell string)
  cwd?: string; // relative to the workspace root
  env?: Record<string, string>;
  timeoutMs?: number;
  /** An interactive job (stdin kept open for job_input): needs `interactive.enabled`. */
  interactive?: boolean;
  team: string;
  subject: string;
}

export type PolicyStage = 'feature_gate' | 'runtime_allowlist' | 'executable' | 'arguments' | 'shell' | 'cwd' | 'env' | 'limits' | 'rules' | 'opa' | 'allowed';

interface EffectiveJob {
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  inlineBytes: number;
  artifactBytes: number;
  /** For argv/code mode: the policy allowlist, re-checked by the agent against resolved paths. */
  allowedExecutables?: string[];
  /** git run as argv under `git.repositoryPrograms = "disable"`: the agent switches the repository's programs off. */
  hardenGit?: true;
  /** The job's network: the team's `network`, or the matching rule's (src/policy/network.ts). */
  network: NetworkGrant;
}

/** One remote evaluator's answer, kept for the audit trail and for policy_check. */
export interface OpaVerdict {
  url: string;
  allowed: boolean;
  reason: string;
  elapsedMs: number;
}

export interface PolicyDecision {
  allowed: boolean;
  stage: PolicyStage; // the stage that denied, or 'allowed'
  reason: string; // a message a user can act on; the source contracts' text where they give one (docs/architecture.md)
  notes: string[]; // e.g. 'timeout 200000ms clamped to the maximum 120000ms'
  effective?: EffectiveJob; // present when allowed: what the job spec must use
  /**
   * Run exactly this argv, without a shell: a shell-mode command string without shell syntax that
   * was allowed as argv, and/or the policy's `prependArgs` in front of the caller's arguments.
   */
  runAs?: { command: string; args: string[] };
  /**
   * Present when a rule decided `ask`: everything else allows the call, but a person must approve
   * it first. `allowed` is false then, so code that does not know about approvals refuses it;
   * `effective` (and `runAs`) say what runs once approved.
   */
  ask?: { rule: number; reason: string };
  /** The rule that matched the command (any decision), whose `network` replaces the team's. */
  rule?: number;
  /** Present when OPA evaluators were asked (addition to the lead's interface). */
  opa?: { mode: 'any' | 'all'; verdicts: OpaVerdict[] };
}

export interface DecideOptions {
  fetch?: typeof fetch;
  now?: () => number;
}

/** What a stage returns: pass (with anything it computed) or deny with a reason. */
export type StageResult<T = undefined> = { ok: true; value: T; notes?: string[] } | { ok: false; reason: string };

export const pass = <T>(value: T, notes?: string[]): StageResult<T> => ({ ok: true, value, ...(notes?.length ? { notes } : {}) });
export const deny = (reason: string): StageResult<never> => ({ ok: false, reason });
