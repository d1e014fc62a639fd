/**
 * Per-job control groups for the drivers that run jobs as host processes (bwrap, none): a
 * memory limit the kernel enforces with its OOM killer, a process limit (pids), a list of
 * every process of the job (setsid and double-fork escapees included) to kill and to add up
 * disk writes over. Needs a writable cgroup hierarchy (the agent runs as root); cgroup v1
 * (memory + pids controllers) and v2 (memory + pids enabled at the root) both work.
 * gVisor does not need this: runsc applies the memory limit itself and counts processes inside.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { delay } from './exec-util.ts';

const V1 = { memory: '/sys/fs/cgroup/memory', pids: '/sys/fs/cgroup/pids' };
const V2 = '/sys/fs/cgroup';
/** Our subtree in each hierarchy. */
const PARENT = 'gatehouse';

export type CgroupVersion = 'v1' | 'v2';

/** Which hierarchy this machine offers us, or null (not root, read-only, controllers missing). */
export function cgroupSupport(): CgroupVersion | null {
  try {
    if (existsSync(join(V2, 'cgroup.controllers')) && !existsSync(V1.memory)) {
      const ctl = readFileSync(join(V2, 'cgroup.controllers'), 'utf8');
      if (!/\bmemory\b/.test(ctl) || !/\bpids\b/.test(ctl)) return null;
      const parent = join(V2, PARENT);
      mkdirSync(parent, { recursive: true });
      // Children of our subtree get the controllers (a cgroup with children holds no processes itself).
      writeFileSync(join(parent, 'cgroup.subtree_control'), '+memory +pids');
      return 'v2';
    }
    if (existsSync(join(V1.memory, 'memory.limit_in_bytes')) && existsSync(join(V1.pids, 'cgroup.procs'))) {
      mkdirSync(join(V1.memory, PARENT), { recursive: true });
      mkdirSync(join(V1.pids, PARENT), { recursive: true });
      return 'v1';
    }
  } catch {
    return null; // not allowed to create cgroups here
  }
  return null;
}

export class JobCgroup {
  private readonly dirs: string[];
  private readonly version: CgroupVersion;

  constructor(version: CgroupVersion, id: string, limits: { memoryBytes: number; maxProcesses: number }) {
    this.version = version;
    this.dirs = version === 'v2' ? [join(V2, PARENT, id)] : [join(V1.memory, PARENT, id), join(V1.pids, PARENT, id)];
    for (const d of this.dirs) mkdirSync(d, { recursive: true });
    if (version === 'v2') {
      const d = this.dirs[0];
      writeFileSync(join(d, 'memory.max'), String(limits.memoryBytes));
      trySet(join(d, 'memory.swap.max'), '0');
      writeFileSync(join(d, 'pids.max'), String(limits.maxProcesses));
    } else {
      writeFileSync(join(this.dirs[0], 'memory.limit_in_bytes'), String(limits.memoryBytes));
      trySet(join(this.dirs[0], 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
      writeFileSync(join(this.dirs[1], 'pids.max'), String(limits.maxProcesses));
    }
  }

  /** The `cgroup.procs` files a process writes its pid into to join. */
  procsFiles(): string[] {
    return this.dirs.map((d) => join(d, 'cgroup.procs'));
  }

  /**
   * argv that joins the cgroup and then execs `argv`: the shell writes its own pid before
   * exec, so every descendant starts inside (no window where a fork escapes the limit).
   */
  wrap(argv: string[]): string[] {
    const files = this.procsFiles();
    const script = 'for f in "$1" "$2"; do echo $$ > "$f" || exit 125; done; shift 2; exec "$@"';
    return ['/bin/sh', '-c', script, 'gatehouse-cgroup', files[0], files[files.length - 1], ...argv];
  }

  /** Every process of the job now. */
  pids(): number[] {
    try {
      return readFileSync(this.procsFiles()[this.dirs.length - 1], 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  }

  /** Whether the kernel's OOM killer killed a process of the job (the memory limit was hit). */
  oomKilled(): boolean {
    try {
      const text = this.version === 'v2'
        ? readFileSync(join(this.dirs[0], 'memory.events'), 'utf8')
        : readFileSync(join(this.dirs[0], 'memory.oom_control'), 'utf8');
      const m = /^oom_kill (\d+)$/m.exec(text);
      return m !== null && Number(m[1]) > 0;
    } catch {
      return false;
    }
  }

  killAll(): void {
    for (const pid of this.pids()) {
      try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    }
  }

  /** Kills what is left and removes the cgroup (retries while the kernel still reaps). */
  async remove(): Promise<void> {
    for (let i = 0; i < 50; i++) {
      this.killAll();
      let left = 0;
      for (const d of this.dirs) {
        try { await rmdir(d); } catch (e) { if ((e as NodeJS.ErrnoException).code !== 'ENOENT') left++; }
      }
      if (!left) return;
      await delay(Math.min(20 * (i + 1), 200));
    }
  }
}

function trySet(file: string, value: string): void {
  try { writeFileSync(file, value); } catch { /* not offered by this kernel (no swap accounting) */ }
}

/**
 * The watchdog's kill command for a job run as a host process group, optionally in a cgroup:
 * the whole group, then every process the cgroup still holds (one that left the group by setsid).
 */
export function groupKillArgv(pgid: number | undefined, cgroup: JobCgroup | null | undefined): string[] | null {
  if (!pgid) return null;
  return ['/bin/sh', '-c', 'kill -KILL -- -"$1"; [ -z "$2" ] || kill -KILL $(cat "$2"); exit 0', 'gatehouse-kill', String(pgid), cgroup?.procsFiles()[0] ?? ''];
}
