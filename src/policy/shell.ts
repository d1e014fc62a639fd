/**
 * Stage 4 for shell strings (`execute` without args, runtime `shell` code). The decision is on
 * the WHOLE string — never its first word, so `ls; rm -rf /` is not allowed by an `ls` entry.
 * `shell.allow` entries are exact text, or `/regex/` which the engine anchors at both ends.
 */
import type { PolicyDocument } from '../contracts/policy.ts';

export type ShellVerdict =
  | { kind: 'allowed'; entry: string }
  | { kind: 'disabled'; reason: string }
  | { kind: 'unlisted'; reason: string }
  | { kind: 'invalid'; reason: string };

export function checkShellString(policy: PolicyDocument, script: string): ShellVerdict {
  if (!policy.shell.enabled) {
    return { kind: 'disabled', reason: 'Shell strings are disabled by policy (shell.enabled = false); pass "args" to run an executable directly' };
  }
  if (script.trim() === '') return { kind: 'invalid', reason: 'Shell string is empty' };
  if (script.includes('\u0000')) return { kind: 'invalid', reason: 'Shell string contains a NUL byte' };
  for (const entry of policy.shell.allow) {
    const m = matchesEntry(entry, script);
    if (m === 'invalid') continue; // parsePolicy rejects these; a stored one simply never matches
    if (m) return { kind: 'allowed', entry };
  }
  return {
    kind: 'unlisted',
    reason: `Shell string ${JSON.stringify(clip(script))} does not match any entry of shell.allow (the whole string must match); pass "args" to run an executable directly`,
  };
}

/** `/…/` is a regex over the whole string; anything else must be identical. */
export function matchesEntry(entry: string, script: string): boolean | 'invalid' {
  const re = entryRegex(entry);
  if (re === 'invalid') return 'invalid';
  return re ? re.test(script) : entry === script;
}

const cache = new Map<string, RegExp | null | 'invalid'>();

/** The anchored regex of a `/…/` entry, null for an exact entry, 'invalid' if it does not compile. */
export function entryRegex(entry: string): RegExp | null | 'invalid' {
  const hit = cache.get(entry);
  if (hit !== undefined) return hit;
  let re: RegExp | null | 'invalid' = null;
  if (entry.length >= 2 && entry.startsWith('/') && entry.endsWith('/')) {
    // No flags: without `m`, ^ and $ bind to the whole string, so a newline cannot smuggle a second command.
    try {
      re = new RegExp(`^(?:${entry.slice(1, -1)})$`);
    } catch {
      re = 'invalid';
    }
  }
  if (cache.size > 1000) cache.clear();
  cache.set(entry, re);
  return re;
}

function clip(s: string): string {
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
}
