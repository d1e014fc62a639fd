/**
 * Which runtimes this agent can run: each RUNTIMES executable resolved in the sandbox PATH
 * (the sandboxes show the host's /usr read-only at the same paths, so resolving here is
 * resolving there) and asked for its version once at start. Used for `hello` and code mode.
 */
import { RUNTIMES, RUNTIME_NAMES, type RuntimeName } from '../../src/contracts/runtimes.ts';
import type { RuntimeInfo } from '../../src/contracts/agent-protocol.ts';
import { runQuiet } from '../sandbox/exec-util.ts';
import { SANDBOX_PATH } from '../sandbox/types.ts';
import { findInPath } from '../jobs/resolve.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RuntimeTable {
  /** Every available runtime with its preferred executable. */
  list: RuntimeInfo[];
  /** All available executables per runtime (the request may name a non-preferred one). */
  byRuntime: Map<RuntimeName, RuntimeInfo[]>;
}

export async function probeRuntimes(names: readonly RuntimeName[] = RUNTIME_NAMES): Promise<RuntimeTable> {
  const byRuntime = new Map<RuntimeName, RuntimeInfo[]>();
  await Promise.all(
    names.map(async (name) => {
      const def = RUNTIMES[name];
      const found: RuntimeInfo[] = [];
      for (const exe of def.executables) {
        const path = findInPath(exe);
        if (!path) continue;
        found.push({ name, executable: exe, path, version: await versionOf(path, def.versionArgs) });
      }
      if (found.length) byRuntime.set(name, found);
    }),
  );
  const list = names.flatMap((n) => byRuntime.get(n)?.slice(0, 1) ?? []);
  return { list, byRuntime };
}

async function versionOf(path: string, args: string[]): Promise<string> {
  // A scratch directory as cwd, HOME and TMPDIR, removed afterwards: a toolchain asked for its version may write
  // files where it runs (the Erlang VM's erl_crash.dump, build caches), and none may land in the user's checkout.
  const scratch = mkdtempSync(join(tmpdir(), 'gatehouse-probe-'));
  try {
    // The same clean env a job gets: the version must not depend on the agent's own variables.
    const r = await runQuiet(path, args, { env: { PATH: SANDBOX_PATH, HOME: scratch, TMPDIR: scratch }, cwd: scratch, timeoutMs: 10_000 });
    return versionLine(r.stdout.trim() || r.stderr.trim());
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * Start-up notices some toolchains print before their version: JVM warnings (kotlinc: "OpenJDK 64-Bit Server VM
 * warning: …") and the Erlang VM's banner (`elixir --version` prints "Erlang/OTP 25 [erts-…]" first).
 */
const NOTICE = /^(OpenJDK .*VM warning:|Java HotSpot.*warning:|Picked up (_JAVA_OPTIONS|JAVA_TOOL_OPTIONS)|WARNING: |Erlang\/OTP \d+ \[)/;

/** The version a toolchain printed: its first line that is not a start-up notice, without an "info:" prefix. */
export function versionLine(output: string): string {
  const line =
    output
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l && !NOTICE.test(l)) ?? '';
  return line.replace(/^info:\s*/, '').slice(0, 200) || 'unknown';
}

/** The runtime's executable: the one named (when compatible and present) or the preferred one. */
export function pickRuntimeExecutable(table: RuntimeTable, runtime: RuntimeName, requested?: string): RuntimeInfo | null {
  const all = table.byRuntime.get(runtime);
  if (!all?.length) return null;
  if (requested) {
    const base = requested.slice(requested.lastIndexOf('/') + 1);
    return all.find((r) => r.executable === base) ?? null;
  }
  return all[0];
}
