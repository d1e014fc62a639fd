/**
 * What of the host a sandbox may see: the system directories a toolchain needs, read-only,
 * and a minimal /etc. Built from an allowlist so the agent's own files (token, config,
 * workspace parent, /root, /home, /work, /tmp) are simply absent inside, not masked.
 */
import { existsSync, lstatSync, readdirSync, readlinkSync, statSync } from 'node:fs';

export interface SystemEntry {
  /** Same path inside and outside. */
  path: string;
  kind: 'dir' | 'file' | 'symlink';
  /** For symlinks: the link text, recreated inside (merged-/usr: /bin -> usr/bin). */
  target?: string;
}

const TOP_LEVEL = ['usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32', 'opt'];
/** /etc entries programs read at start-up (name service, loader, certificates, alternatives). */
const ETC_ALLOW = new Set([
  'passwd',
  'group',
  'nsswitch.conf',
  'hosts',
  'host.conf',
  'resolv.conf',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'alternatives',
  'localtime',
  'timezone',
  'ssl',
  'ca-certificates',
  'ca-certificates.conf',
  'protocols',
  'services',
  'mime.types',
  'os-release',
  'debian_version',
  'gai.conf',
  'inputrc',
  'bash.bashrc',
  'profile',
  'environment',
  'gitconfig',
  'locale.alias',
  'magic',
  'magic.mime',
]);
/** Toolchain configuration directories (java-17-openjdk, python3.11, perl, php, R, ...). */
const ETC_TOOLCHAIN = /^(java|python|perl|php|ruby|R$|gcc|dotnet|mono|gprolog|ghc)/;

/** Lists what the sandbox sees of the host; `/opt` only when `includeOpt` (it often holds agent installs). */
export function systemView(includeOpt = false): SystemEntry[] {
  const out: SystemEntry[] = [];
  for (const name of TOP_LEVEL) {
    if (name === 'opt' && !includeOpt) continue;
    const p = `/${name}`;
    const e = describe(p);
    if (e) out.push(e);
  }
  if (existsSync('/etc')) {
    for (const name of readdirSync('/etc')) {
      if (!ETC_ALLOW.has(name) && !ETC_TOOLCHAIN.test(name)) continue;
      const e = describe(`/etc/${name}`, true);
      if (e) out.push(e);
    }
  }
  return out;
}

/** `follow`: bind what a symlink points at (an /etc file may be a link into /usr or /run). */
function describe(p: string, follow = false): SystemEntry | null {
  try {
    const l = lstatSync(p);
    if (l.isSymbolicLink() && !follow) return { path: p, kind: 'symlink', target: readlinkSync(p) };
    const s = statSync(p);
    if (s.isDirectory()) return { path: p, kind: 'dir' };
    if (s.isFile()) return { path: p, kind: 'file' };
    return null;
  } catch {
    return null; // dangling link or unreadable: leave it out
  }
}

/**
 * Places under the visible system dirs that hold configuration or credentials jobs do not need:
 * site-wide package-manager configs (npm's `prefix/etc/npmrc` holds registry tokens, pip's
 * `prefix/pip.conf`, cargo's credentials under a shared CARGO_HOME). A sandbox shows each as
 * empty (a directory) or as /dev/null (a file). Only existing paths are returned.
 */
const HIDDEN = [
  '/usr/local/etc',
  '/usr/etc',
  '/usr/lib/node_modules/npm/npmrc',
  '/usr/local/lib/node_modules/npm/npmrc',
  '/usr/share/nodejs/npm/npmrc',
  '/usr/pip.conf',
  '/usr/local/pip.conf',
  '/usr/local/cargo/credentials',
  '/usr/local/cargo/credentials.toml',
  '/usr/local/share/.config',
  '/usr/local/share/.npmrc',
];

export function hiddenPaths(): { path: string; kind: 'dir' | 'file' }[] {
  const out: { path: string; kind: 'dir' | 'file' }[] = [];
  for (const p of HIDDEN) {
    try {
      const l = lstatSync(p);
      if (l.isDirectory()) out.push({ path: p, kind: 'dir' });
      else if (l.isFile()) out.push({ path: p, kind: 'file' });
    } catch {
      /* absent */
    }
  }
  return out;
}
