/**
 * `requireParts` (harness.ts), which every whole-system test file asks for its real parts: a missing part skips the
 * file's tests outside CI only; under CI=true it fails the file, naming each missing part and what installs it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { requireParts } from './harness.ts';

const ci = process.env.CI;
afterEach(() => {
  if (ci === undefined) delete process.env.CI;
  else process.env.CI = ci;
});

describe('requireParts', () => {
  it('every part here: true, in CI or not', () => {
    for (const v of ['true', undefined]) {
      if (v === undefined) delete process.env.CI;
      else process.env.CI = v;
      expect(requireParts({ runsc: true, openssl: true })).toBe(true);
    }
  });

  it('a part missing outside CI: false (the tests skip)', () => {
    delete process.env.CI;
    expect(requireParts({ runsc: true, openssl: false })).toBe(false);
  });

  it('parts missing under CI=true: the file fails, naming them and what installs them', () => {
    process.env.CI = 'true';
    expect(() => requireParts({ runsc: false, openssl: true })).toThrow('runsc is required under CI=true (.ci/run installs it)');
    expect(() => requireParts({ runsc: false, curl: false }, 'scripts/install-system-deps.sh installs them')).toThrow(
      'runsc, curl are required under CI=true (scripts/install-system-deps.sh installs them)',
    );
  });
});
