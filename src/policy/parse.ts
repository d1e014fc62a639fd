/**
 * Parsing a stored or uploaded policy: the zod schema first, then what a schema cannot say —
 * regexes that must compile, allowlist entries that must be bare names or absolute paths, a
 * default timeout within the maximum. Errors name the failing path (`limits.maxTimeoutMs: …`).
 */
import { z } from 'zod';
import { PolicyDocument } from '../contracts/policy.ts';
import { unknownKeysMessage } from '../contracts/strict-input.ts';
import { describeIssues, err, ok, type Result } from '../contracts/errors.ts';
import { entryRegex } from './shell.ts';
import { networkIssues } from './network.ts';

export function parsePolicy(json: unknown): Result<PolicyDocument> {
  // Unknown keys first: a typo (`"shel"`) must not be stored as if the policy said nothing.
  const unknown = unknownKeys(PolicyDocument, json, []);
  if (unknown.length) return err('invalid_argument', describeIssues(unknown));
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
  doc.rules.forEach((rule, i) => {
    rule.pattern.forEach((element, j) => {
      const alternatives = Array.isArray(element) ? element : [element];
      alternatives.forEach((alt, k) => {
        if (entryRegex(alt) === 'invalid') {
          issues.push({ path: ['rules', i, 'pattern', j, ...(Array.isArray(element) ? [k] : [])], message: 'invalid regular expression between the slashes' });
        }
      });
    });
  });
  if (doc.limits.defaultTimeoutMs > doc.limits.maxTimeoutMs) {
    issues.push({ path: ['limits', 'defaultTimeoutMs'], message: `must not exceed limits.maxTimeoutMs (${doc.limits.maxTimeoutMs})` });
  }
  issues.push(...networkIssues(doc));
  const older = (json as { artifacts?: { retentionHours?: unknown } } | null)?.artifacts?.retentionHours;
  if (doc.retention.artifactHours !== undefined && older !== undefined && older !== doc.retention.artifactHours) {
    issues.push({
      path: ['artifacts', 'retentionHours'],
      message: `is the older name of retention.artifactHours, and the two disagree (${String(older)} and ${doc.retention.artifactHours}): keep retention.artifactHours only`,
    });
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

/**
 * Keys of `value` that `schema` does not declare, with their paths, found by walking the schema
 * itself — so fields other parts add to the policy schema are known here without a second list.
 */
function unknownKeys(schema: z.ZodType, value: unknown, path: PropertyKey[]): { path: PropertyKey[]; message: string }[] {
  let s: z.ZodType = schema;
  // Look through wrappers that do not change the shape.
  while (s instanceof z.ZodDefault || s instanceof z.ZodOptional || s instanceof z.ZodNullable || s instanceof z.ZodPrefault) {
    s = s.unwrap() as z.ZodType;
  }
  if (value === null || typeof value !== 'object') return [];
  const out: { path: PropertyKey[]; message: string }[] = [];
  if (s instanceof z.ZodObject) {
    const shape = s.shape as Record<string, z.ZodType>;
    const valid = Object.keys(shape);
    const extra = Object.keys(value).filter((k) => !Object.hasOwn(shape, k));
    if (extra.length) out.push({ path, message: unknownKeysMessage(extra, valid) });
    for (const k of valid) if (Object.hasOwn(value, k)) out.push(...unknownKeys(shape[k], (value as Record<string, unknown>)[k], [...path, k]));
  } else if (s instanceof z.ZodRecord && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) out.push(...unknownKeys(s.valueType as z.ZodType, v, [...path, k]));
  } else if (s instanceof z.ZodArray && Array.isArray(value)) {
    value.forEach((v, i) => {
      out.push(...unknownKeys(s.element as z.ZodType, v, [...path, i]));
    });
  }
  return out;
}
