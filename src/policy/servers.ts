/**
 * Decides a script's call to an MCP server from the policy's `script.servers` section: the first
 * rule whose server and tools match decides, otherwise the section's `default`. No section: denied.
 */
import type { ScriptServersPolicy, ServerRule } from '../contracts/policy.ts';

export interface ServerDecision {
  decision: 'allow' | 'ask' | 'deny';
  /** Why, in words the script reads after `denied by policy: `. */
  reason: string;
}

const ruleMatches = (r: ServerRule, server: string, tool: string) => (r.server === '*' || r.server === server) && (!r.tools || r.tools.includes(tool));

/** The decision for calling `tool` of `server`. */
export function decideServerCall(policy: ScriptServersPolicy | undefined, server: string, tool: string): ServerDecision {
  if (!policy) return { decision: 'deny', reason: 'the team policy has no script.servers section' };
  const i = policy.rules.findIndex((r) => ruleMatches(r, server, tool));
  if (i < 0) return { decision: policy.default, reason: `no script.servers rule matches ${server}.${tool} (script.servers.default = ${policy.default})` };
  const r = policy.rules[i]!;
  return { decision: r.decision, reason: r.reason ?? `script.servers.rules[${i}] decides ${r.decision} for ${server}.${tool}` };
}

/**
 * Whether a script may list a server's tools: unless every way to call it is denied (no section, or
 * a deny for the whole server before any rule that could allow one of its tools, with a deny default).
 */
export function mayListServer(policy: ScriptServersPolicy | undefined, server: string): ServerDecision {
  if (!policy) return { decision: 'deny', reason: 'the team policy has no script.servers section' };
  for (const [i, r] of policy.rules.entries()) {
    if (r.server !== '*' && r.server !== server) continue;
    if (r.decision !== 'deny') return { decision: 'allow', reason: `script.servers.rules[${i}]` };
    if (!r.tools) return { decision: 'deny', reason: r.reason ?? `script.servers.rules[${i}] denies every tool of ${server}` };
  }
  return policy.default === 'deny'
    ? { decision: 'deny', reason: `no script.servers rule allows a tool of ${server} (script.servers.default = deny)` }
    : { decision: 'allow', reason: 'script.servers.default' };
}
