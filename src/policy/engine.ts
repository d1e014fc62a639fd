/**
 * The policy engine: decides one tool call against the team policy, stage by stage in the
 * governed-runtime contract's order (docs/architecture.md): feature gate → runtime allowlist → executable →
 * arguments/shell → cwd → env → limits → rules → OPA, and says which stage denied and why. The rules stage may also
 * decide `ask`: allowed once a person approves (`decision.ask`). Concurrency (that contract's stage 8)
 * is enforced by the team's object, which words that refusal itself (src/dispatch/job-refusals.ts).
 *
 * Runs in workerd and in Node: web-standard APIs only. Never throws: any internal failure is a
 * denial (fail closed) naming the stage it happened in.
 */
import type { PolicyDocument } from '../contracts/policy.ts';
import { executableBase } from '../contracts/runtimes.ts';
import { visible } from '../contracts/visible-text.ts';
import { checkCwd } from './cwd.ts';
import { screenEnv } from './env-screen.ts';
import { checkExecutable, requestedExecutable } from './executables.ts';
import { featureGate, runtimeAllowlist } from './gates.ts';
import { checkLimits } from './limits.ts';
import { askOpa, type OpaInput } from './opa.ts';
import { ruleFor, screenArguments } from './argument-screens.ts';
import { checkShellString } from './shell.ts';
import { matchRule, ruleArgv } from './rules.ts';
import { splitSimpleCommand } from './simple-command.ts';
import { networkGrant } from './network.ts';
import type { DecideOptions, PolicyDecision, PolicyRequest, PolicyStage, StageResult } from './types.ts';

/** A rule as people count it (the first rule is rule 1); `rules[i]` paths stay 0-based. */
export const ruleNumber = (index: number) => index + 1;

export type { DecideOptions, PolicyDecision, PolicyRequest } from './types.ts';
export { parsePolicy } from './parse.ts';

/** The three-way verdict of a decision: run, ask a person first, or refuse. */
export function verdictOf(d: Pick<PolicyDecision, 'allowed' | 'ask'>): 'allow' | 'ask' | 'deny' {
  return d.allowed ? 'allow' : d.ask ? 'ask' : 'deny';
}

export async function decide(policy: PolicyDocument, req: PolicyRequest, opts: DecideOptions = {}): Promise<PolicyDecision> {
  return shown(await decideCall(policy, req, opts));
}

/**
 * A decision's reason and notes quote the caller's command, arguments, cwd and env names (and an
 * OPA evaluator's answer): every control and bidi character in them is written as a visible escape,
 * here once for every stage, so a refusal reads the same wherever it is shown.
 */
function shown(d: PolicyDecision): PolicyDecision {
  return {
    ...d,
    reason: visible(d.reason),
    notes: d.notes.map((n) => visible(n)),
    ...(d.ask ? { ask: { ...d.ask, reason: visible(d.ask.reason) } } : {}),
  };
}

async function decideCall(policy: PolicyDocument, req: PolicyRequest, opts: DecideOptions): Promise<PolicyDecision> {
  // A command string without shell syntax is decided (and run) as argv. A policy that allows
  // shell strings keeps its meaning: if the argv decision denies, the shell decision still may allow.
  const argv = req.mode === 'shell' && req.tool !== 'runtime_execute' && !req.shellOnly ? splitSimpleCommand(req.command) : null;
  if (argv) {
    const asArgv = await decideOne(policy, { ...req, mode: 'argv', command: argv[0], args: argv.slice(1) }, opts);
    const note = `the command has no shell syntax: decided as argv ${JSON.stringify(argv)}`;
    // An `ask` is as good as allowed here: deciding the string as a shell string instead must not dodge the rule.
    if (asArgv.allowed || asArgv.ask || !policy.shell.enabled) {
      const runAs = asArgv.runAs ?? { command: argv[0], args: argv.slice(1) };
      return { ...asArgv, notes: [note, ...asArgv.notes], ...(asArgv.allowed || asArgv.ask ? { runAs } : {}) };
    }
    return decideOne(policy, req, opts);
  }
  return decideOne(policy, req, opts);
}

async function decideOne(policy: PolicyDocument, req: PolicyRequest, opts: DecideOptions): Promise<PolicyDecision> {
  const state: { stage: PolicyStage; notes: string[] } = { stage: 'feature_gate', notes: [] };
  try {
    return await decideStages(policy, req, opts, state);
  } catch (e) {
    return {
      allowed: false,
      stage: state.stage,
      notes: state.notes,
      reason: `Policy evaluation failed in stage ${state.stage}: ${e instanceof Error ? e.message : String(e)} (denied: the engine fails closed)`,
    };
  }
}

