/**
 * How a host-process job starts (sandbox `none`, and bubblewrap's cgroup): one shell joins the
 * job's cgroup, sets its rlimits with `ulimit` and execs the job, and job cgroups are pooled
 * between jobs with the same limits. What must hold whatever the job's env says, and what a
 * pooled cgroup must never carry from one job to the next.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { shippedFile } from '../../../executor/shipped-files.ts';
import { SANDBOX_PATH } from '../../../executor/sandbox/types.ts';
import { cgroupSupport } from '../../../executor/sandbox/cgroup.ts';
import { requireTool, suiteRig, toolWorks } from '../helpers.ts';

const limits = (memoryBytes: number) => ({ inlineBytes: 100_000, artifactBytes: 100_000, memoryBytes, maxProcesses: 64 });
const MiB = 1 << 20;

/** The job's cgroup path in the memory and pids hierarchies (cgroup v1) or the one v2 path. */
function cgroupOf(procSelfCgroup: string): string {
  const lines = procSelfCgroup.trim().split('\n');
  const v2 = lines.find((l) => l.startsWith('0::'));
  const mem = lines.find((l) => /:memory:/.test(l));
  const pids = lines.find((l) => /:pids:/.test(l));
  if (mem && pids) {
    const m = mem.split(':')[2];
    expect(pids.split(':')[2], 'memory and pids cgroups of the job').toBe(m);
    return m;
  }
  return v2!.slice(3);
}

function memoryLimitOf(path: string): number {
  const v1 = `/sys/fs/cgroup/memory${path}/memory.limit_in_bytes`;
  try {
    return Number(readFileSync(v1, 'utf8'));
  } catch {
    return Number(readFileSync(`/sys/fs/cgroup${path}/memory.max`, 'utf8'));
  }
}

const cgroups = cgroupSupport();
if (!cgroups && process.env.CI === 'true') throw new Error('cgroups are required under CI=true (the agent runs as root there)');
if (!cgroups) console.warn('skipping the cgroup checks: this process cannot create cgroups (not root?); allowed outside CI only');

describe('none driver: the start shell', () => {
  const rig = suiteRig('none');

  it("gives the job exactly its env: no PWD of the shell's, and the variables the shell manages as the job gave them", async () => {
    const plain = await rig.run({ command: 'env', env: { FOO: 'bar baz' } });
    expect(plain.exit).toMatchObject({ state: 'exited', exitCode: 0 });
    expect(plain.exit.stdout.trim().split('\n').sort()).toEqual(['FOO=bar baz', 'HOME=/tmp', 'PATH=/usr/local/bin:/usr/bin:/bin', 'TMPDIR=/tmp']);
    // dash resets IFS and OPTIND, sets PPID and PWD, and will not even start with OPTIND=x.
    const managed = { IFS: '0123456789/', OPTIND: 'not a number', PPID: 'given', PWD: "/given by the 'caller'" };
    const r = await rig.run({ command: 'env', env: { ...managed, FOO: 'x' } });
    expect(r.exit).toMatchObject({ state: 'exited', exitCode: 0 });
    expect(r.exit.stdout.trim().split('\n').sort()).toEqual([
      'FOO=x',
      'HOME=/tmp',
      'IFS=0123456789/',
      'OPTIND=not a number',
      'PATH=/usr/local/bin:/usr/bin:/bin',
      'PPID=given',
      "PWD=/given by the 'caller'",
      'TMPDIR=/tmp',
    ]);
  });

  it('sets every rlimit soft = hard before the job runs, and the job cannot raise them', async () => {
    const { exit } = await rig.run({
      mode: 'shell',
      command:
        'ulimit -n; ulimit -Hn; ulimit -f; ulimit -Hf; ulimit -t; ulimit -Ht; ulimit -c; ulimit -Hc; ulimit -f 100 2>/dev/null && echo raised || echo refused',
      limits: { inlineBytes: 1000, artifactBytes: 1000, maxOpenFiles: 77, maxFileBytes: 4096, cpuSeconds: 9 },
    });
    expect(exit.stdout).toBe('77\n77\n8\n8\n9\n9\n0\n0\nrefused\n');
  });

  it.runIf(cgroups !== null)("starts the job inside its cgroup, which holds the job's memory limit", async () => {
    const { exit } = await rig.run({ command: 'cat', args: ['/proc/self/cgroup'], limits: limits(96 * MiB) });
    const path = cgroupOf(exit.stdout);
    expect(path).toMatch(/^\/gatehouse\/nb-/);
    expect(memoryLimitOf(path)).toBe(96 * MiB);
  });
});

