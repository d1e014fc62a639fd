import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/policy/engine.ts';
import { POLICY_MAX_ARTIFACT_BYTES } from '../../src/contracts/limits.ts';
import { artifactHoursOf } from '../../src/contracts/policy.ts';

const errorOf = (json: unknown) => {
  const r = parsePolicy(json);
  if (r.ok) throw new Error('expected an error');
  return r.error;
};

describe('parsePolicy', () => {
  it('fills defaults for a minimal document', () => {
    const r = parsePolicy({ version: 1 });
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.value).toMatchObject({ shell: { enabled: false }, limits: { overMax: 'deny' }, opa: { mode: 'any', evaluators: [] } });
  });
  it('names the failing path of a schema error', () => {
    const e = errorOf({ version: 1, limits: { maxTimeoutMs: -5 } });
    expect(e.code).toBe('invalid_argument');
    expect(e.message).toContain('limits.maxTimeoutMs');
  });
  it('rejects a wrong version and non-objects', () => {
    expect(errorOf({ version: 2 }).message).toContain('version');
    expect(errorOf('nope').message).toContain('(root)');
  });
  it('rejects an argument rule regex that does not compile, naming it', () => {
    expect(errorOf({ version: 1, argumentRules: { git: { deny: ['ok', '('] } } }).message).toContain('argumentRules.git.deny.1: invalid regular expression');
  });
  it('rejects a shell.allow /regex/ that does not compile', () => {
    expect(errorOf({ version: 1, shell: { enabled: true, allow: ['ls', '/(/'] } }).message).toContain('shell.allow.1');
  });
  it('rejects relative or unnormalised paths in executables.allow', () => {
    expect(errorOf({ version: 1, executables: { allow: ['ls', 'bin/ls'] } }).message).toContain('executables.allow.1');
    expect(errorOf({ version: 1, executables: { allow: ['/usr/bin/../bin/sh'] } }).message).toContain('executables.allow.0');
  });
  it('rejects a default timeout above the maximum', () => {
    expect(errorOf({ version: 1, limits: { defaultTimeoutMs: 60_000, maxTimeoutMs: 30_000 } }).message).toContain('limits.defaultTimeoutMs');
  });
  it('takes artifacts up to POLICY_MAX_ARTIFACT_BYTES per stream (2 GB and more), and says what is allowed above it', () => {
    const r = parsePolicy({ version: 1, limits: { maxArtifactBytes: 2 * 1024 ** 3 } });
    expect(r.ok && r.value.limits.maxArtifactBytes).toBe(2 * 1024 ** 3);
    expect(parsePolicy({ version: 1, limits: { maxArtifactBytes: POLICY_MAX_ARTIFACT_BYTES } }).ok).toBe(true);
    const e = errorOf({ version: 1, limits: { maxArtifactBytes: POLICY_MAX_ARTIFACT_BYTES + 1 } });
    expect(e.message).toContain('limits.maxArtifactBytes');
    expect(e.message).toContain(String(POLICY_MAX_ARTIFACT_BYTES));
  });
  it('keeps job output for retention.artifactHours, or artifacts.retentionHours (its older name), and refuses the two disagreeing', () => {
    const hours = (json: unknown) => {
      const r = parsePolicy(json);
      if (!r.ok) throw new Error(r.error.message);
      return artifactHoursOf(r.value);
    };
    expect(hours({ version: 1 })).toBe(24);
    expect(hours({ version: 1, artifacts: { retentionHours: 2 } })).toBe(2);
    expect(hours({ version: 1, retention: { artifactHours: 5 } })).toBe(5);
    expect(hours({ version: 1, retention: { artifactHours: 5 }, artifacts: { retentionHours: 5 } })).toBe(5);
    const e = errorOf({ version: 1, retention: { artifactHours: 5 }, artifacts: { retentionHours: 2 } });
    expect(e.message).toContain('artifacts.retentionHours');
    expect(e.message).toContain('retention.artifactHours');
    expect(errorOf({ version: 1, retention: { artifactHours: 24 * 91 } }).message).toContain('retention.artifactHours');
  });
  it('rejects a non-http OPA evaluator URL', () => {
    expect(errorOf({ version: 1, opa: { evaluators: [{ url: 'file:///x.rego' }] } }).message).toContain('opa.evaluators.0.url');
  });
});
