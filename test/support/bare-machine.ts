/**
 * A machine without some programs, for tests of what happens on a fresh install: a command runs in a
 * private mount namespace whose /usr/bin is an overlay (upper layer on a tmpfs) with the named files
 * removed. Nothing outside the namespace changes; it goes away with its last process. Needs root
 * (unshare, mount).
 *
 * Optionally apt-get is a stand-in that records every call (one line of arguments) in `aptLog` and
 * "installs" bubblewrap and runsc by linking the machine's own /usr/bin/bwrap and /usr/bin/runsc back
 * in (seen through a bind mount of the real /usr/bin); any other package is recorded and not installed.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface BareMachine {
  /** Files of /usr/bin that do not exist inside (e.g. runsc, bwrap, apt-get). */
  hide: string[];
  /** Put the recording apt-get in place (after `hide`, so hiding apt-get and this exclude each other). */
  aptLog?: string;
}

const PRELUDE = `
d=$1; hide=$2; apt_log=$3; shift 3
mkdir -p "$d/layer" "$d/machine-bin"
mount --bind /usr/bin "$d/machine-bin"
mount -t tmpfs tmpfs "$d/layer"
mkdir "$d/layer/upper" "$d/layer/work"
mount -t overlay overlay -o "lowerdir=/usr/bin,upperdir=$d/layer/upper,workdir=$d/layer/work" /usr/bin
for f in $hide; do rm -f "/usr/bin/$f"; done
if [ -n "$apt_log" ]; then
  cat > /usr/bin/apt-get <<EOF
#!/bin/sh
echo "\\$*" >> '$apt_log'
[ "\\$1" = install ] || exit 0
shift
for p in "\\$@"; do
  case "\\$p" in
    bubblewrap) ln -sf '$d/machine-bin/bwrap' /usr/bin/bwrap; echo "stand-in apt-get: bubblewrap installed" ;;
    runsc) ln -sf '$d/machine-bin/runsc' /usr/bin/runsc; echo "stand-in apt-get: runsc installed" ;;
    -*) ;;
    *) echo "stand-in apt-get: not installing \\$p" ;;
  esac
done
EOF
  chmod 0755 /usr/bin/apt-get
fi
exec "$@"
`;

/** A scratch directory for one bare machine (remove it with removeBareMachineDir). */
export function bareMachineDir(): string {
  return mkdtempSync(join(tmpdir(), 'gh-bare-'));
}

/**
 * Removes a bare machine's scratch directory once its processes have ended. The mount points in it are
 * empty directories outside the namespace; if one is not (a mount that escaped), nothing is removed,
 * since removing it would remove the machine's real /usr/bin.
 */
export function removeBareMachineDir(dir: string): void {
  for (const mountPoint of ['machine-bin', 'layer']) {
    const p = join(dir, mountPoint);
    if (existsSync(p) && readdirSync(p).length > 0) throw new Error(`${p} is not empty (a mount outside its namespace?); not removing ${dir}`);
  }
  rmSync(dir, { recursive: true, force: true });
}

/** argv that runs `cmd` on the bare machine whose scratch directory is `dir` (from bareMachineDir). */
export function bareMachineArgv(dir: string, m: BareMachine, cmd: string[]): string[] {
  return ['unshare', '--mount', '--propagation', 'private', '/bin/sh', '-ec', PRELUDE, 'sh', dir, m.hide.join(' '), m.aptLog ?? '', ...cmd];
}

export function spawnOnBareMachine(dir: string, m: BareMachine, cmd: string[], opts: SpawnOptions): ChildProcess {
  const [file, ...args] = bareMachineArgv(dir, m, cmd);
  return spawn(file, args, opts);
}

/** Whether this host can make a bare machine (root, unshare, overlayfs); probed once. */
export const BARE_MACHINE_SUPPORTED: boolean = (() => {
  if (process.getuid?.() !== 0) return false;
  const dir = bareMachineDir();
  try {
    const probe = join(dir, 'probe.sh');
    writeFileSync(probe, '#!/bin/sh\n! command -v bwrap >/dev/null\n');
    chmodSync(probe, 0o755);
    const [file, ...args] = bareMachineArgv(dir, { hide: ['bwrap'] }, [probe]);
    return spawnSync(file, args, { stdio: 'ignore', timeout: 30_000 }).status === 0;
  } catch {
    return false;
  } finally {
    removeBareMachineDir(dir);
  }
})();
