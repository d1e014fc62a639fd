/**
 * git: every way an argument can make git run a program the caller picks. Configuration is the
 * big one (core.pager, core.sshCommand, core.fsmonitor, aliases with `!`, filters, …), so `-c`,
 * `--config-env` and writing such keys with `git config` are all refused; so are the transport
 * hooks (`--upload-pack`, `--receive-pack`, `-u`/`--exec`, `ext::` URLs) and subcommands that
 * run a given command (`rebase --exec`, `bisect run`, `submodule foreach`, `filter-branch`, …).
 * git's parse-options accepts unambiguous long-option prefixes, so those are matched too.
 */
import { argDenied, type Screen } from './common.ts';
import { longIs, scanOptions, type Arity, type GetoptSpec } from './getopt.ts';
import { isLong, longOption } from './options.ts';

/** Global options (before the subcommand) that take the next argument as their value. */
const GLOBAL_VALUED = new Set(['-C', '-c', '--git-dir', '--work-tree', '--namespace', '--super-prefix', '--config-env', '--list-cmds', '--attr-source']);

/**
 * Config keys whose value names a program, a hook, or more configuration (lower-cased). One
 * list, used for `git config` and for the `-c`/`--config` refusals' messages, and by the strict preset.
 */
const GIT_PROGRAM_KEYS: readonly string[] = [
  'core\\.(?:sshcommand|pager|editor|fsmonitor|hookspath|gitproxy|askpass|alternaterefscommand|attributesfile|worktree|excludesfile)',
  'credential\\.(?:.*\\.)?helper',
  'diff\\.external',
  'diff\\..*\\.(?:textconv|command)',
  'difftool\\..*\\.(?:cmd|path)',
  'mergetool\\..*\\.(?:cmd|path)',
  'merge\\..*\\.driver',
  'filter\\..*',
  'sequence\\.editor',
  'pager\\..*',
  'alias\\..*',
  'gpg\\..*program',
  'gpg\\.program',
  'gpg\\.ssh\\.defaultkeycommand',
  'commit\\.gpgsign',
  'tag\\.gpgsign',
  'uploadpack\\.packobjectshook',
  'remote\\..*\\.(?:uploadpack|receivepack|vcs|proxy)',
  'protocol\\..*allow',
  'include\\.path',
  'includeif\\..*',
  'submodule\\..*\\.update',
  'url\\..*\\.(?:insteadof|pushinsteadof)',
  'hook\\..*',
  'init\\.templatedir',
  'web\\.browser',
  'browser\\..*\\.(?:cmd|path)',
  'man\\..*\\.(?:cmd|path)',
  'sendemail\\..*',
  'instaweb\\..*',
  'interactive\\.difffilter',
  'ssh\\.variant',
  'imap\\.tunnel',
  'guitool\\..*\\.cmd',
  'help\\.browser',
  'man\\.viewer',
  'receive\\.procreceiverefs',
  'http\\..*proxy',
  'http\\.proxy',
  'core\\.sshcommand',
];
const DANGEROUS_KEY = new RegExp(`^(?:${GIT_PROGRAM_KEYS.join('|')})(?:=|$)`, 's');
/** The sections those keys live in (`core`, `filter`, `alias`, …): what `git config --rename-section` must not produce. */
const PROGRAM_SECTIONS = new Set(GIT_PROGRAM_KEYS.map((k) => k.split('\\.')[0]));

/** Long options that take a value in the transport subcommands (for abbreviations and `--opt --`). */
const TRANSPORT_LONG: Record<string, Arity> = Object.fromEntries(
  [
    'branch',
    'origin',
    'upload-pack',
    'receive-pack',
    'exec',
    'template',
    'reference',
    'reference-if-able',
    'depth',
    'shallow-since',
    'shallow-exclude',
    'separate-git-dir',
    'config',
    'jobs',
    'server-option',
    'filter',
    'bundle-uri',
    'ref-format',
    'refmap',
    'repo',
    'push-option',
    'deepen',
    'negotiation-tip',
    'recurse-submodules-default',
    'submodule-prefix',
    'sort',
  ]
    .map((n): [string, Arity] => [n, 'required'])
    .concat([['recurse-submodules', 'optional']]),
);
/**
 * git's parse-options per subcommand: only what is certain is declared; every other option is
 * taken as "may take a value", so a `--` after it never ends the scan (see getopt.ts).
 */
