/**
 * The disk-write limit: what a sandbox's host processes wrote to disk, added up while its job runs
 * (/proc/PID/io write_bytes, which counts page-cache writes to files, not pipes or memory). Past
 * the job's limit the sandbox is killed and the runner reports `disk_write_limit`.
 */
import { readFile } from 'node:fs/promises';
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
  let busy = false;
  const poll = async () => {
    if (busy || exceeded) return;
    busy = true;
    try {
      memoryHit ||= sandbox.memoryLimitHit();
      const total = await writtenBytes(sandbox.hostPids());
      baseline ??= total;
      if (total - baseline > limit && !exceeded) {
        exceeded = true;
        void sandbox.kill(0);
      }
    } finally {
      busy = false;
    }
  };
  if (!fresh) void poll();
  const t = setInterval(() => void poll(), pollMs);
  return { exceeded: () => exceeded, memoryHit: () => memoryHit || sandbox.memoryLimitHit(), stop: () => clearInterval(t) };
}

/** Sum of /proc/PID/io write_bytes over `pids` (each read is tiny and never blocks: procfs). */
async function writtenBytes(pids: number[]): Promise<number> {
  let total = 0;
  await Promise.all(
    pids.map(async (pid) => {
      try {
        const m = /^write_bytes: (\d+)$/m.exec(await readFile(`/proc/${pid}/io`, 'utf8'));
        if (m) total += Number(m[1]);
      } catch {
        /* gone */
      }
    }),
  );
  return total;
}