async function decideStages(
  policy: PolicyDocument,
  req: PolicyRequest,
  opts: DecideOptions,
  state: { stage: PolicyStage; notes: string[] },
): Promise<PolicyDecision> {
  const notes = state.notes;
  const denied = (reason: string): PolicyDecision => ({ allowed: false, stage: state.stage, reason, notes });
  /** Runs one stage: records its notes, or turns its denial into the decision. */
  const run = <T>(stage: PolicyStage, f: () => StageResult<T>): { value: T } | { decision: PolicyDecision } => {
    state.stage = stage; // before the stage runs, so a failure inside it is attributed to it
    const r = f();
    if (!r.ok) return { decision: denied(r.reason) };
    if (r.notes) notes.push(...r.notes);
    return { value: r.value };
  };

  let g = run('feature_gate', () => featureGate(policy, req));
  if ('decision' in g) return g.decision;
  g = run('runtime_allowlist', () => runtimeAllowlist(policy, req));
  if ('decision' in g) return g.decision;

  // Runtime `shell` code is a shell string: decided like `execute` without args.
  const isShell = req.mode === 'shell' || (req.mode === 'code' && req.runtime === 'shell');
  const script = req.mode === 'shell' ? req.command : (req.code ?? '');
  const hasOpa = policy.opa.evaluators.length > 0;
  let exe: string | undefined;
  /** Set when a shell string is not in shell.allow and only OPA can still allow it. */
  let needsOpa: string | undefined;

  if (isShell) {
    state.stage = 'shell';
    const v = checkShellString(policy, script);
    if (v.kind === 'disabled' || v.kind === 'invalid') return denied(v.reason);
    if (v.kind === 'unlisted') {
      if (!hasOpa) return denied(v.reason);
      needsOpa = v.reason;
    } else {
      notes.push(`shell string allowed by shell.allow entry ${JSON.stringify(v.entry)}`);
    }
  } else {
    const e = run('executable', () => checkExecutable(policy, requestedExecutable(req.command, req.runtime), req.runtime));
    if ('decision' in e) return e.decision;
    const chosen = e.value;
    exe = chosen;
    if (req.mode === 'code' && typeof req.code !== 'string') {
      state.stage = 'arguments';
      return denied('Code mode needs "code"');
    }
    const a = run('arguments', () => screenArguments(policy, chosen, req.args ?? [], { codeMode: req.mode === 'code' }));
    if ('decision' in a) return a.decision;
  }

  const cwd = run('cwd', () => checkCwd(req.cwd));
  if ('decision' in cwd) return cwd.decision;
  const env = run('env', () => screenEnv(policy, req.env));
  if ('decision' in env) return env.decision;
  const limits = run('limits', () => checkLimits(policy, req.timeoutMs));
  if ('decision' in limits) return limits.decision;

  state.stage = 'rules';
  const rule = matchRule(policy, req, ruleArgv(req, exe, isShell ? script : undefined));
  if (rule?.decision === 'deny') return denied(`Denied by rule ${ruleNumber(rule.index)}: ${rule.reason}`);
  if (rule?.decision === 'allow') notes.push(`allowed by rules[${rule.index}]`);
  const ask = rule?.decision === 'ask' ? { rule: rule.index, reason: rule.reason } : undefined;

  let opa: PolicyDecision['opa'];
  let reason = needsOpa ? '' : 'Allowed by the team policy';
  if (hasOpa) {
    state.stage = 'opa';
    const input: OpaInput = {
      operation: isShell ? 'exec' : 'command_output',
      command: isShell ? '/bin/sh' : exe!,
      args: isShell ? ['-c', script] : [...(req.args ?? [])],
      ...(req.cwd !== undefined ? { cwd: cwd.value } : {}),
      ...(req.env !== undefined ? { env: env.value } : {}),
      team: req.team,
      subject: req.subject,
      tool: req.tool,
      ...(req.runtime ? { runtime: req.runtime } : {}),
      mode: isShell ? 'shell' : req.mode,
      ...(!isShell && req.mode === 'code' && req.code !== undefined ? { code: req.code } : {}),
    };
    const now = opts.now ?? (() => Date.now());
    const out = await askOpa(policy.opa, input, opts.fetch ?? globalThis.fetch.bind(globalThis), now);
    opa = { mode: policy.opa.mode, verdicts: out.verdicts };
    if (!out.allowed) {
      const r = needsOpa ? `${needsOpa}; OPA did not allow it either: ${out.reason}` : out.reason;
      return { allowed: false, stage: 'opa', reason: r, notes, opa };
    }
    if (needsOpa) notes.push('shell string not in shell.allow; allowed by OPA');
    reason = `Allowed by the team policy and OPA (${out.reason})`;
  }

  // The policy's own arguments go first (argv mode only; a code-mode file comes first there).
  const prepend = exe !== undefined && req.mode === 'argv' ? (ruleFor(policy, exe)?.prependArgs ?? []) : [];
  if (prepend.length) notes.push(`the policy adds ${JSON.stringify(prepend)} before the arguments`);
  const hardenGit = exe !== undefined && req.mode === 'argv' && executableBase(exe) === 'git' && policy.git.repositoryPrograms === 'disable';
  if (hardenGit) notes.push('git runs with the repository\'s filters, drivers, aliases, hooks and helpers switched off (git.repositoryPrograms = "disable")');
  return {
    allowed: !ask,
    stage: ask ? 'rules' : 'allowed',
    reason: ask ? `Approval required by rule ${ruleNumber(ask.rule)}: ${ask.reason}` : reason,
    notes,
    ...(ask ? { ask } : {}),
    ...(rule ? { rule: rule.index } : {}),
    ...(prepend.length ? { runAs: { command: exe!, args: [...prepend, ...(req.args ?? [])] } } : {}),
    effective: {
      cwd: cwd.value,
      env: env.value,
      timeoutMs: limits.value.timeoutMs,
      inlineBytes: limits.value.inlineBytes,
      artifactBytes: limits.value.artifactBytes,
      ...(isShell ? {} : { allowedExecutables: [...policy.executables.allow] }),
      ...(hardenGit ? { hardenGit: true as const } : {}),
      network: networkGrant(policy, rule?.index),
    },
    ...(opa ? { opa } : {}),
  };
}
