/**
 * What list_runtimes and the Agents page show as a runtime's version: the toolchain's own version
 * line, not a start-up notice it printed first. The real kotlinc is checked where it is installed
 * (`.ci/run` installs it, so under CI it must be there).
 */
import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { probeRuntimes, versionLine } from '../../../executor/runtimes/probe.ts';

const KOTLINC = '/usr/bin/kotlinc';
if (!existsSync(KOTLINC) && process.env.CI === 'true') throw new Error('kotlinc is required under CI=true (.ci/run installs it)');

describe('a runtime version is the version line', () => {
  it('skips JVM notices and the "info:" prefix', () => {
    expect(
      versionLine(
        'OpenJDK 64-Bit Server VM warning: Options -Xverify:none and -noverify were deprecated in JDK 13\ninfo: kotlinc-jvm 1.3-SNAPSHOT (JRE 17.0.15)',
      ),
    ).toBe('kotlinc-jvm 1.3-SNAPSHOT (JRE 17.0.15)');
    expect(versionLine('Picked up _JAVA_OPTIONS: -Xmx1g\nopenjdk 17.0.15 2025-04-15')).toBe('openjdk 17.0.15 2025-04-15');
    expect(versionLine('Python 3.11.2')).toBe('Python 3.11.2');
    expect(versionLine('')).toBe('unknown');
  });

  it.skipIf(!existsSync(KOTLINC))(
    'the real kotlinc reads as kotlinc, not as a JVM warning',
    async () => {
      const { byRuntime } = await probeRuntimes(['kotlin']);
      const k = byRuntime.get('kotlin')?.find((r) => r.executable === 'kotlinc');
      expect(k?.version).toMatch(/^kotlinc-jvm \d/);
    },
    60_000,
  );
});
