/**
 * The reuse init's compiled job start (spawn.c beside this file, a shipped file): built once when the
 * gVisor driver starts, with the host's C compiler, into the agent's private state dir — or, where the host
 * has none, the one prebuilt beside the shipped source (the agent image's build stage compiles it), if it was
 * built from that very source for this machine. Without either the init starts jobs with os.posix_spawn: the
 * same job, ~75 more system calls through the sentry (about 1.5 ms of CPU per reused job under the ptrace
 * platform).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { err, ok, type Result } from '../../../src/contracts/errors.ts';
import { shippedFile } from '../../shipped-files.ts';
import { runQuiet } from '../exec-util.ts';

/** A compile this long means something is wrong with the toolchain: the init goes without. */
const COMPILE_TIMEOUT_MS = 30_000;
const COMPILERS = ['cc', 'gcc', 'clang'];
/** The prebuilt start beside the source, and the sha256 (hex) of the source it was built from in `<name>.sha256`. */
export const PREBUILT_SPAWNER = 'reuse-spawn.so';
/** ELF e_machine of the architectures Node runs the agent on: a prebuilt start for another one is not used. */
const ELF_MACHINE: Partial<Record<NodeJS.Architecture, number>> = { x64: 62, arm64: 183 };

/**
 * Compiles spawn.c into `dir` (created 0700: only the agent writes what the sandbox's root init loads), or
 * takes the prebuilt one (see above). Returns the shared object's path, or why there is none.
 */
export async function buildSpawner(dir: string, o: { path?: string; source?: string } = {}): Promise<Result<string>> {
  const source = o.source ?? shippedFile('reuseSpawn');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const out = join(dir, 'gatehouse-spawn.so');
  const tried: string[] = [];
  for (const cc of COMPILERS) {
    const r = await runQuiet(cc, ['-O2', '-shared', '-fPIC', '-o', out, source], {
      env: { PATH: o.path ?? process.env.PATH ?? '/usr/bin:/bin' },
      timeoutMs: COMPILE_TIMEOUT_MS,
    });
    if (r.code === 0) return ok(out);
    tried.push(`${cc}: ${(r.error ?? r.stderr.trim().split('\n').slice(-1)[0]) || `exit ${r.code}`}`);
  }
  const prebuilt = prebuiltBeside(source);
  if (prebuilt.ok) return prebuilt;
  return err('compile_error', `no C compiler built the reuse init's job start (${tried.join('; ')}), and ${prebuilt.error.message}`);
}

/** The prebuilt start beside `source`, if it was built from that source (its recorded sha256) for this machine. */
function prebuiltBeside(source: string): Result<string> {
  const so = join(dirname(source), PREBUILT_SPAWNER);
  let recorded: string;
  let elf: Buffer;
  try {
    recorded = readFileSync(`${so}.sha256`, 'utf8').trim();
    elf = readFileSync(so);
  } catch {
    return err('compile_error', `none is prebuilt (${so})`);
  }
  if (recorded !== createHash('sha256').update(readFileSync(source)).digest('hex'))
    return err('compile_error', `the prebuilt ${so} was built from another source than ${source}`);
  if (elf.length < 20 || elf.readUInt32BE(0) !== 0x7f454c46 || elf.readUInt16LE(18) !== ELF_MACHINE[process.arch])
    return err('compile_error', `the prebuilt ${so} is not a shared object for this machine (${process.arch})`);
  return ok(so);
}
