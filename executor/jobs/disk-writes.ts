/**
 * The disk-write limit: what a sandbox's host processes wrote to disk, added up while its job runs
 * (/proc/PID/io write_bytes, which counts page-cache writes to files, not pipes or memory). Past
 * the job's limit the sandbox is killed and the runner reports `disk_write_limit`.
 */
import { readFileSync } from 'node:fs';
import type { Sandbox } from '../sandbox/types.ts';

export interface DiskWatch {
  /** The job wrote more than its limit (its sandbox was killed). */
  exceeded(): boolean;
  /** The sandbox's memory limit was hit at some look (checked at every poll, and at the call). */
  memoryHit(): boolean;
  stop(): void;
}

/** Polls every `pollMs` (default 200) and kills the sandbox once its job wrote more than `limit` bytes. */
export function watchDiskWrites(sandbox: Sandbox, limit: number, pollMs = 200): DiskWatch {
  let exceeded = false;
  let memoryHit = false;
  // Processes that all started with the job wrote nothing before it: their sum starts at 0, and
  // the first look can wait a poll interval (a job shorter than that never costs a poll).
  const fresh = sandbox.hostPidsStartWithJob === true;
  let baseline: number | null = fresh ? 0 : null;
  const poll = () => {
    if (exceeded) return;
    memoryHit ||= sandbox.memoryLimitHit();
    const total = writtenBytes(sandbox.hostPids());
    baseline ??= total;
    if (total - baseline > limit) {
      exceeded = true;
      void sandbox.kill(0);
    }
  };
  if (!fresh) poll();
  const t = setInterval(poll, pollMs);
  return { exceeded: () => exceeded, memoryHit: () => memoryHit || sandbox.memoryLimitHit(), stop: () => clearInterval(t) };
}

/**
 * Sum of /proc/PID/io write_bytes over `pids`. Read synchronously: each read is tiny and never blocks
 * (procfs), and a sandbox's few host processes cost microseconds this way, where a promise-based read
 * per process (open, stat, read, close on libuv's thread pool) cost a reused sandbox's job ~0.5 ms of CPU.
 */
function writtenBytes(pids: number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      const m = /^write_bytes: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
      if (m) total += Number(m[1]);
    } catch {
      /* gone */
    }
  }
  return total;
}
