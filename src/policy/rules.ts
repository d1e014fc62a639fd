/**
 * The rules stage: ordered allow / ask / deny rules matched against the argv that would run
 * (after the allowlists passed). The first rule whose pattern is a prefix of the argv decides;
 * no match leaves the decision to the rest of the policy. A shell string is matched as the argv
 * that runs it, `["sh", "-c", string]`, so `["sh"]` covers every shell string.
 *
 * Patterns are literal prefixes (as in Codex's execpolicy): `git -C . push` is not `["git",
 * "push"]`. A rule meant to hold against reordered options needs a `/regex/` element, or an
 * allowlist that does not admit the options.
 */
import type { PolicyDocument, PolicyRule } from '../contracts/policy.ts';
import { executableBase } from '../contracts/runtimes.ts';
import { entryRegex, matchesEntry } from './shell.ts';
import type { PolicyRequest } from './types.ts';

export interface RuleMatch {
  /** Index of the deciding rule in `rules`. */
  index: number;
  decision: PolicyRule['decision'];
  /** What the caller and the approver read. */
  reason: string;
}

/** The argv a rule sees. */
export function ruleArgv(req: Pick<PolicyRequest, 'args'>, exe: string | undefined, shellScript: string | undefined): string[] {
  if (shellScript !== undefined) return ['sh', '-c', shellScript];
  return [exe ?? '', ...(req.args ?? [])];
}

/** The tool a rule's `tools` filter sees: a dry run is the call it simulates. */
function ruleTool(req: Pick<PolicyRequest, 'tool' | 'runtime'>): 'execute' | 'runtime_execute' | 'run_script' {
  if (req.tool === 'policy_check') return req.runtime ? 'runtime_execute' : 'execute';
  return req.tool;
}

export function matchRule(policy: PolicyDocument, req: Pick<PolicyRequest, 'tool' | 'runtime'>, argv: string[]): RuleMatch | null {
  const tool = ruleTool(req);
  for (const [index, rule] of policy.rules.entries()) {
    if (rule.tools && !rule.tools.includes(tool)) continue;
    if (!matchesPrefix(rule.pattern, argv)) continue;
    return { index, decision: rule.decision, reason: rule.reason ?? describeRule(rule, index) };
  }
  return null;
}

function describeRule(rule: PolicyRule, index: number): string {
  const pattern = rule.pattern.map((e) => (Array.isArray(e) ? `[${e.join('|')}]` : e)).join(' ');
  return `rules[${index}] (${rule.decision} ${JSON.stringify(pattern)})`;
}

function matchesPrefix(pattern: PolicyRule['pattern'], argv: string[]): boolean {
  if (pattern.length > argv.length) return false;
  return pattern.every((element, i) => {
    const alternatives = Array.isArray(element) ? element : [element];
    // The executable: a bare pattern name is compared with the base name, so a path cannot dodge it.
    const value = i === 0 ? argv[0] : argv[i];
    return alternatives.some((alt) => {
      if (matchesEntry(alt, value) === true) return true;
      const exactPath = entryRegex(alt) === null && alt.includes('/');
      return i === 0 && !exactPath && matchesEntry(alt, executableBase(value)) === true;
    });
  });
}
