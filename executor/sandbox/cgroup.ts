/**
 * Per-job control groups for the drivers that run jobs as host processes (bwrap, none): a
 * memory limit the kernel enforces with its OOM killer, a process limit (pids), a list of
 * every process of the job (setsid and double-fork escapees included) to kill and to add up
 * disk writes over. Needs a writable cgroup hierarchy (the agent runs as root); cgroup v1
 * (memory + pids controllers) and v2 (memory + pids enabled at the root) both work.
 * gVisor does not need this: runsc applies the memory limit itself and counts processes inside.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
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

type CgroupLimits = { memoryBytes: number; maxProcesses: number };

/**
 * The part of a job cgroup's name that says which agent made it: a hash of the agent's state
 * dir, so the same agent started again (after a crash or SIGKILL) recognises its own leftovers
 * and never another live agent's. Job cgroups are named `<kind>-<owner>-<n>-<random>`.
 */
export function cgroupOwner(stateDir: string): string {
  return createHash('sha256').update(stateDir).digest('hex').slice(0, 8);
}

/**
 * Removes the job cgroups an earlier run of this agent (same state dir) left behind when it was
 * killed without cleaning up: every process still in one is killed first (a job that outlived
 * its agent), then the cgroup goes. Returns how many were removed. Two agents never share a
 * state dir (each wipes the other's job dirs at start), so nothing here belongs to a live agent.
 */
export async function sweepStaleCgroups(version: CgroupVersion, owner: string): Promise<number> {
  const parents = version === 'v2' ? [join(V2, PARENT)] : [join(V1.memory, PARENT), join(V1.pids, PARENT)];
  const mine = new RegExp(`^[a-z]+-${owner}-`);
  const ids = new Set<string>();
  for (const p of parents) {
    try {
      for (const e of readdirSync(p, { withFileTypes: true })) if (e.isDirectory() && mine.test(e.name)) ids.add(e.name);
    } catch {
      /* hierarchy not there */
    }
  }
  await Promise.all([...ids].map((id) => JobCgroup.existing(version, id).remove()));
  return ids.size;
}

export class JobCgroup {
  private readonly dirs: string[];
  private readonly version: CgroupVersion;
  private readonly limits: CgroupLimits;
  /** The OOM kill count when the current job started (the kernel's counter never goes back). */
  private oomBase = 0;

