/**
 * The network a job gets: the team's `network`, or the matching rule's instead, with presets
 * expanded to host entries (`NetworkGrant`, src/contracts/network.ts). The edge puts the grant in
 * the job's spec; the agent's egress proxy enforces it and names `source` when it refuses, so a
 * refusal says which policy key to change. Also the checks a schema cannot say (parse.ts) and the
 * lines policy_check shows.
 */
import type { NetworkAllow, NetworkGrant, NetworkPolicy } from '../contracts/network.ts';
import type { PolicyDocument } from '../contracts/policy.ts';
import { credentialIssues } from './credentials.ts';
import { presetEntries } from './network-presets.ts';

/** The policy key whose `network` decides for a command: the matching rule's when it has one. */
function networkSource(policy: PolicyDocument, ruleIndex: number | undefined): { key: string; network: NetworkPolicy } {
  const rule = ruleIndex === undefined ? undefined : policy.rules[ruleIndex];
  if (rule?.network) return { key: `rules[${ruleIndex}].network`, network: rule.network };
  return { key: 'network', network: policy.network };
}

/** The grant for a command the rule at `ruleIndex` (or none) matched. */
export function networkGrant(policy: PolicyDocument, ruleIndex?: number): NetworkGrant {
  const { key, network: n } = networkSource(policy, ruleIndex);
  const base = { unlisted: n.unlisted, maxBytesUp: n.maxBytesUp, maxBytesDown: n.maxBytesDown, source: key };
  if (n.mode === 'off') return { mode: 'off', allow: [], ...base, unlisted: 'deny' };
  return { mode: n.mode, allow: expand(n), ...base, ...(n.credentials.length ? { credentials: n.credentials } : {}) };
}

/** The policy's own entries first, then each preset's, without repeating an entry. */
function expand(n: NetworkPolicy): NetworkAllow[] {
  const seen = new Set<string>();
  const out: NetworkAllow[] = [];
  for (const e of [...n.allow, ...n.presets.flatMap(presetEntries)]) {
    const k = JSON.stringify([e.host.toLowerCase(), e.ports ?? null, e.methods ?? null, e.privateAddresses ?? false]);
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(e);
  }
  return out;
}

/** One allow entry as people read it: `registry.npmjs.org:443,80 GET HEAD`. */
function describeAllow(e: NetworkAllow): string {
  const ports = e.ports ? `:${e.ports.join(',')}` : '';
  const methods = e.methods ? ` ${e.methods.join(' ')}` : ' any method';
  return `${e.host}${ports}${methods}${e.privateAddresses ? ' (private addresses allowed)' : ''}`;
}

/** What policy_check shows of a grant, and a note when the sandbox floor cannot enforce it. */
export function grantSummary(policy: PolicyDocument, ruleIndex: number | undefined, grant: NetworkGrant) {
  const { network } = networkSource(policy, ruleIndex);
  return {
    mode: grant.mode,
    source: grant.source,
    hosts: grant.allow.map(describeAllow),
    presets: [...network.presets],
    unlisted: grant.unlisted,
    max_bytes_up: grant.maxBytesUp,
    max_bytes_down: grant.maxBytesDown,
    ...(grant.mode !== 'off' && policy.sandbox.minimum === 'none' ? { sandbox_note: SANDBOX_NOTE } : {}),
  };
}

/**
 * An agent whose sandbox is `none` has no way to keep a job off the network, so it refuses jobs
 * with a network grant; a policy that lets such agents run jobs says so.
 */
export const SANDBOX_NOTE =
  'network needs an agent with sandbox gvisor or bwrap: an agent with sandbox "none" refuses jobs with network; set sandbox.minimum to "bwrap" or "gvisor" so such jobs only go to agents that enforce it';

/** A line for policy_check's text answer. */
export function grantLine(g: ReturnType<typeof grantSummary>): string {
  if (g.mode === 'off') return `network: off (${g.source}): the job gets no network`;
  const what =
    g.mode === 'open'
      ? 'any host'
      : `${g.hosts.length} host entr${g.hosts.length === 1 ? 'y' : 'ies'}${g.presets.length ? ` (presets ${g.presets.join(', ')})` : ''}; unlisted hosts: ${g.unlisted}`;
  return `network: ${g.mode} (${g.source}): ${what}; at most ${g.max_bytes_up} bytes up, ${g.max_bytes_down} down${g.sandbox_note ? `\n${g.sandbox_note}` : ''}`;
}

/**
 * Said beside the result of a job that failed with no network: a build that could not download its
 * dependencies then reads why, and which policy key gives it network.
 */
export function noNetworkNote(grant: NetworkGrant | undefined, failed: boolean): string[] {
  if (!failed || !grant || grant.mode !== 'off') return [];
  return [`the job had no network: ${grant.source}.mode is "off" in the team policy; to let it reach hosts, set ${grant.source} (docs/network.md)`];
}

/** Problems in a policy's `network` sections that the schema cannot see, with their paths. */
export function networkIssues(doc: PolicyDocument): { path: PropertyKey[]; message: string }[] {
  const issues: { path: PropertyKey[]; message: string }[] = [];
  const check = (n: NetworkPolicy, path: PropertyKey[]) => {
    if (n.mode === 'open' && n.unlisted === 'ask') {
      issues.push({
        path: [...path, 'unlisted'],
        message: 'mode "open" allows every host, so there is nothing to ask about; use mode "allowlist" with unlisted "ask", or unlisted "deny"',
      });
    }
    const presets = new Set<string>();
    n.presets.forEach((p, i) => {
      if (presets.has(p)) issues.push({ path: [...path, 'presets', i], message: `preset "${p}" is listed twice` });
      presets.add(p);
    });
    n.allow.forEach((e, i) => {
      const problem = hostProblem(e);
      if (problem) issues.push({ path: [...path, 'allow', i, 'host'], message: problem });
      if (e.privateAddresses && e.host.startsWith('*.')) {
        issues.push({
          path: [...path, 'allow', i, 'privateAddresses'],
          message: `privateAddresses is allowed on an exact host or an IP address only, not on the wildcard "${e.host}" (any name under it could point at a private address)`,
        });
      }
    });
  };
  const checkAll = (n: NetworkPolicy, path: PropertyKey[]) => {
    check(n, path);
    issues.push(...credentialIssues(n, n.mode === 'open' ? null : expand(n), path));
  };
  checkAll(doc.network, ['network']);
  doc.rules.forEach((r, i) => {
    if (r.network) checkAll(r.network, ['rules', i, 'network']);
  });
  return issues;
}

/** A wildcard must keep a registrable domain: `*.example.org`, never `*.com`. */
function hostProblem(e: NetworkAllow): string | null {
  if (!e.host.startsWith('*.')) return null;
  const labels = e.host.slice(2).replace(/\.$/, '').split('.');
  if (labels.length < 2) return `the wildcard "${e.host}" covers a whole top-level domain; allowed: a wildcard under a domain (*.example.org) or an exact host`;
  return null;
}
