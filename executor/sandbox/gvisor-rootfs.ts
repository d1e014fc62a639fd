/**
 * The read-only root every gVisor sandbox of an agent starts from, built once when the driver starts: the
 * allowlisted `/etc` entries copied in (etc-snapshot.ts), the merged-/usr links, mount points for the other
 * system paths and the job's dirs, and the reuse init (gvisor-reuse/init.ts). It answers the system paths each
 * sandbox bind-mounts (the driver's bundles name them).
 */
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { copyEtcInto, isEtcCopy } from './etc-snapshot.ts';
import { JOB_DIR_INSIDE, WORKSPACE_INSIDE } from './gvisor-sandbox.ts';
import { placeReuseInit } from './gvisor-reuse/init.ts';
import { systemView, type SystemEntry } from './system-view.ts';
import { CA_BUNDLE_INSIDE } from './trusted-cas.ts';

/**
 * Builds the root at `rootfs` (anything there before is removed); `caBundle`: jobs get the trusted CA bundle
 * mounted; `spawner`: the reuse init's compiled job start (gvisor-reuse/spawner.ts), when built.
 */
export function buildRootfs(rootfs: string, o: { caBundle?: string; spawner: string | null }): { binds: SystemEntry[] } {
  rmSync(rootfs, { recursive: true, force: true });
  mkdirSync(rootfs, { recursive: true, mode: 0o755 });
  for (const d of ['proc', 'dev', 'sys', 'tmp', 'etc', WORKSPACE_INSIDE.slice(1), JOB_DIR_INSIDE.slice(1)]) {
    mkdirSync(join(rootfs, d), { recursive: true });
  }
  const view = systemView();
  const uncopied = copyEtcInto(rootfs, view);
  const binds = view.filter((e) => e.kind !== 'symlink' && (!isEtcCopy(e) || uncopied.includes(e)));
  for (const e of view) {
    const at = join(rootfs, e.path);
    if (e.kind === 'symlink') symlinkSync(e.target!, at);
    else if (!binds.includes(e))
      continue; // copied into the root
    else if (e.kind === 'dir') mkdirSync(at, { recursive: true });
    else writeFileSync(at, '');
  }
  if (o.caBundle) {
    mkdirSync(join(rootfs, CA_BUNDLE_INSIDE, '..'), { recursive: true });
    writeFileSync(join(rootfs, CA_BUNDLE_INSIDE), '');
  }
  placeReuseInit(rootfs, o.spawner);
  return { binds };
}
