/**
 * Start shells (executor/sandbox/start-shell.ts): when a bwrap or none job ends by itself, the
 * next job's shell is spawned at once — already in a pooled cgroup — and waits. These check that
 * the next job really starts in it, and that a job started that way gets exactly what a job
 * started cold gets: its env, cwd, rlimits, cgroup and stdio, nothing of the shell's.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { cgroupSupport } from '../../../executor/sandbox/cgroup.ts';
import { DEFAULT_RESOURCE_LIMITS } from '../../../src/contracts/resource-limits.ts';
import { requireTool, suiteRig, type Rig } from '../helpers.ts';

const limits = (memoryBytes: number) => ({ inlineBytes: 100_000, artifactBytes: 100_000, memoryBytes, maxProcesses: 64, maxOpenFiles: 99 });
const MiB = 1 << 20;
const cgroups = cgroupSupport();

const parentOf = (p: string) => {
  try {
    return Number(/^\d+ \(.*\) \S (\d+)/.exec(readFileSync(`/proc/${p}/stat`, 'utf8'))![1]);
  } catch {
    return 0;
  }
};

/**
 * Pids of the starts of `stateDir`'s agent (the rig runs in this process), whichever program each
 * is at the moment: the bash it begins in (its argv names its script, under the state dir), none's
 * shell (the same), or the bwrap a bwrap start became (`bwrap --args 5 -- /bin/sh …`: its options
 * came on a pipe, and this file runs one bwrap rig at a time).
 */
