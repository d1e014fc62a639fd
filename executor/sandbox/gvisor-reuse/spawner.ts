/**
 * The reuse init's compiled job start (spawn.c beside this file, a shipped file): built once when the
 * gVisor driver starts, with the host's C compiler, into the agent's private state dir. Without a compiler
 * the init starts jobs with os.posix_spawn: the same job, ~75 more system calls through the sentry (about
 * 1.5 ms of CPU per reused job under the ptrace platform).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { err, ok, type Result } from '../../../src/contracts/errors.ts';
import { shippedFile } from '../../shipped-files.ts';
import { runQuiet } from '../exec-util.ts';

/** A compile this long means something is wrong with the toolchain: the init goes without. */
const COMPILE_TIMEOUT_MS = 30_000;
const COMPILERS = ['cc', 'gcc', 'clang'];

/**
 * Compiles spawn.c into `dir` (created 0700: only the agent writes what the sandbox's root init loads).
 * Returns the shared object's path, or why there is none.
 */
export async function buildSpawner(dir: string, path = process.env.PATH ?? '/usr/bin:/bin'): Promise<Result<string>> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const out = join(dir, 'gatehouse-spawn.so');
  const tried: string[] = [];
  for (const cc of COMPILERS) {
    const r = await runQuiet(cc, ['-O2', '-shared', '-fPIC', '-o', out, shippedFile('reuseSpawn')], { env: { PATH: path }, timeoutMs: COMPILE_TIMEOUT_MS });
    if (r.code === 0) return ok(out);
    tried.push(`${cc}: ${(r.error ?? r.stderr.trim().split('\n').slice(-1)[0]) || `exit ${r.code}`}`);
  }
  return err('compile_error', `no C compiler built the reuse init's job start (${tried.join('; ')})`);
}
