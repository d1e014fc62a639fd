/**
 * A gVisor sandbox's /etc: the allowlisted host entries (system-view.ts) copied into the driver's
 * read-only rootfs when the driver starts, not bind-mounted one by one into every sandbox. Each
 * bind mount is work for runsc's gofer and sentry at every sandbox start, and /etc is most of a
 * sandbox's mounts (about 40 of 45 on a Debian host): on the strict path (a sandbox per job) that
 * work was a measurable part of every job's CPU (bench/RESULTS.md). A copy in the root costs nothing
 * per sandbox.
 *
 * What a job sees is the host's entries as they were when the agent started (docs/agents.md says to
 * restart the agent after changing them); a job still cannot write them (the root is read-only) and
 * never reaches the host's own inodes. Modes are kept, and ownership too when the agent runs as
 * root, so a file the sandbox user could not read on the host (`/etc/ssl/private`) stays unreadable.
 * An entry the agent cannot copy is returned, and the driver bind-mounts it as before.
 */
import { chmodSync, chownSync, copyFileSync, cpSync, lstatSync, mkdirSync, readdirSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { SystemEntry } from './system-view.ts';

/** Whether `e` is one of the /etc entries this module copies (a file or a directory; symlinks are recreated as links). */
export const isEtcCopy = (e: SystemEntry) => e.kind !== 'symlink' && e.path.startsWith('/etc/');

/** Copies every /etc file and directory of `view` into `rootfs`; answers those it could not copy (bind them instead). */
export function copyEtcInto(rootfs: string, view: SystemEntry[]): SystemEntry[] {
  const failed: SystemEntry[] = [];
  for (const e of view.filter(isEtcCopy)) {
    const dest = join(rootfs, e.path);
    try {
      // An /etc entry may be a link into /run or /usr (resolv.conf): the view shows what it points at.
      const src = realpathSync(e.path);
      mkdirSync(dirname(dest), { recursive: true });
      if (e.kind === 'file') copyFileSync(src, dest);
      else cpSync(src, dest, { recursive: true, verbatimSymlinks: true, force: true });
      keepOwnership(src, dest);
    } catch {
      failed.push(e);
    }
  }
  return failed;
}

/** As root, gives every copied file and directory its source's owner (the copy keeps modes only); a chown may clear set-id bits, so the mode is set again after it. */
function keepOwnership(src: string, dest: string): void {
  if (process.getuid?.() !== 0) return;
  const s = lstatSync(src);
  if (s.isSymbolicLink()) return;
  chownSync(dest, s.uid, s.gid);
  chmodSync(dest, s.mode & 0o7777);
  if (s.isDirectory()) for (const name of readdirSync(src)) keepOwnership(join(src, name), join(dest, name));
}
