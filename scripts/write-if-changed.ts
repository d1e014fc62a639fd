/**
 * How the build scripts write what the Worker reads (build/): only when the bytes change, and by rename, so several
 * `wrangler dev`s starting at once (the tests) never read a half-written file, and a running one does not reload for
 * a rebuild that changed nothing.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** Writes `text` to `file` (making its folder) unless it already holds it; true when it wrote. */
export function writeIfChanged(file: string, text: string): boolean {
  if (existsSync(file) && readFileSync(file, 'utf8') === text) return false;
  mkdirSync(dirname(file), { recursive: true });
  const scratch = `${file}.${process.pid}.tmp`;
  writeFileSync(scratch, text);
  renameSync(scratch, file);
  return true;
}
