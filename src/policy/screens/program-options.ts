/**
 * Smaller tools with a single option that names a program to run: sort's compressor, split's
 * filter, sdiff/diff3's diff program, zip's test command, rsync/ssh/scp remote shells and proxy
 * commands, wget's askpass and wgetrc commands. GNU long options are matched with abbreviations.
 */
import { argDenied, type Screen } from './common.ts';
import { clusterFind, isLong, shortCluster } from './options.ts';

interface ProgramOptions {
  long: string[];
  /** Short letters that take a program; `valued` letters end a cluster scan. */
  short?: string;
  valued?: string;
  why: string;
  /** Extra check on every argument (ssh -o ProxyCommand=…). */
  extra?: (a: string, next: string | undefined) => string | null;
}

const SSH_COMMAND_OPTION = /^(?:proxycommand|localcommand|permitlocalcommand|knownhostscommand|match|include|pkcs11provider|securitykeyprovider)\b/i;

const sshExtra = (a: string, next: string | undefined): string | null => {
  if (a === '-o' && next && SSH_COMMAND_OPTION.test(next.trim())) return 'this ssh option runs a local command or loads code';
  if (a.startsWith('-o') && a.length > 2 && SSH_COMMAND_OPTION.test(a.slice(2).trim())) return 'this ssh option runs a local command or loads code';
  return null;
};

const TABLE: Record<string, ProgramOptions> = {
  sort: { long: ['compress-program'], why: 'it runs an arbitrary program to compress temporary files' },
  split: { long: ['filter'], why: 'it pipes every piece to an arbitrary shell command' },
  sdiff: { long: ['diff-program'], why: 'it runs an arbitrary program instead of diff' },
  diff3: { long: ['diff-program'], why: 'it runs an arbitrary program instead of diff' },
  zip: { long: ['unzip-command'], why: 'it runs an arbitrary command to test the archive', extra: (a) => (a === '-TT' ? 'it runs an arbitrary command to test the archive' : null) },
  rsync: { long: ['rsh', 'rsync-path'], short: 'e', valued: 'BfMT', why: 'it runs an arbitrary program as the remote shell' },
  ssh: { long: [], short: 'F', valued: 'BbcDEeiJLlmOopQRSWw', why: 'it reads a config file that can run local commands', extra: sshExtra },
  scp: { long: [], short: 'SF', valued: 'cDiJlPo', why: 'it runs an arbitrary program as ssh or reads a config that can', extra: sshExtra },
  sftp: { long: [], short: 'SFD', valued: 'BbciJlPRo', why: 'it runs an arbitrary program as ssh or reads a config that can', extra: sshExtra },
  wget: { long: ['use-askpass', 'execute', 'config'], short: 'e', valued: 'oaOPiBTtwQUYDIX', why: 'it runs a command or executes wgetrc commands' },
};

export function programOptionsScreen(base: string): Screen | undefined {
  if (!Object.hasOwn(TABLE, base)) return undefined;
  const t = TABLE[base];
  return (args, ctx) => {
    for (let i = 0; i < args.length; i++) {
      const a = args[i];
      if (a === '--') break;
      const extra = t.extra?.(a, args[i + 1]);
      if (extra) return argDenied(a === '-o' ? `${a} ${args[i + 1]}` : a, ctx.base, extra);
      for (const l of t.long) if (isLong(a, l, { abbrev: true })) return argDenied(a, ctx.base, t.why);
      const cluster = t.short ? shortCluster(a) : null;
      if (cluster && clusterFind(cluster, t.short!, t.valued ?? '')) return argDenied(a, ctx.base, t.why);
    }
    return null;
  };
}
