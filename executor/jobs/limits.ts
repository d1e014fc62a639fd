/**
 * A job's resource limits: every one set (the spec's values, the defaults for the rest), and
 * the rlimit part of them as the launcher's `ulimit` lines.
 */
import type { JobLimits } from '../../src/contracts/agent-protocol.ts';
import { DEFAULT_RESOURCE_LIMITS, type ResourceLimits } from '../../src/contracts/resource-limits.ts';

/** Every limit set: what the spec gives, the defaults for the rest. */
export function effectiveLimits(l: JobLimits): ResourceLimits {
  const d = DEFAULT_RESOURCE_LIMITS;
  return {
    memoryBytes: l.memoryBytes ?? d.memoryBytes,
    maxProcesses: l.maxProcesses ?? d.maxProcesses,
    maxOpenFiles: l.maxOpenFiles ?? d.maxOpenFiles,
    maxFileBytes: l.maxFileBytes ?? d.maxFileBytes,
    cpuSeconds: l.cpuSeconds ?? d.cpuSeconds,
    tmpBytes: l.tmpBytes ?? d.tmpBytes,
    diskWriteBytes: l.diskWriteBytes ?? d.diskWriteBytes,
  };
}

/**
 * The job's rlimits by name (soft = hard, so the job cannot raise them). RLIMIT_NPROC only where
 * it counts the job alone (inside gVisor, or a driver without a pids cgroup); elsewhere the job's
 * uid maps to a host uid with other processes.
 */
export interface JobRlimits {
  nofile: number;
  fsize: number;
  cpu: number;
  core: 0;
  nproc?: number;
}

export function jobRlimits(l: ResourceLimits, nproc: boolean): JobRlimits {
  const r: JobRlimits = { nofile: l.maxOpenFiles, fsize: l.maxFileBytes, cpu: l.cpuSeconds, core: 0 };
  if (nproc) r.nproc = l.maxProcesses;
  return r;
}

/**
 * The same rlimits as dash `ulimit` builtins (no exec: execs cost ~7 ms each under gVisor's
 * ptrace platform). Without -H/-S dash sets soft and hard together, so the job cannot raise
 * them. `-f` counts 512-byte blocks: rounded down, so the limit is never above the job's.
 */
export function ulimitCommands(r: JobRlimits): string[] {
  const out = [`ulimit -n ${r.nofile}`, `ulimit -f ${Math.floor(r.fsize / 512)}`, `ulimit -t ${r.cpu}`, 'ulimit -c 0'];
  if (r.nproc !== undefined) out.push(`ulimit -p ${r.nproc}`);
  return out;
}