describe.runIf(cgroups !== null)('job cgroups pooled between jobs', () => {
  const rig = suiteRig('none');
  const cgroupOfJob = async (l: ReturnType<typeof limits>, extra = '') => {
    const { exit } = await rig.run({ mode: 'shell', command: `cat /proc/self/cgroup${extra}`, limits: l, timeoutMs: 2000 });
    return {
      path: cgroupOf(
        exit.stdout
          .split('\n')
          .filter((x) => x.includes(':'))
          .join('\n'),
      ),
      exit,
    };
  };
  // Pooled cgroups are handed back in the background once a job's sandbox is torn down.
  const settle = () => rig.driver.idle().then(() => new Promise((r) => setTimeout(r, 300)));

  it("hands a clean job's empty cgroup to the next job with the same limits, never to one with other limits", async () => {
    const a = await cgroupOfJob(limits(128 * MiB));
    await settle();
    const b = await cgroupOfJob(limits(128 * MiB));
    expect(b.path).toBe(a.path);
    await settle();
    const c = await cgroupOfJob(limits(160 * MiB));
    expect(c.path).not.toBe(b.path);
    expect(memoryLimitOf(c.path)).toBe(160 * MiB);
  });

  it('never hands on a cgroup a process of the job outlived it in; that process dies', async () => {
    const a = await cgroupOfJob(limits(130 * MiB), '; sleep 60 </dev/null >/dev/null 2>&1 & echo "pid:$!"');
    const pid = Number(/pid:(\d+)/.exec(a.exit.stdout)![1]);
    await settle();
    const b = await cgroupOfJob(limits(130 * MiB));
    expect(b.path).not.toBe(a.path);
    let alive = true;
    for (let i = 0; i < 100 && alive; i++) {
      try {
        process.kill(pid, 0);
        await new Promise((r) => setTimeout(r, 100));
      } catch {
        alive = false;
      }
    }
    expect(alive, 'the leftover process of the first job').toBe(false);
  });

  it('never hands on the cgroup of a job that was killed (timeout)', async () => {
    const a = await cgroupOfJob(limits(132 * MiB), '; sleep 30');
    expect(a.exit.state).toBe('timed_out');
    await settle();
    const b = await cgroupOfJob(limits(132 * MiB));
    expect(b.path).not.toBe(a.path);
  });

  it.runIf(toolWorks('python3'))('counts out-of-memory kills per job: the next job in the same cgroup is not reported out of memory', async () => {
    const l = limits(64 * MiB);
    const oom = await rig.run({
      command: 'python3',
      args: ['-c', 'import sys; sys.stdout.write(open("/proc/self/cgroup").read()); sys.stdout.flush(); b = b"x" * (400 << 20); print("ALLOCATED")'],
      limits: l,
      timeoutMs: 20_000,
    });
    expect(oom.exit.stdout).not.toContain('ALLOCATED');
    expect(oom.exit).toMatchObject({ state: 'signaled', signal: 'SIGKILL', error: { code: 'memory_limit' } });
    await settle();
    const next = await rig.run({ mode: 'shell', command: 'cat /proc/self/cgroup; kill -KILL $$', limits: l });
    expect(cgroupOf(next.exit.stdout), 'the same (pooled) cgroup').toBe(cgroupOf(oom.exit.stdout));
    expect(next.exit).toMatchObject({ state: 'signaled', signal: 'SIGKILL' });
    expect(next.exit.error).toBeUndefined();
  });
});

// The same rule where the launcher sets the env with shell builtins (gVisor single-use) and
// where the reuse init starts the job: the variables dash manages arrive as the job gave them.
for (const reuse of [undefined, { jobs: 10, seconds: 60 }]) {
  describe.runIf(requireTool('gvisor'))(`gvisor driver${reuse ? ' with sandbox reuse' : ''}: the job's env`, () => {
    const rig = suiteRig('gvisor', { warm: 1, reuse });

    it('passes IFS, OPTIND, PPID and PWD through exactly as given', async () => {
      const managed = { IFS: '0123456789/', OPTIND: 'not a number', PPID: 'given', PWD: "/given by the 'caller'" };
      const r = await rig.run({ command: 'env', env: { ...managed, FOO: 'x' } });
      expect(r.exit).toMatchObject({ state: 'exited', exitCode: 0 });
      expect(r.exit.stdout.trim().split('\n').sort()).toEqual([
        'FOO=x',
        'HOME=/tmp',
        'IFS=0123456789/',
        'OPTIND=not a number',
        'PATH=/usr/local/bin:/usr/bin:/bin',
        'PPID=given',
        "PWD=/given by the 'caller'",
        'TMPDIR=/tmp',
      ]);
    }, 60_000);
  });
}

describe.runIf(existsSync('/usr/bin/python3'))('reuse init: where it looks for a bare command', () => {
  it("in the job's own PATH, in execvp's order (an empty entry is the cwd), a default PATH when the job has none, a path as given", () => {
    // The init's own code without its main loop (the agent resolves argv mode's command to a path;
    // a runtime's build and run steps may name theirs bare), with the default PATH the agent gives it.
    const prog = `import importlib.util, sys
spec = importlib.util.spec_from_file_location('reuse_init', sys.argv[1])
init = importlib.util.module_from_spec(spec)
spec.loader.exec_module(init)
init.DEFAULT_PATH = sys.argv[2]
print(init.candidates('cc', {'PATH': '/opt/a::/usr/bin'}))
print(init.candidates('cc', {}))
print(init.candidates('./bin/cc', {'PATH': '/opt/a'}))
`;
    const out = execFileSync('/usr/bin/python3', ['-I', '-S', '-B', '-c', prog, shippedFile('reuseInit'), SANDBOX_PATH], { encoding: 'utf8' }).split('\n');
    expect(out.slice(0, 3)).toEqual(["['/opt/a/cc', './cc', '/usr/bin/cc']", "['/usr/local/bin/cc', '/usr/bin/cc', '/bin/cc']", "['./bin/cc']"]);
  });
});
