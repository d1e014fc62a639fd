/**
 * Sandbox reuse under gVisor (team policy `sandbox.reuse`): the shared driver behaviour with
 * reuse on, then what reuse itself promises — which jobs share a sandbox and when it is
 * recycled. What a hostile job cannot leave for the next one is in test/attack/gvisor-reuse.test.ts.
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { JobSpec } from '../../../src/contracts/agent-protocol.ts';
import type { SandboxReuse } from '../../../src/contracts/sandbox-reuse.ts';
import { driverSuite } from './suite.ts';
import { makeRig, requireTool, runtimes, suiteRig, type Rig } from '../helpers.ts';
import { DISCARD_LIVE } from '../../../executor/jobs/relay.ts';
import type { GvisorDriver } from '../../../executor/sandbox/gvisor.ts';
import { MAX_SHORT_BUSY, MAX_STARTS, RETIRE_AHEAD_JOBS, SHORT_JOB_MS } from '../../../executor/sandbox/gvisor-reuse/pool.ts';

driverSuite('gvisor', { reuse: { jobs: 100, seconds: 600 } });

const d = requireTool('gvisor') ? describe : describe.skip;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

d('gvisor sandbox reuse', () => {
  const rig = suiteRig('gvisor', { warm: 0 });

  /** gVisor gives each sandbox a random boot id: the same id means the same sandbox ran both jobs. */
  async function sandboxOf(reuse: SandboxReuse | undefined, extra: Partial<JobSpec> = {}, on: Rig = rig): Promise<string> {
    const { exit } = await on.run({ command: 'cat', args: ['/proc/sys/kernel/random/boot_id'], ...(reuse ? { reuse } : {}), ...extra });
    expect(exit).toMatchObject({ state: 'exited', exitCode: 0 });
    expect(exit.stdout).toMatch(/^[0-9a-f-]{36}\n$/);
    return exit.stdout;
  }

  it('runs consecutive jobs with the setting in one sandbox; without it every job gets a fresh one', async () => {
    const reuse = { jobs: 10, seconds: 600 };
    const a = await sandboxOf(reuse);
    expect(await sandboxOf(reuse)).toBe(a);
    expect(await sandboxOf(reuse)).toBe(a);
    const single = [await sandboxOf(undefined), await sandboxOf(undefined)];
    expect(single[0]).not.toBe(single[1]);
    expect(single).not.toContain(a);
  }, 60_000);

  it('recycles a sandbox after reuse.jobs jobs', async () => {
    const reuse = { jobs: 2, seconds: 600 };
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await sandboxOf(reuse));
    expect(ids[1]).toBe(ids[0]);
    expect(ids[2]).not.toBe(ids[1]);
    expect(ids[3]).toBe(ids[2]);
    expect(ids[4]).not.toBe(ids[3]);
  }, 60_000);

  it('starts the replacement RETIRE_AHEAD_JOBS jobs before a sandbox retires', async () => {
    const reuse = { jobs: RETIRE_AHEAD_JOBS + 4, seconds: 600 };
    // A rig of its own: a spare the earlier tests left starting would hold the pool's spare-start slot
    // (MAX_SPARE_STARTS) and delay this test's replacement by a few jobs.
    const own = await makeRig('gvisor', { warm: 0 });
    // Counts the sandboxes the pool starts (the driver's own `create`, wrapped).
    const driver = own.driver as unknown as { create: (...a: unknown[]) => unknown };
    const create = driver.create.bind(driver);
    const startedAt: number[] = [];
    let job = 0;
    driver.create = (...a: unknown[]) => {
      if (a[1] === 'reuse') startedAt.push(job);
      return create(...a);
    };
    try {
      const ids: string[] = [];
      for (job = 1; job <= reuse.jobs + 1; job++) ids.push(await sandboxOf(reuse, {}, own));
      // One sandbox until its replacement was started, while it had RETIRE_AHEAD_JOBS jobs left
      // (not at its last job: then the job after it would wait for a start).
      expect(new Set(ids.slice(0, reuse.jobs - RETIRE_AHEAD_JOBS)).size).toBe(1);
      expect(startedAt.slice(0, 2)).toEqual([1, reuse.jobs - RETIRE_AHEAD_JOBS]);
      // Both serve jobs from then on; the first is recycled after reuse.jobs of them.
      expect(ids.filter((id) => id === ids[0]).length).toBeLessThanOrEqual(reuse.jobs);
    } finally {
      driver.create = create;
      await own.close();
    }
  }, 60_000);

  it('starts at most MAX_STARTS sandboxes at once for a burst; the rest of the burst takes the ones that free up', async () => {
    const reuse = { jobs: 100, seconds: 600 };
    const limits = { inlineBytes: 40_000, artifactBytes: 1 << 20 };
    const burst = 12;
    const big = await makeRig('gvisor', { warm: 0, capacity: burst });
    const driver = big.driver as unknown as { create: (...a: unknown[]) => { ready: Promise<boolean> } };
    const create = driver.create.bind(driver);
    let inFlight = 0;
    let peak = 0;
    let starts = 0;
    driver.create = (...a: unknown[]) => {
      const box = create(...a);
      if (a[1] === 'reuse') {
        starts++;
        peak = Math.max(peak, ++inFlight);
        void box.ready.finally(() => inFlight--);
      }
      return box;
    };
    try {
      const runs = await Promise.all(Array.from({ length: burst }, () => big.run({ command: 'true', reuse, limits })));
      for (const r of runs) expect(r.exit).toMatchObject({ state: 'exited', exitCode: 0 });
      expect(peak).toBeLessThanOrEqual(MAX_STARTS);
      // Not one sandbox per job: jobs of the burst waited for sandboxes the earlier ones freed.
      expect(starts).toBeLessThan(burst);
    } finally {
      await big.close();
    }
  }, 60_000);

  it('runs a burst of short jobs in at most MAX_SHORT_BUSY sandboxes; a job behind long ones does not wait for them', async () => {
    const reuse = { jobs: 100, seconds: 600 };
    const limits = { inlineBytes: 40_000, artifactBytes: 1 << 20 };
    const big = await makeRig('gvisor', { warm: 0, capacity: 24 });
    try {
      const ids = await Promise.all(Array.from({ length: 24 }, () => big.run({ command: 'cat', args: ['/proc/sys/kernel/random/boot_id'], reuse, limits })));
      for (const r of ids) expect(r.exit).toMatchObject({ state: 'exited', exitCode: 0 });
      // (Before the bound, such a burst spread over 6-12 sandboxes here.)
      expect(new Set(ids.map((r) => r.exit.stdout)).size).toBeLessThanOrEqual(MAX_SHORT_BUSY);

      // Every sandbox busy with a job that runs for seconds: the next job starts its own sandbox
      // once those are no longer short, instead of waiting for one of them to end.
      const t0 = performance.now();
      const long = Array.from({ length: MAX_SHORT_BUSY + 1 }, () =>
        big.run({ command: 'sleep', args: ['6'], reuse, limits }).then(() => performance.now() - t0),
      );
      await sleep(SHORT_JOB_MS / 2);
      const quick = await big.run({ command: 'true', reuse, limits });
      const quickMs = performance.now() - t0;
      expect(quick.exit).toMatchObject({ state: 'exited', exitCode: 0 });
      const longMs = await Promise.all(long);
      expect(quickMs).toBeLessThan(Math.min(...longMs) - 2000);
    } finally {
      await big.close();
    }
  }, 90_000);

  it("runs a runtime whose run step names its program bare (typescript: tsc builds, `node` runs): the init finds it in the job's PATH", async (ctx) => {
    const rt = await runtimes();
    const missing = (['typescript'] as const).filter((r) => !rt.byRuntime.has(r));
    // `.ci/run` installs every runtime: under CI a missing one is a failure, elsewhere a skip that says so.
    if (missing.length && process.env.CI === 'true') throw new Error(`runtimes missing under CI: ${missing.join(', ')}`);
    if (missing.length) {
      console.warn(`typescript under reuse skipped: ${missing.join(', ')} not installed (allowed outside CI only)`);
      ctx.skip();
      return;
    }
    const reuse = { jobs: 10, seconds: 600 };
    const r = await rig.run({ mode: 'code', runtime: 'typescript', command: '', code: 'const n: number = 6 * 7;\nconsole.log(`ts ${n}`);\n', reuse });
    expect(r.exit).toMatchObject({ state: 'exited', exitCode: 0, stdout: 'ts 42\n', phase: 'run' });
  }, 90_000);

  it('recycles a sandbox after reuse.seconds', async () => {
    const reuse = { jobs: 100, seconds: 2 };
    const a = await sandboxOf(reuse);
    await sleep(2500);
    expect(await sandboxOf(reuse)).not.toBe(a);
  }, 60_000);

  it('a retiring clean sandbox ends by its own init (no runsc kill); one whose job timed out is killed', async () => {
    const own = await makeRig('gvisor', { warm: 0 });
    // Records the runsc commands the driver runs besides `runsc run` (the driver's own `runsc`, wrapped).
    const driver = own.driver as unknown as { runsc: (args: string[], timeoutMs?: number) => Promise<unknown> };
    const runsc = driver.runsc.bind(driver);
    const commands: string[][] = [];
    driver.runsc = (args, timeoutMs) => {
      commands.push(args);
      return runsc(args, timeoutMs);
    };
    const live = async () => ((await runsc(['list', '-quiet'])) as { stdout: string }).stdout.split('\n').filter(Boolean);
    const waitGone = async (before: string[]) => {
      for (let i = 0; i < 100 && (await live()).some((id) => before.includes(id)); i++) await sleep(50);
    };
    try {
      const reuse = { jobs: 2, seconds: 600 };
      await sandboxOf(reuse, {}, own);
      const first = await live();
      expect(first.length).toBeGreaterThan(0);
      await sandboxOf(reuse, {}, own); // its last job: it retires
      await waitGone(first);
      expect(await live()).not.toEqual(expect.arrayContaining(first));
      expect(commands.filter((c) => c[0] === 'kill' || c[0] === 'delete')).toEqual([]);
      // Not a sandbox that ran a job which did not end well: that one is killed.
      const t = await own.run({ command: 'sleep', args: ['30'], timeoutMs: 500, reuse });
      expect(t.exit.state).toBe('timed_out');
      await sleep(500);
      expect(commands.some((c) => c[0] === 'kill')).toBe(true);
    } finally {
      driver.runsc = runsc;
      await own.close();
    }
  }, 60_000);

  it('shares a sandbox only between jobs whose limits match', async () => {
    const reuse = { jobs: 100, seconds: 600 };
    const limits = { inlineBytes: 40_000, artifactBytes: 1 << 20 };
    const a = await sandboxOf(reuse, { limits: { ...limits, maxOpenFiles: 100 } });
    const b = await sandboxOf(reuse, { limits: { ...limits, maxOpenFiles: 101 } });
    expect(b).not.toBe(a);
    // The first one waited, parked, for a job like its own.
    expect(await sandboxOf(reuse, { limits: { ...limits, maxOpenFiles: 100 } })).toBe(a);
  }, 60_000);

  it('never reuses the sandbox of a job that timed out or was cancelled', async () => {
    const reuse = { jobs: 100, seconds: 600 };
    const a = await sandboxOf(reuse);
    const t = await rig.run({ command: 'sleep', args: ['30'], timeoutMs: 500, reuse });
    expect(t.exit.state).toBe('timed_out');
    const b = await sandboxOf(reuse);
    expect(b).not.toBe(a);
    const running = rig.runner.start(
      { ...(await import('../helpers.ts')).jobSpec({ jobId: 'reuse-cancel', command: 'sleep', args: ['30'], reuse }) },
      DISCARD_LIVE,
    );
    if (!running.accepted) throw new Error(running.error.message);
    await sleep(300);
    rig.runner.cancel('reuse-cancel');
    expect((await running.done).exit.state).toBe('cancelled');
    expect(await sandboxOf(reuse)).not.toBe(b);
  }, 60_000);

  it.runIf(process.env.CI === 'true' || existsSync('/usr/bin/cc'))('starts reused jobs with the compiled start where the host has a C compiler', () => {
    expect((rig.driver as GvisorDriver).jobStart).toBe('compiled');
  });

  startsLikeAFreshProcess(rig);
});