function subSpec(sub: string): GetoptSpec {
  if (['clone', 'fetch', 'pull', 'push', 'ls-remote'].includes(sub))
    return { shortValued: sub === 'clone' ? 'bocuj' : 'ouj', shortFlags: 'qvlsn', long: TRANSPORT_LONG };
  return { shortFlags: '' };
}

/** Subcommands that exist to run a command or an external program. */
const DENIED_SUBCOMMANDS: Record<string, string> = {
  'filter-branch': 'it runs shell filters given as arguments',
  'send-email': 'it runs sendmail and *-cmd programs given as arguments',
  daemon: 'it serves repositories over the network',
  instaweb: 'it starts a web server and a browser',
  'web--browse': 'it starts a browser program',
  'remote-ext': 'it runs an arbitrary command as a transport',
  credential: 'it talks to credential helpers',
  'credential-store': 'it writes credentials',
  'credential-cache': 'it runs a credential daemon',
  shell: 'it is a restricted login shell',
  'imap-send': 'it runs the imap.tunnel program from the configuration (and the sandbox has no network to reach a server)',
};

/** Long options that name a program to run, per subcommand ('*' = any subcommand). */
const PROGRAM_OPTIONS: { sub: string[] | '*'; long: string; why: string }[] = [
  { sub: '*', long: 'upload-pack', why: 'it names a program git runs for the transfer' },
  { sub: '*', long: 'receive-pack', why: 'it names a program git runs for the transfer' },
  { sub: ['fetch', 'clone', 'ls-remote', 'pull', 'archive', 'push', 'remote', 'submodule'], long: 'exec', why: 'it names a program git runs for the transfer' },
  { sub: ['clone', 'submodule'], long: 'config', why: 'it sets configuration, which can name programs git runs' },
  { sub: ['clone', 'init'], long: 'template', why: 'it installs hooks from a directory the caller chooses' },
  { sub: ['rebase'], long: 'exec', why: 'it runs a command after each commit' },
  { sub: ['difftool', 'mergetool'], long: 'extcmd', why: 'it runs the given command' },
  { sub: ['difftool', 'mergetool'], long: 'tool', why: 'it picks an external program to run' },
  { sub: ['grep'], long: 'open-files-in-pager', why: 'it runs a pager program' },
  { sub: ['config'], long: 'edit', why: 'it starts an editor program' },
  { sub: '*', long: 'ext-diff', why: "it runs the diff.external program from the repository's configuration, which the workspace can change" },
  { sub: '*', long: 'textconv', why: "it runs textconv programs from the repository's attributes and configuration" },
  {
    sub: ['commit', 'tag', 'merge', 'rebase', 'cherry-pick', 'revert', 'am', 'pull'],
    long: 'gpg-sign',
    why: 'it runs the signing program named in the configuration (gpg.program, gpg.ssh.defaultKeyCommand)',
  },
];

/** Short options that name a program to run, per subcommand. */
const PROGRAM_SHORT: { sub: string[]; letter: string; why: string }[] = [
  { sub: ['clone', 'fetch', 'ls-remote', 'pull'], letter: 'u', why: 'it names a program git runs for the transfer (--upload-pack)' },
  { sub: ['clone'], letter: 'c', why: 'it sets configuration, which can name programs git runs' },
  { sub: ['rebase'], letter: 'x', why: 'it runs a command after each commit' },
  { sub: ['difftool', 'mergetool'], letter: 'x', why: 'it runs the given command' },
  { sub: ['difftool', 'mergetool'], letter: 't', why: 'it picks an external program to run' },
  { sub: ['grep'], letter: 'O', why: 'it runs a pager program' },
  { sub: ['config'], letter: 'e', why: 'it starts an editor program' },
  {
    sub: ['commit', 'tag', 'merge', 'rebase', 'cherry-pick', 'revert', 'am', 'pull'],
    letter: 'S',
    why: 'it runs the signing program named in the configuration (gpg.program, gpg.ssh.defaultKeyCommand)',
  },
  { sub: ['tag'], letter: 's', why: 'it runs the signing program named in the configuration (gpg.program, gpg.ssh.defaultKeyCommand)' },
];

