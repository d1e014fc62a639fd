/**
 * What crosses the boundary between the parent Worker and a script's isolate (Workers RPC).
 * Requests from the isolate are untrusted input: the host validates them with these schemas.
 */
import { z } from 'zod';

/** `command_output` = Deno.Command, `exec` = child_process.exec, `gatehouse_exec` = gatehouse.exec. */
const SubprocessOp = z.enum(['command_output', 'exec', 'gatehouse_exec']);

const EnvMap = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'env names are [A-Za-z_][A-Za-z0-9_]*'), z.string().max(64 * 1024));

export const SubprocessRequest = z.object({
  op: SubprocessOp,
  command: z.string().max(64 * 1024),
  /** Absent for `exec` (a shell string) and for gatehouse.exec without args (sh -c, like execute). */
  args: z
    .array(z.string().max(64 * 1024))
    .max(1000)
    .optional(),
  cwd: z.string().max(4096).optional(),
  env: EnvMap.optional(),
  stdin: z
    .string()
    .max(512 * 1024)
    .optional(),
  timeoutMs: z.number().int().positive().optional(),
});
export type SubprocessRequest = z.infer<typeof SubprocessRequest>;

/** What the isolate's wrappers turn into the documented shapes. */
export interface SubprocessValue {
  /** Exit code; -1 when the process died by a signal or timed out. */
  code: number;
  stdout: string;
  stderr: string;
  /** gatehouse.exec's result: the execute tool's shape. */
  result: Record<string, unknown>;
}

export type HostAnswer<T> = { ok: true; value: T } | { ok: false; error: { code: string; message: string; reason?: string } };

export interface ScriptRunOptions {
  vars: unknown;
  consoleMaxBytes: number;
  returnMaxBytes: number;
  sleepMaxMs: number;
  tickBudget: number;
  cpuMs: number;
  guardName: string;
}

export interface ScriptRunReport {
  /** Console lines joined with newlines: one string, so the report's serialized size stays near its byte caps. */
  console: string;
  consoleTruncated: boolean;
  /** The return value as JSON text; null when there is none or on error. */
  resultJson: string | null;
  error: string | null;
  ticks: number;
}
