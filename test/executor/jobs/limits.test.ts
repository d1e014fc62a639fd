/**
 * Resource limits end to end on the agent side: the policy document carries them (with safe
 * defaults and range errors that name the field), a job spec without them still gets the
 * defaults, and the rlimit prefix pins soft = hard so a job cannot raise them. Enforcement
 * itself is attacked in test/attack/.
 */
import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../../src/policy/engine.ts';
import { DEFAULT_POLICY } from '../../../src/policy/default-policy.ts';
import { DEFAULT_RESOURCE_LIMITS } from '../../../src/contracts/resource-limits.ts';
import { effectiveLimits, jobRlimits, ulimitCommands } from '../../../executor/jobs/limits.ts';
import { MIN_RUNSC_DATE, runscBuildDate, runscVersionVerdict } from '../../../executor/sandbox/gvisor.ts';
import { makeRig } from '../helpers.ts';

describe('resource limits in the team policy', () => {
  it('gives every policy safe defaults, the default policy included', () => {
    const r = parsePolicy({ version: 1 });
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.value.limits).toMatchObject(DEFAULT_RESOURCE_LIMITS);
    expect(DEFAULT_POLICY.limits).toMatchObject(DEFAULT_RESOURCE_LIMITS);
  });

  it('refuses a limit out of range, naming the field', () => {
    const r = parsePolicy({ version: 1, limits: { memoryBytes: 1024 } });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toContain('limits.memoryBytes');
  });
});

describe('limits on the agent', () => {
  it('fills what the spec leaves out with the defaults and keeps what it sets', () => {
    expect(effectiveLimits({ inlineBytes: 1, artifactBytes: 1 })).toEqual(DEFAULT_RESOURCE_LIMITS);
    expect(effectiveLimits({ inlineBytes: 1, artifactBytes: 1, memoryBytes: 300 << 20, cpuSeconds: 5 })).toMatchObject({
      memoryBytes: 300 << 20,
      cpuSeconds: 5,
      maxProcesses: DEFAULT_RESOURCE_LIMITS.maxProcesses,
    });
  });

  it('sets every rlimit in the launcher with ulimit (soft and hard), the process count only where it counts the job alone', () => {
    const l = { ...DEFAULT_RESOURCE_LIMITS, maxOpenFiles: 99, maxFileBytes: 4096, cpuSeconds: 7, maxProcesses: 33 };
    expect(ulimitCommands(jobRlimits(l, true))).toEqual(['ulimit -n 99', 'ulimit -f 8', 'ulimit -t 7', 'ulimit -c 0', 'ulimit -p 33']);
    expect(ulimitCommands(jobRlimits(l, false))).toEqual(['ulimit -n 99', 'ulimit -f 8', 'ulimit -t 7', 'ulimit -c 0']);
  });

  it('a job sees its limits and cannot raise them (none driver: rlimits only)', async () => {
    const rig = await makeRig('none');
    try {
      const { exit } = await rig.run({
        mode: 'shell',
        command: 'ulimit -n; ulimit -Hn; ulimit -n 5000 2>/dev/null && echo raised || echo refused',
        limits: { inlineBytes: 1000, artifactBytes: 1000, maxOpenFiles: 123 },
      });
      expect(exit.stdout).toBe('123\n123\nrefused\n');
    } finally {
      await rig.close();
    }
  });
});

describe('runsc version', () => {
  it('reads the build date of gVisor release and Debian version strings, and refuses the known-broken one', () => {
    expect(runscBuildDate('runsc version release-20251110.0')).toBe(20251110);
    expect(runscBuildDate('runsc version 0.0~20240729.0')).toBe(20240729);
    expect(runscBuildDate('runsc version 0.0~20221219.0')).toBeLessThan(MIN_RUNSC_DATE);
    expect(runscBuildDate('something else')).toBeNull();
  });

  it("the agent refuses Debian bookworm's runsc with the reason and what to install, and accepts current builds", () => {
    const old = runscVersionVerdict('runsc version 0.0~20221219.0');
    expect(old.refuse).toContain('runsc 0.0~20221219.0 is too old');
    expect(old.refuse).toContain('`ls -l` and `stat`');
    expect(old.refuse).toContain("gVisor's release channel");
    expect(runscVersionVerdict('runsc version 0.0~20240729.0')).toEqual({});
    expect(runscVersionVerdict('runsc version release-20251110.0')).toEqual({});
    expect(runscVersionVerdict('').warn).toContain('cannot tell the runsc build date');
  });
});