d('gvisor sandbox reuse on a host without a C compiler', () => {
  const rig = suiteRig('gvisor', { warm: 0, compiledStart: false });

  it('starts reused jobs with posix_spawn', () => {
    expect((rig.driver as GvisorDriver).jobStart).toBe('posix_spawn');
  });

  startsLikeAFreshProcess(rig);
});

/**
 * What every reused job starts with, whichever way the init starts it: the sandbox user's ids, its own session,
 * no capability, group, descriptor, blocked or ignored signal of the init's, its own limits; and the init out of reach.
 */
function startsLikeAFreshProcess(rig: Rig): void {
  it('starts each job as the sandbox user, in its own session, with no capability, no group, no fd or signal setting of the init, never as the init', async () => {
    const reuse = { jobs: 100, seconds: 600 };
    const { exit } = await rig.run({
      mode: 'shell',
      reuse,
      limits: { inlineBytes: 40_000, artifactBytes: 1 << 20, maxOpenFiles: 77 },
      command:
        'echo pid=$$ sid=$(cut -d" " -f6 /proc/$$/stat); grep -E "^(Uid|Gid|Groups|CapEff|CapPrm|CapBnd)" /proc/self/status; ulimit -Hn; ulimit -Sn; ' +
        // ls's own fds: 0-2 and the directory it reads (3); a default SIGPIPE ends `yes` quietly; each signal, neither
        // blocked nor ignored, ends sleep (gVisor's /proc shows no signal masks): the init's own Python ignores PIPE
        // and XFSZ, and blocks or ignores the rest. The init itself is out of the job's reach.
        'echo fds; ls /proc/self/fd; yes | head -c1 >/dev/null; for s in TERM HUP USR1 USR2 ALRM PIPE XFSZ 40; do sleep 5 & kill -$s $!; wait $!; echo "$s=$?"; done; ' +
        'kill -TERM 1 2>/dev/null; echo "init=$?"',
    });
    expect(exit.state).toBe('exited');
    const pid = /pid=(\d+) sid=(\d+)/.exec(exit.stdout);
    expect(pid && pid[1] !== '1' && pid[1] === pid[2], exit.stdout).toBe(true);
    expect(exit.stdout).toMatch(/^Uid:\s+65534\s+65534\s+65534\s+65534$/m);
    expect(exit.stdout).toMatch(/^Gid:\s+65534\s+65534\s+65534\s+65534$/m);
    for (const c of ['CapEff', 'CapPrm', 'CapBnd']) expect(exit.stdout).toMatch(new RegExp(`^${c}:\\s+0000000000000000$`, 'm'));
    expect(exit.stdout).toMatch(/^Groups:\s*$/m);
    expect(exit.stdout).toMatch(/^77\n77\nfds\n/m);
    // The init blocks or ignores nearly every signal and holds its channel on fds 0/1: none of that reaches the job.
    expect(exit.stdout).toMatch(/^fds\n0\n1\n2\n3\nTERM=143\nHUP=129\nUSR1=138\nUSR2=140\nALRM=142\nPIPE=141\nXFSZ=153\n40=168\ninit=1\n$/m);
    expect(exit.stderr).not.toMatch(/Broken pipe/i);
  }, 60_000);
}
