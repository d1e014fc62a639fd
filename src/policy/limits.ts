/** Stage 7: timeout (default, maximum, clamp or deny) and output caps (the governed-runtime contract's 7th check, docs/architecture.md). */
import type { PolicyDocument } from '../contracts/policy.ts';
import { deny, pass, type StageResult } from './types.ts';

export interface Limits {
  timeoutMs: number;
  inlineBytes: number;
  artifactBytes: number;
}

export function checkLimits(policy: PolicyDocument, requested: number | undefined): StageResult<Limits> {
  const l = policy.limits;
  const notes: string[] = [];
  const caps = { inlineBytes: l.inlineOutputBytes, artifactBytes: l.maxArtifactBytes };
  if (requested === undefined) {
    // A policy whose default exceeds its maximum is a misconfiguration; the maximum wins.
    if (l.defaultTimeoutMs > l.maxTimeoutMs) {
      notes.push(`default timeout ${l.defaultTimeoutMs}ms lowered to the maximum ${l.maxTimeoutMs}ms`);
      return pass({ timeoutMs: l.maxTimeoutMs, ...caps }, notes);
    }
    return pass({ timeoutMs: l.defaultTimeoutMs, ...caps });
  }
  if (!Number.isFinite(requested) || !Number.isInteger(requested) || requested <= 0) {
    return deny(`Requested timeout (${requested}ms) must be a positive whole number of milliseconds`);
  }
  if (requested > l.maxTimeoutMs) {
    if (l.overMax === 'deny') return deny(`Requested timeout (${requested}ms) exceeds maximum (${l.maxTimeoutMs}ms)`);
    notes.push(`timeout ${requested}ms clamped to the maximum ${l.maxTimeoutMs}ms`);
    return pass({ timeoutMs: l.maxTimeoutMs, ...caps }, notes);
  }
  return pass({ timeoutMs: requested, ...caps });
}
