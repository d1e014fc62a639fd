/**
 * Start shells (executor/sandbox/start-shell.ts): when a bwrap or none job ends by itself, the
 * next job's shell is spawned at once — already in a pooled cgroup — and waits. These check that
 * the next job really starts in it, and that a job started that way gets exactly what a job
 * started cold gets: its env, cwd, rlimits, cgroup and stdio, nothing of the shell's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { cgroupSupport } from '../../executor/sandbox/cgroup.ts';
import { makeRig, requireTool, type Rig } from './helpers.ts';

const limits = (memoryBytes: number) => ({ inlineBytes: 100_000, artifactBytes: 100_000, memoryBytes, maxProcesses: 64, maxOpenFiles: 99 });
const MiB = 1 << 20;
const cgroups = cgroupSupport();

/**
 * Pids of the starts of `stateDir`'s agent: none's shell (its argv names its script there), or the
 * bwrap a bwrap start became (its argv binds a job dir there and holds the waiting shell's text).
 */
function waitingShells(stateDir: string): number[] {
  const found = readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      const argv = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
      if (argv[0] === '/bin/sh') return argv[3] === 'gatehouse-start' && argv[4]?.startsWith(stateDir);
      return argv[0] === '/usr/bin/bwrap' && argv.some((a) => a.startsWith(`${stateDir}/jobdirs/`)) && argv.some((a) => a.includes('read -r gh_go'));
    } catch {
      return false;
    }
  });
  // bwrap forks (its pid 1 inside has the same argv): only the outermost, the agent's child.
  const parentOf = (p: string) => { try { return /^\d+ \(.*\) \S (\d+)/.exec(readFileSync(`/proc/${p}/stat`, 'utf8'))![1]; } catch { return ''; } };
  return found.filter((p) => !found.includes(parentOf(p))).map(Number);
}

/** Runs `job`, then returns the start shell that began waiting after it. */
async function shellAfter(rig: Rig, job: () => Promise<unknown>): Promise<number> {
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
    let rig: Rig;
    beforeAll(async () => { rig = await makeRig(kind); }, 60_000);
    afterAll(async () => { await rig?.close(); });

    it('the next job with the same limits starts in the shell that waited, and sees exactly what a cold-started job sees', async () => {
      const l = limits(112 * MiB);
      // fds, rlimits, cwd and env of the job's own shell (fds inherited from outside the agent show in both).
      const probe = { mode: 'shell' as const, command: 'sleep 1; ls /proc/$$/fd; ulimit -n; ulimit -Hn; pwd; env | sort', env: { FOO: 'bar baz' }, limits: l };
      let cold!: Awaited<ReturnType<Rig['run']>>;
      const pid = await shellAfter(rig, async () => { cold = await rig.run(probe); });
      expect(cold.exit).toMatchObject({ state: 'exited', exitCode: 0 });
      expect(cold.exit.stdout).toMatch(/^0\n1\n2\n(?:(?:[5-9]|\d\d+)\n)*99\n99\n/);

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

    it.runIf(cgroups !== null)('a job with other limits does not take it; a waiting shell killed from outside is not used', async () => {
      const l = limits(116 * MiB);
      const pid = await shellAfter(rig, () => rig.run({ command: 'true', limits: l }));
      // A bwrap job cannot see the waiting start (nor the agent's state dir: not in its view). The
      // pattern is the waiting start's own argument (none: its script; bwrap: its job dir) with its
      // last character as a class, so the job's own command line does not match it.
      const own = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').find((a) => a.startsWith(rig.stateDir))!;
      const pattern = `${own.slice(0, -1)}[${own.slice(-1)}]`;
      const other = await rig.run({ mode: 'shell', command: `cat /proc/self/cgroup; grep -l '${pattern}' /proc/[0-9]*/cmdline; ls ${rig.stateDir}/starts`, limits: limits(120 * MiB) });
      expect(waitingShells(rig.stateDir)).toContain(pid);
      if (kind === 'bwrap') {
        expect(other.exit.stdout).not.toContain('cmdline');
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
    }, 60_000);
  });
}
