/**
 * What one job may use of the agent's machine. The team policy sets these (`limits` in the
 * policy document); an agent applies the same defaults to a job whose spec names none, so a
 * job is never unlimited. Which mechanism enforces each limit depends on the sandbox driver
 * (executor/README.md, "Limits").
 */
import { z } from 'zod';

const MiB = 1024 * 1024;

export const ResourceLimits = z.object({
  /** Memory of the whole job (its processes, and under gVisor its /tmp too). */
  memoryBytes: z
    .number()
    .int()
    .min(16 * MiB)
    .max(64 * 1024 * MiB),
  /** Processes (threads count) the job may have at once. */
  maxProcesses: z.number().int().min(8).max(65_536),
  /** Open files per process (RLIMIT_NOFILE). */
  maxOpenFiles: z.number().int().min(16).max(1_048_576),
  /** Largest file the job may write (RLIMIT_FSIZE). */
  maxFileBytes: z
    .number()
    .int()
    .min(1024)
    .max(1024 * 1024 * MiB),
  /** CPU seconds per process (RLIMIT_CPU); the wall-clock timeout bounds the job as a whole. */
  cpuSeconds: z.number().int().min(1).max(86_400),
  /** Size of the job's private /tmp. */
  tmpBytes: z
    .number()
    .int()
    .min(MiB)
    .max(64 * 1024 * MiB),
  /** Bytes the job may write to disk (workspace and its job dir) before it is stopped. */
  diskWriteBytes: z
    .number()
    .int()
    .min(MiB)
    .max(1024 * 1024 * MiB),
});
export type ResourceLimits = z.infer<typeof ResourceLimits>;

/** Safe for a shared machine running a few jobs at once, generous enough for compilers and JVMs. */
export const DEFAULT_RESOURCE_LIMITS: ResourceLimits = {
  memoryBytes: 1024 * MiB,
  maxProcesses: 256,
  maxOpenFiles: 1024,
  maxFileBytes: 1024 * MiB,
  cpuSeconds: 300,
  tmpBytes: 256 * MiB,
  diskWriteBytes: 2048 * MiB,
};
