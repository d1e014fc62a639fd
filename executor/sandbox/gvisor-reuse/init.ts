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
/**
 * The init's command line (-I -S: nothing from the environment or site dirs). The job user and
 * the PATH of a job without one are given as arguments, so they are defined once (types.ts).
 */
export const REUSE_INIT_ARGV = [INIT_PYTHON, '-I', '-S', '-B', INIT_FILE_INSIDE, String(SANDBOX_UID), String(SANDBOX_GID), SANDBOX_PATH];

/** Puts the init into the root the driver's sandboxes start from: a job can read it, never change it. */
export function placeReuseInit(rootfs: string): void {
  writeFileSync(join(rootfs, INIT_FILE_INSIDE), readFileSync(shippedFile('reuseInit')), { mode: 0o644 });
}
