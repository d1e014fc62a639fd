/**
 * What list_runtimes and the Agents page show as a runtime's version: the toolchain's own version
 * line, not a start-up notice it printed first. The real kotlinc is checked where it is installed
 * (`.ci/run` installs it, so under CI it must be there).
 */
import { describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

const ELIXIR = '/usr/bin/elixir';
if (!existsSync(ELIXIR) && process.env.CI === 'true') throw new Error('elixir is required under CI=true (.ci/run installs it)');

describe('the runtime probe leaves nothing where the agent runs', () => {
  it('reads elixir past the Erlang banner', () => {
    expect(versionLine('Erlang/OTP 25 [erts-13.1.5] [source] [64-bit]\n\nElixir 1.14.0 (compiled with Erlang/OTP 24)')).toBe(
      'Elixir 1.14.0 (compiled with Erlang/OTP 24)',
    );
  });

  it.skipIf(!existsSync(ELIXIR))(
    'probes every runtime from a checkout without writing a file into it (no erl_crash.dump) or changing the cwd',
    async () => {
      const checkout = mkdtempSync(join(tmpdir(), 'gatehouse-probe-checkout-'));
      const before = process.cwd();
      process.chdir(checkout);
      try {
        const { byRuntime } = await probeRuntimes();
        expect(byRuntime.get('elixir')?.[0]?.version).toMatch(/^Elixir \d/);
        expect(process.cwd()).toBe(checkout);
        expect(readdirSync(checkout)).toEqual([]);
      } finally {
        process.chdir(before);
        rmSync(checkout, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
