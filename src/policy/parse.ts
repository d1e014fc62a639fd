/**
 * Parsing a stored or uploaded policy: the zod schema first, then what a schema cannot say —
 * regexes that must compile, allowlist entries that must be bare names or absolute paths, a
 * default timeout within the maximum. Errors name the failing path (`limits.maxTimeoutMs: …`).
 */
import { PolicyDocument } from '../contracts/policy.ts';
import { describeIssues, err, ok, type Result } from '../contracts/errors.ts';
import { entryRegex } from './shell.ts';

export function parsePolicy(json: unknown): Result<PolicyDocument> {
  const parsed = PolicyDocument.safeParse(json);
  if (!parsed.success) return err('invalid_argument', describeIssues(parsed.error.issues));
  const doc = parsed.data;
  const issues: { path: PropertyKey[]; message: string }[] = [];

  doc.executables.allow.forEach((e, i) => {
    const problem = allowEntryProblem(e);
    if (problem) issues.push({ path: ['executables', 'allow', i], message: problem });
  });
  for (const [exe, rule] of Object.entries(doc.argumentRules)) {
    rule.deny.forEach((source, i) => {
      try {
        new RegExp(source);
      } catch (e) {
        issues.push({ path: ['argumentRules', exe, 'deny', i], message: `invalid regular expression: ${e instanceof Error ? e.message : String(e)}` });
      }
    });
  }
  doc.shell.allow.forEach((entry, i) => {
    if (entryRegex(entry) === 'invalid') issues.push({ path: ['shell', 'allow', i], message: 'invalid regular expression between the slashes' });
    if (entry === '') issues.push({ path: ['shell', 'allow', i], message: 'empty entry' });
  });
  if (doc.limits.defaultTimeoutMs > doc.limits.maxTimeoutMs) {
    issues.push({ path: ['limits', 'defaultTimeoutMs'], message: `must not exceed limits.maxTimeoutMs (${doc.limits.maxTimeoutMs})` });
  }
  doc.opa.evaluators.forEach((ev, i) => {
    if (!/^https?:\/\//i.test(ev.url)) issues.push({ path: ['opa', 'evaluators', i, 'url'], message: 'must be an http(s) URL' });
  });
  return issues.length ? err('invalid_argument', describeIssues(issues)) : ok(doc);
}

/** Allow entries are bare names (resolved in the sandbox PATH) or absolute paths without `.`/`..` segments. */
function allowEntryProblem(e: string): string | null {
  if (/[\u0000-\u001f\u007f]/.test(e)) return 'contains control characters';
  if (!e.includes('/')) return null;
  if (!e.startsWith('/')) return 'must be a bare name or an absolute path';
  if (e.split('/').some((s) => s === '.' || s === '..') || e.endsWith('/')) return 'absolute paths must be normalised (no ".", ".." or trailing "/")';
  return null;
}
