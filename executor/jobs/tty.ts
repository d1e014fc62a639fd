/**
 * A job on a pseudo-terminal (`tty: true`): its command runs under util-linux `script`, which allocates a pty inside
 * the sandbox (gVisor provides /dev/ptmx and devpts), sets its size, and copies the job's stdin pipe to the terminal
 * and the terminal to the job's stdout. The sandbox's init and its pipes stay as they are; only the argv changes.
 */
import { existsSync } from 'node:fs';
import type { TtySize } from '../../src/contracts/interactive.ts';

/** Where `script` is, the same path inside the sandbox (its /usr is the host's, read-only). */
const SCRIPT_PATH = '/usr/bin/script';

/** Whether this host (and so its sandboxes) can run a job on a terminal. */
export const ttyAvailable = (): boolean => existsSync(SCRIPT_PATH);

/** Single-quotes a word for `sh`. */
const quote = (w: string): string => `'${w.replaceAll("'", `'\\''`)}'`;

/**
 * The argv that runs `argv` on a terminal of `size`: `-q` no banner, `-e` the child's exit status, `-f` output
 * flushed at once (a REPL's prompt is seen before it reads), and /dev/null as the typescript file.
 */
export function onTerminal(argv: readonly string[], size: TtySize): string[] {
  const command = `stty rows ${size.rows} cols ${size.cols} 2>/dev/null; exec ${argv.map(quote).join(' ')}`;
  return [SCRIPT_PATH, '-q', '-e', '-f', '-c', command, '/dev/null'];
}