function waitingShells(stateDir: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p) && parentOf(p) === process.pid)
    .filter((p) => {
      try {
        const argv = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
        if (argv[0] === '/bin/sh' || argv[0] === '/bin/bash') return argv.at(-3) === 'gatehouse-start' && argv.at(-2)!.startsWith(stateDir);
        return argv[0] === '/usr/bin/bwrap' && argv[1] === '--args' && argv.some((a) => a.includes('read -r gh_go'));
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** The host job dir a waiting bwrap start mounted at /job (from its pid 1's mounts), once it has. */
async function jobDirOf(bwrapPid: number): Promise<string> {
  for (let i = 0; i < 500; i++) {
    const inside = readdirSync('/proc').find((p) => /^\d+$/.test(p) && parentOf(p) === bwrapPid);
    try {
      const dir = inside && / (\S+) \/job /.exec(readFileSync(`/proc/${inside}/mountinfo`, 'utf8'))?.[1];
      if (dir) return dir;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`bwrap ${bwrapPid} never mounted a job dir`);
}

/** Runs `job`, then returns the start shell that began waiting after it. */
async function shellAfter(rig: Rig, job: () => Promise<unknown>): Promise<number> {
  // An earlier job's teardown (which makes the start for the job after it) may still be running.
  await rig.driver.idle();
  const before = new Set(waitingShells(rig.stateDir));
  await job();
  // Up to 10 s: the start is spawned after the job's teardown, which a loaded machine delays.
  for (let i = 0; i < 500; i++) {
    const s = waitingShells(rig.stateDir).filter((p) => !before.has(p));
    if (s.length === 1) return s[0];
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no start shell began waiting after the job (before: ${[...before]}, now: ${waitingShells(rig.stateDir)})`);
}

const envOf = (stdout: string) => stdout.trim().split('\n').sort();

for (const kind of ['none', 'bwrap'] as const) {
  const d = kind === 'bwrap' && !requireTool('bwrap') ? describe.skip : describe;
  d(`${kind} driver: start shells`, () => {
    const rig = suiteRig(kind);

    it('the next job with the same limits starts in the shell that waited, and sees exactly what a cold-started job sees', async () => {
      const l = limits(112 * MiB);
      // fds, rlimits, cwd and env of the job's own shell (whatever this process inherited stays behind).
      const probe = { mode: 'shell' as const, command: 'sleep 1; ls /proc/$$/fd; ulimit -n; ulimit -Hn; pwd; env | sort', env: { FOO: 'bar baz' }, limits: l };
      let cold!: Awaited<ReturnType<Rig['run']>>;
      const pid = await shellAfter(rig, async () => {
        cold = await rig.run(probe);
      });
      expect(cold.exit).toMatchObject({ state: 'exited', exitCode: 0 });
      expect(cold.exit.stdout).toMatch(/^0\n1\n2\n99\n99\n/);

      // While it runs, the waiting shell's process is the job (none) or bwrap.
      const running = rig.run(probe);
      await new Promise((r) => setTimeout(r, 500));
      expect(readlinkSync(`/proc/${pid}/exe`)).toBe(kind === 'bwrap' ? '/usr/bin/bwrap' : '/usr/bin/dash');
      // ... in the job's cgroup (joined while the shell waited), with the job's memory limit.
      if (cgroups === 'v1') {
        const path = /:memory:(.*)/.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))![1];
        expect(path).toMatch(kind === 'bwrap' ? /^\/gatehouse\/bw-/ : /^\/gatehouse\/nb-/);
        expect(Number(readFileSync(`/sys/fs/cgroup/memory${path}/memory.limit_in_bytes`, 'utf8'))).toBe(112 * MiB);
      }
      const warm = await running;
      expect(warm.exit).toMatchObject({ state: 'exited', exitCode: 0 });
      // No control fd, no status pipe, no script file: the same as the cold start, byte for byte.
      expect(warm.exit.stdout).toBe(cold.exit.stdout);
      expect(warm.exit.stdout).toContain(`\n${kind === 'bwrap' ? '/workspace' : rig.root}\n`);

      // The job's env as a job started cold gets it (a key no shell waits for), and for none exactly its own.
      const coldEnv = await rig.run({ command: 'env', env: { FOO: 'bar baz' }, limits: limits(124 * MiB) });
      const warmEnv = await rig.run({ command: 'env', env: { FOO: 'bar baz' }, limits: l });
      expect(envOf(warmEnv.exit.stdout)).toEqual(envOf(coldEnv.exit.stdout));
      expect(envOf(warmEnv.exit.stdout)).toEqual(['FOO=bar baz', 'HOME=/tmp', 'PATH=/usr/local/bin:/usr/bin:/bin', 'TMPDIR=/tmp']);
    }, 60_000);

    it('idle() resolves once a sandbox torn down in the background is gone (its job dir too)', async () => {
      const sb = await rig.driver.acquire('idle-check', DEFAULT_RESOURCE_LIMITS);
      sb.prepareJobDir?.();
      expect(existsSync(sb.jobDirHost)).toBe(true);
      void sb.destroy();
      await rig.driver.idle();
      expect(existsSync(sb.jobDirHost)).toBe(false);
    });

    it.runIf(cgroups !== null)(
      'a job with other limits does not take it; a waiting shell killed from outside is not used',
      async () => {
        const l = limits(116 * MiB);
        const pid = await shellAfter(rig, () => rig.run({ command: 'true', limits: l }));
        // A bwrap job cannot see the waiting start (nor the agent's state dir: not in its view). The
        // pattern is what names the waiting start (none: its script, in its argv; bwrap: its job dir,
        // in its mounts) with its last character as a class, so the job's own command line does not match it.
        const own =
          kind === 'bwrap'
            ? await jobDirOf(pid)
            : readFileSync(`/proc/${pid}/cmdline`, 'utf8')
                .split('\0')
                .find((a) => a.startsWith(rig.stateDir))!;
        const pattern = `${own.slice(0, -1)}[${own.slice(-1)}]`;
        const other = await rig.run({
          mode: 'shell',
          command: `cat /proc/self/cgroup; grep -l '${pattern}' /proc/[0-9]*/cmdline /proc/[0-9]*/mountinfo; ls ${rig.stateDir}/starts`,
          limits: limits(120 * MiB),
        });
        expect(waitingShells(rig.stateDir)).toContain(pid);
        if (kind === 'bwrap') {
          expect(other.exit.stdout).not.toMatch(/cmdline|mountinfo/);
          expect(other.exit.stderr).toMatch(/No such file or directory/);
        } else {
          expect(other.exit.stdout).toContain(`/proc/${pid}/cmdline`);
        }
        if (kind === 'none') {
          // (bwrap's jobs see their cgroup namespace's root, not the host path.)
          const path = /:memory:(.*)/.exec(other.exit.stdout)![1];
          expect(Number(readFileSync(`/sys/fs/cgroup/memory${path}/memory.limit_in_bytes`, 'utf8'))).toBe(120 * MiB);
        }

        process.kill(pid, 'SIGKILL');
        await new Promise((r) => setTimeout(r, 100));
        const after = await rig.run({ mode: 'shell', command: 'echo ran', limits: l });
        expect(after.exit).toMatchObject({ state: 'exited', exitCode: 0, stdout: 'ran\n' });
      },
      60_000,
    );
  });
}
