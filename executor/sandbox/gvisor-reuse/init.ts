/**
 * The reuse init (init.py beside this file, a shipped file: executor/shipped-files.ts): where it
 * lies in a sandbox's read-only root and the command line it starts with. What it does and how it
 * speaks with the agent is written at the top of init.py.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { shippedFile } from '../../shipped-files.ts';
import { SANDBOX_GID, SANDBOX_PATH, SANDBOX_UID } from '../types.ts';

const INIT_FILE_INSIDE = '/.gatehouse-init.py';
/** The interpreter of the reuse init (Debian package python3-minimal). */
export const INIT_PYTHON = '/usr/bin/python3';
/** The compiled job start (spawner.ts), when the agent could build it. */
const SPAWNER_FILE_INSIDE = '/.gatehouse-spawn.so';

/**
 * The init's command line (-I -S: nothing from the environment or site dirs). The job user and
 * the PATH of a job without one are given as arguments, so they are defined once (types.ts); the
 * compiled job start is named when the root holds it (the init then never falls back).
 */
export function reuseInitArgv(withSpawner: boolean): string[] {
  return [
    INIT_PYTHON,
    '-I',
    '-S',
    '-B',
    INIT_FILE_INSIDE,
    String(SANDBOX_UID),
    String(SANDBOX_GID),
    SANDBOX_PATH,
    ...(withSpawner ? [SPAWNER_FILE_INSIDE] : []),
  ];
}

/**
 * Puts the init, and its compiled job start if there is one, into the root the driver's sandboxes
 * start from: a job can read both, never change them.
 */
export function placeReuseInit(rootfs: string, spawner: string | null): void {
  writeFileSync(join(rootfs, INIT_FILE_INSIDE), readFileSync(shippedFile('reuseInit')), { mode: 0o644 });
  if (spawner) writeFileSync(join(rootfs, SPAWNER_FILE_INSIDE), readFileSync(spawner), { mode: 0o644 });
}