export const screenGit: Screen = (args, ctx) => {
  const no = (a: string, why: string) => argDenied(a, ctx.base, why);

  // Anywhere: a transport that runs a command.
  for (const a of args) {
    if (/ext::/i.test(a)) return no(a, 'ext:: URLs make git run an arbitrary command as the transport');
  }

  // Global options, up to the subcommand.
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i];
    if (!a.startsWith('-')) break;
    if (a === '-c' || (a.startsWith('-c') && a.length > 2 && !a.startsWith('--')))
      return no(a, 'it sets configuration, which can name programs git runs (core.pager, core.sshCommand, …)');
    if (isLong(a, 'config-env', { abbrev: true })) return no(a, 'it sets configuration from the environment, which can name programs git runs');
    const lo = longOption(a);
    if (lo && lo.name === 'exec-path' && lo.value !== undefined) return no(a, 'it makes git run its subcommands from another directory');
    if (GLOBAL_VALUED.has(a)) i++;
  }
  const sub = args[i];
  if (sub === undefined) return null;
  const rest = args.slice(i + 1);
  const deniedSub = Object.hasOwn(DENIED_SUBCOMMANDS, sub) ? DENIED_SUBCOMMANDS[sub] : undefined;
  if (deniedSub) return no(sub, deniedSub);
  // The agent lists only the job's own repository's program keys: a submodule's configuration is another file.
  const submodules = 'under git.repositoryPrograms = "disable" git must not enter submodules, whose own configuration is not switched off';
  if (ctx.gitHardened && sub === 'submodule') return no(sub, submodules);
  if (sub === 'bisect' && rest.includes('run')) return no('run', 'git bisect run runs a command for every step');
  if (sub === 'submodule' && rest.includes('foreach')) return no('foreach', 'git submodule foreach runs a command in every submodule');

  if (sub === 'config') {
    // `b.fsmonitor=x` is harmless until `--rename-section b core` turns it into core.fsmonitor.
    if ([...scanOptions(rest, subSpec(sub))].some((t) => longIs(t, 'rename-section'))) {
      const hit = rest.find((a) => !a.startsWith('-') && PROGRAM_SECTIONS.has(a.toLowerCase().split('.')[0]));
      if (hit !== undefined)
        return no(hit, 'renaming a section to or from one whose keys name programs (core, filter, alias, diff, …) sets or moves such keys');
    }
    // Only here: elsewhere `filter.py` or `hook.sh` are file names, not keys.
    for (const a of rest) {
      if (DANGEROUS_KEY.test(a.toLowerCase())) {
        return no(a, 'this configuration key names a program, hook or config file git would use (core.pager, core.sshCommand, aliases, filters, …)');
      }
    }
  }
  for (const t of scanOptions(rest, subSpec(sub))) {
    if (t.kind === 'long') {
      if (ctx.gitHardened && longIs(t, 'recurse-submodules')) return no(t.arg, submodules);
      for (const p of PROGRAM_OPTIONS) {
        if ((p.sub === '*' || p.sub.includes(sub)) && longIs(t, p.long)) return no(t.arg, p.why);
      }
    } else if (t.kind === 'short') {
      for (const p of PROGRAM_SHORT) {
        if (p.sub.includes(sub) && t.letter === p.letter) return no(t.arg, p.why);
      }
    }
  }
  return null;
};
