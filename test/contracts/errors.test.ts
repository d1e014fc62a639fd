/**
 * One error vocabulary (src/contracts/errors.ts): every code Gatehouse answers with is listed with
 * its meaning, and a code from outside (an agent, a stored row) becomes one of them or a fallback.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CODES, ErrorCodeSchema, asErrorCode, isErrorCode } from '../../src/contracts/errors.ts';

const ROOT = join(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('error vocabulary', () => {
  it('gives every code a meaning', () => {
    for (const [code, meaning] of Object.entries(ERROR_CODES)) {
      expect(code).toMatch(/^[a-z][a-z_]*$/);
      expect(meaning.length, code).toBeGreaterThan(10);
    }
  });

  it('lists every code the edge and the agent write as an error code', () => {
    // Literal codes in the places errors are made: err(…), apiError(c, …), fail(…), refuse(…), toolError(…, code), `code: '…'` next to a message.
    const pattern =
      /(?:\berr\(|apiError\(c, |\bfail\((?:c, \d+, )?|\brefuse\(|toolError\([^;]*?, )'([a-z][a-z_]+)'|(?<!addIssue\(\{ )code: '([a-z][a-z_]+)'(?:,| as const,) message/g;
    const unknown = new Set<string>();
    for (const f of [...sources(join(ROOT, 'src')), ...sources(join(ROOT, 'executor'))]) {
      for (const m of readFileSync(f, 'utf8').matchAll(pattern)) {
        const code = m[1] ?? m[2];
        if (!isErrorCode(code)) unknown.add(`${code} (${f.slice(ROOT.length + 1)})`);
      }
    }
    expect([...unknown]).toEqual([]);
  });

  it('maps a code from outside to one of ours or the fallback, and the schema refuses the rest', () => {
    expect(asErrorCode('spawn_failed', 'internal')).toBe('spawn_failed');
    expect(asErrorCode('x'.repeat(10_000), 'spawn_failed')).toBe('spawn_failed');
    expect(asErrorCode('__proto__', 'internal')).toBe('internal');
    expect(asErrorCode(null, 'internal')).toBe('internal');
    expect(ErrorCodeSchema.safeParse('no_agent').success).toBe(true);
    expect(ErrorCodeSchema.safeParse('toString').success).toBe(false);
  });
});