  constructor(version: CgroupVersion, id: string, limits: CgroupLimits, create = true) {
    this.version = version;
    this.limits = { memoryBytes: limits.memoryBytes, maxProcesses: limits.maxProcesses };
    this.dirs = version === 'v2' ? [join(V2, PARENT, id)] : [join(V1.memory, PARENT, id), join(V1.pids, PARENT, id)];
    if (!create) return;
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

  /** A cgroup that already exists (a leftover to remove): nothing is created or set. */
  static existing(version: CgroupVersion, id: string): JobCgroup {
    return new JobCgroup(version, id, { memoryBytes: 0, maxProcesses: 0 }, false);
  }

  /** The `cgroup.procs` files a process writes its pid into to join. */
  procsFiles(): string[] {
    return this.dirs.map((d) => join(d, 'cgroup.procs'));
  }

  /** The files a process must write its pid into to join every hierarchy of the job (one in v2). */
  joinFiles(): string[] {
    return this.procsFiles();
  }

  /** Every process of the job now. */
  pids(): number[] {
    try {
      return readFileSync(this.procsFiles()[this.dirs.length - 1], 'utf8')
        .split('\n')
        .filter(Boolean)
        .map(Number);
    } catch {
      return [];
    }
  }

  /** Whether the kernel's OOM killer killed a process of the current job (the memory limit was hit). */
  oomKilled(): boolean {
    return this.oomKills() > this.oomBase;
  }

  private oomKills(): number {
    try {
      const text =
        this.version === 'v2' ? readFileSync(join(this.dirs[0], 'memory.events'), 'utf8') : readFileSync(join(this.dirs[0], 'memory.oom_control'), 'utf8');
      const m = /^oom_kill (\d+)$/m.exec(text);
      return m ? Number(m[1]) : 0;
    } catch {
      return 0;
    }
  }

  /** Whether this cgroup enforces exactly `l` (a pooled one is only handed to a job with the same limits). */
  fits(l: CgroupLimits): boolean {
    return l.memoryBytes === this.limits.memoryBytes && l.maxProcesses === this.limits.maxProcesses;
  }

  /** Whether no process is in it, in any hierarchy. */
  isEmpty(): boolean {
    for (const f of this.procsFiles()) {
      try {
        if (readFileSync(f, 'utf8').trim() !== '') return false;
      } catch {
        return false; // unreadable: never hand it on
      }
    }
    return true;
  }

  /** A pooled cgroup starts another job: its OOM kills are counted from now. */
  beginJob(): void {
    this.oomBase = this.oomKills();
  }

  killAll(): void {
    for (const pid of this.pids()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }

  /** Kills what is left and removes the cgroup (retries while the kernel still reaps). */
  async remove(): Promise<void> {
    for (let i = 0; i < 50; i++) {
      this.killAll();
      let left = 0;
      for (const d of this.dirs) {
        try {
          await rmdir(d);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') left++;
        }
      }
      if (!left) return;
      await delay(Math.min(20 * (i + 1), 200));
    }
  }
}

/**
 * Empty job cgroups kept for the next job with the same limits: creating and removing a
 * memory + pids cgroup per job costs the agent more CPU than the job `true` itself. A cgroup
 * goes back to the pool only when its job ended by itself (never one the agent or the watchdog
 * killed: a late kill command must not find the next job in it) and no process is left in it,
 * so nothing of one job can be in another's cgroup. The limits are the same by construction
 * (pooled by limits), and OOM kills are counted per job. Memory the kernel still charges to
 * the cgroup (page cache of the previous job's files) is reclaimable and only ever makes the
 * next job's limit tighter, never looser.
 */
export class CgroupPool {
  private readonly version: CgroupVersion;
  private readonly max: number;
  private readonly free: JobCgroup[] = [];

  constructor(version: CgroupVersion, max = 16) {
    this.version = version;
    this.max = max;
  }

  /** A pooled cgroup with exactly these limits, or a new one named `id`. */
  take(id: string, limits: CgroupLimits): JobCgroup {
    const i = this.free.findIndex((c) => c.fits(limits));
    if (i < 0) return new JobCgroup(this.version, id, limits);
    const cg = this.free.splice(i, 1)[0];
    cg.beginJob();
    return cg;
  }

  /** Back from a job: pooled when `clean` (its job was never killed) and empty, else removed. */
  async give(cg: JobCgroup, clean: boolean): Promise<void> {
    if (clean && this.free.length < this.max && cg.isEmpty()) {
      this.free.push(cg);
      return;
    }
    await cg.remove();
  }

  /** How many cgroups wait in the pool (tests). */
  size(): number {
    return this.free.length;
  }

  async close(): Promise<void> {
    await Promise.all(this.free.splice(0).map((c) => c.remove()));
  }
}

function trySet(file: string, value: string): void {
  try {
    writeFileSync(file, value);
  } catch {
    /* not offered by this kernel (no swap accounting) */
  }
}

/**
 * The watchdog's kill command for a job run as a host process group, optionally in a cgroup:
 * the whole group, then every process the cgroup still holds (one that left the group by setsid).
 */
export function groupKillArgv(pgid: number | undefined, cgroup: JobCgroup | null | undefined): string[] | null {
  if (!pgid) return null;
  return ['/bin/sh', '-c', 'kill -KILL -- -"$1"; [ -z "$2" ] || kill -KILL $(cat "$2"); exit 0', 'gatehouse-kill', String(pgid), cgroup?.procsFiles()[0] ?? ''];
}
