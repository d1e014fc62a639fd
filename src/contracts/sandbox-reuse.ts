/**
 * Sandbox reuse, set by team policy (`sandbox.reuse`): an agent's gVisor sandbox may run up
 * to `jobs` jobs of the same team, one after the other, for at most `seconds` after it started,
 * between jobs whose limits match. Between two jobs the sandbox's init kills every process,
 * empties /tmp and the job dir and checks it is clean, or the sandbox is discarded. Absent =
 * single-use (one sandbox per job), the strongest isolation: the `strict` preset's choice.
 */
import { z } from 'zod';

export const SandboxReuse = z
  .object({
    jobs: z.number().int().min(2, 'reuse.jobs is how many jobs one sandbox runs: at least 2 (leave reuse out for single-use)').max(1000),
    seconds: z.number().int().min(1).max(3600),
  })
  .strict();
export type SandboxReuse = z.infer<typeof SandboxReuse>;

/**
 * What the `standard` (default) and `open` presets reuse: a fresh sandbox costs ~150 ms per job
 * even from a warm pool, a reused one ~40 ms (bench/RESULTS.md); 50 jobs or 5 minutes bound how
 * long one kernel instance serves a team.
 */
export const DEFAULT_SANDBOX_REUSE: SandboxReuse = { jobs: 50, seconds: 300 };
